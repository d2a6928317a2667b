import { describe, expect, test } from 'bun:test'
import { BulkIndex } from './bulk-index'

/** An index of these ids: the i-th has row i, at bytes i × 10 to i × 10 + 7. */
function indexOf(ids: number[]) {
  const index = new BulkIndex(ids.length)
  ids.forEach((id, row) => index.add(id, row * 10, row * 10 + 7, row))
  return { index, ids }
}

/** The selected ids (through their rows) with their byte ranges, and the missing ids. */
const selected = ({ index, ids }: ReturnType<typeof indexOf>, asked: number[]) => {
  const { slots, count, missing } = index.select(asked)
  const found = Array.from(slots.subarray(0, count), (slot) => [ids[index.row(slot)]!, index.start(slot), index.end(slot)])
  return { found, missing }
}

describe('BulkIndex', () => {
  test('finds every id it holds with its row and bytes, and no other, in a table 7/8 full (long probes that wrap)', () => {
    // Sized for 4 ids (8 slots) and given 7: probes run into each other and past the table's end.
    const held = [3, 1 << 28, 5 << 28, 7, 2_147_483_647, 64, 12_345]
    const table = { index: new BulkIndex(4), ids: held }
    held.forEach((id, row) => table.index.add(id, row * 10, row * 10 + 7, row))
    expect(selected(table, held).found).toEqual(held.map((id, row) => [id, row * 10, row * 10 + 7]))
    const others = Array.from({ length: 200 }, (_, i) => i * 7919 + 1).filter((id) => !held.includes(id))
    expect(selected(table, others)).toEqual({ found: [], missing: others })
  })

  test('a catalog-sized table answers 2,000 random ids like a Map', () => {
    const ids = [...new Set(Array.from({ length: 50_000 }, () => 1 + Math.floor(Math.random() * 2_000_000)))]
    const table = indexOf(ids)
    const rows = new Map(ids.map((id, row) => [id, row]))
    const asked = Array.from({ length: 2_000 }, () => 1 + Math.floor(Math.random() * 2_000_000))
    const distinct = [...new Set(asked)]
    const { found, missing } = selected(table, asked)
    expect(found).toEqual(distinct.filter((id) => rows.has(id)).map((id) => [id, rows.get(id)! * 10, rows.get(id)! * 10 + 7]))
    expect(missing).toEqual(distinct.filter((id) => !rows.has(id)))
  })

  test('keeps request order, answers a repeated id once, and lists each unknown id once in order', () => {
    const table = indexOf([10, 20, 30, 40])
    const { found, missing } = selected(table, [30, 7, 10, 30, 8, 7, 40, 10])
    expect(found.map(([id]) => id)).toEqual([30, 10, 40])
    expect(missing).toEqual([7, 8])
  })

  test('cards without prices are found but apart, in request order, each once', () => {
    const table = { index: new BulkIndex(4), ids: [10, 20] }
    table.ids.forEach((id, row) => table.index.add(id, row * 10, row * 10 + 7, row))
    table.index.addUnpriced(30)
    table.index.addUnpriced(40)
    const selection = table.index.select([40, 10, 99, 30, 40, 20, 30])
    expect(selection.unpriced).toEqual([40, 30])
    expect(selection.missing).toEqual([99])
    expect(Array.from(selection.slots.subarray(0, selection.count), (slot) => table.ids[table.index.row(slot)])).toEqual([10, 20])
  })

  test('a repeat is dropped within one selection only, also when the stamp wraps around', () => {
    const table = indexOf([10, 20])
    expect(selected(table, [10, 10]).found).toHaveLength(1)
    expect(selected(table, [10, 20]).found).toHaveLength(2)
    ;(table.index as unknown as { stamp: number }).stamp = 0xff - 2
    for (let i = 0; i < 4; i++) expect(selected(table, [20, 10, 20]).found.map(([id]) => id)).toEqual([20, 10])
  })
})
