import { describe, expect, test } from 'bun:test'
import { TIER_POLICY, type Tier } from '../../src/modules/auth/tiers'
import { accountWithKey } from '../helpers/auth'
import { freshDatabase, testLogger } from '../helpers/db'
import { startServer } from '../helpers/server'

// Bulk resolve's item limit reads the same on every tier and at every length over it
// (docs/adr/0096-bulk-resolve-limits-read-the-same-on-every-tier.md), over real HTTP.
const database = await freshDatabase('seeded')
const server = startServer({ db: database.db, redis: undefined, logger: testLogger })

const ROUTES = [
  ['/v1/bulk/resolve/marketplace', 'ids', (n: number) => Array.from({ length: n }, (_, i) => i + 1)],
  ['/v1/bulk/resolve/name', 'names', (n: number) => Array.from({ length: n }, (_, i) => `Card ${i}`)],
] as const

async function post(path: string, key: string, body: unknown) {
  const response = await server.get(path, { method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: JSON.stringify(body) })
  return { status: response.status, body: (await response.json()) as any, remaining: response.headers.get('x-ratelimit-remaining') }
}

describe('a resolve over the tier’s item limit', () => {
  for (const tier of ['starter', 'pro', 'business'] as const satisfies Tier[]) {
    const { label, dailyQuota, resolve } = TIER_POLICY[tier]
    const limit = resolve!.maxItems
    test(`${label}: over ${limit} items, by one or by thousands, is a 400 saying "at most ${limit} items on the ${label} tier", costing 1`, async () => {
      const { key } = await accountWithKey(database.db, tier)
      let used = 0
      for (const [path, field, items] of ROUTES) {
        for (const count of [limit + 1, 1_001, 5_000]) {
          if (count <= limit) continue
          const answer = await post(path, key, { [field]: items(count) })
          used++
          const message = `must hold at most ${limit} items on the ${label} tier`
          expect({ path, count, status: answer.status, error: answer.body.error }).toEqual({
            path,
            count,
            status: 400,
            error: { code: 'INVALID_PARAMETER', message: `Invalid body: '${field}' ${message} (got ${count})`, details: [{ field, message }], request_id: expect.any(String) },
          })
          expect(answer.body.rate_limit.daily_remaining).toBe(dailyQuota - used)
          expect(answer.remaining).toBe(String(dailyQuota - used))
        }
      }
      // At the limit it is answered.
      const atLimit = await post('/v1/bulk/resolve/marketplace', key, { ids: ROUTES[0][2](limit) })
      expect(atLimit.status).toBe(200)
      expect(atLimit.body.meta.requested).toBe(limit)
    })
  }

  test('the documented limits are the tier table’s', async () => {
    const doc = (await server.json('/openapi.json')).body
    for (const [path, field] of ROUTES) {
      const schema = doc.paths[path].post.requestBody.content['application/json'].schema
      const property = schema.properties?.[field] ?? doc.components.schemas[schema.$ref?.split('/').at(-1)]?.properties[field]
      expect(property.maxItems).toBeUndefined()
      expect(property.description).toContain('at most Starter 100, Pro 500, Business 1,000')
    }
  })
})
