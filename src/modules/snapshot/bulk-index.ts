/**
 * Ints per slot: card id (0 = empty), start and end of its row in the bulk buffer (equal: a card
 * without prices, which has no Bulk price row, docs/adr/0047-bulk-price-rows-and-ids-lists.md), and its row in the snapshot's columns.
 */
const SLOT = 4

/** The table is at most this full: short probes. 0.8 saved 4 MB on `large` but cost the bulk route CPU (docs/adr/0119-prices-first-then-the-search-index.md). */
const MAX_FILL = 0.5

/** Selections told apart by `seen` before it is cleared: one byte per slot, not four (1.5 MB less on `large`). */
const STAMPS = 0xff

/** The cards a bulk request names: their slots in request order (repeats dropped), and the ids of no card. */
export interface BulkSelection {
  slots: Int32Array
  count: number
  /** Ids that name no card, in request order, each once. */
  missing: number[]
  /** Ids of cards without prices (presales), in request order, each once: not in `slots`. */
  unpriced: number[]
}

/**
 * Card id → where its serialised Bulk price row lies: an open-addressed table (linear probing,
 * Fibonacci hashing) in one Int32Array. A 500-id bulk request is memory-bound, not compute-bound:
 * a Map entry leads to a card object and then to its fields, several cache misses per id, while a
 * slot here is one. Repeats within a request are dropped with a per-slot stamp instead of a Set.
 */
export class BulkIndex {
  private readonly table: Int32Array
  private readonly shift: number
  private readonly mask: number
  /** The request that last selected each slot, of the last STAMPS (see `select`): repeats are dropped without a Set. */
  private readonly seen: Uint8Array
  private stamp = 0

  constructor(capacityFor: number) {
    let bits = 1
    while ((1 << bits) * MAX_FILL < capacityFor) bits++
    this.shift = 32 - bits
    this.mask = (1 << bits) - 1
    this.table = new Int32Array((1 << bits) * SLOT)
    this.seen = new Uint8Array(1 << bits)
  }

  private home(id: number): number {
    return Math.imul(id, 0x9e3779b1) >>> this.shift
  }

  /** A card without prices: found, but with no Bulk price row. */
  addUnpriced(id: number, row = -1): void {
    this.add(id, 0, 0, row)
  }

  add(id: number, start: number, end: number, row: number): void {
    let slot = this.home(id)
    while (this.table[slot * SLOT] !== 0) slot = (slot + 1) & this.mask
    const at = slot * SLOT
    this.table[at] = id
    this.table[at + 1] = start
    this.table[at + 2] = end
    this.table[at + 3] = row
  }

  /** The slot holding the id, or -1. */
  private find(id: number): number {
    let slot = this.home(id)
    for (;;) {
      const held = this.table[slot * SLOT]!
      if (held === id) return slot
      if (held === 0) return -1
      slot = (slot + 1) & this.mask
    }
  }

  /** Where the card's Bulk price row lies in the bulk buffer (it had none so far); false when no card has the id. */
  setRange(id: number, start: number, end: number): boolean {
    const slot = this.find(id)
    if (slot < 0) return false
    this.table[slot * SLOT + 1] = start
    this.table[slot * SLOT + 2] = end
    return true
  }

  /** The card's row, or -1 when no card has the id. */
  rowOf(id: number): number {
    const slot = this.find(id)
    return slot < 0 ? -1 : this.table[slot * SLOT + 3]!
  }

  /**
   * The slots of these ids in order, each card once (cards without prices apart, by id).
   * Synchronous: the stamp it marks slots with is this call's alone.
   */
  select(ids: number[]): BulkSelection {
    if (++this.stamp === STAMPS) {
      this.seen.fill(0) // a quarter of a megabyte once every 255 requests
      this.stamp = 1
    }
    const slots = new Int32Array(ids.length)
    let count = 0
    let missing: Set<number> | undefined
    let unpriced: number[] | undefined
    for (const id of ids) {
      const slot = this.find(id)
      if (slot < 0) (missing ??= new Set()).add(id)
      else if (this.seen[slot] !== this.stamp) {
        this.seen[slot] = this.stamp
        if (this.table[slot * SLOT + 1] === this.table[slot * SLOT + 2]) (unpriced ??= []).push(id)
        else slots[count++] = slot
      }
    }
    return { slots, count, missing: missing ? [...missing] : [], unpriced: unpriced ?? [] }
  }

  start(slot: number): number {
    return this.table[slot * SLOT + 1]!
  }

  end(slot: number): number {
    return this.table[slot * SLOT + 2]!
  }

  row(slot: number): number {
    return this.table[slot * SLOT + 3]!
  }
}
