import { describe, expect, test } from 'bun:test'
import { moduleCycles, moduleOf } from './module-cycles'

const graph = (pairs: [string, string][]) => {
  const edges = new Map<string, Map<string, string>>()
  for (const [from, to] of pairs) edges.set(from, (edges.get(from) ?? new Map()).set(to, `${from}.ts → ${to}.ts`))
  return edges
}

describe('module cycles', () => {
  test('a file belongs to its module folder, or to its layer; tests and files outside src belong to none', () => {
    expect(moduleOf('src/modules/catalog/queries.ts')).toBe('catalog')
    expect(moduleOf('src/modules/auth/quota/lua.ts')).toBe('auth')
    expect(moduleOf('src/shared/clock.ts')).toBe('shared')
    expect(moduleOf('src/config.ts')).toBe('src/config.ts')
    expect(moduleOf('src/modules/catalog/routes.test.ts')).toBeUndefined()
    expect(moduleOf('test/helpers/db.ts')).toBeUndefined()
  })

  test('a cycle through several modules is found whole, and a layered graph has none', () => {
    const layered = graph([
      ['catalog', 'shared'],
      ['prices', 'catalog'],
      ['prices', 'shared'],
      ['bulk', 'prices'],
    ])
    expect(moduleCycles(layered)).toEqual([])
    const cyclic = graph([...[...layered].flatMap(([from, tos]) => [...tos.keys()].map((to) => [from, to] as [string, string])), ['catalog', 'bulk']])
    expect(moduleCycles(cyclic).map((members) => members.sort())).toEqual([['bulk', 'catalog', 'prices']])
  })
})
