import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { selectRows } from '../../../test/helpers/db'
import { seededCatalogServer } from '../../../test/helpers/server'

// Search and autocomplete answers are kept per snapshot like card prices (docs/adr/0112-search-in-memory.md):
// a repeat is the same answer with its own rate_limit, an ETag names it, and a refusal is never kept.
const { database, server, proKey } = await seededCatalogServer()
const [card] = await selectRows<{ clean_name: string }>(database.db, sql`select clean_name from cards where clean_name ~ '^[a-z]{5,}' order by id limit 1`)
const prefix = card!.clean_name.slice(0, 3)

const keyed = (path: string, headers: Record<string, string> = {}) => server.get(path, { headers: { 'x-api-key': proKey, ...headers } })
const withoutRateLimit = ({ rate_limit, ...rest }: any) => rest

describe('search and autocomplete answers kept for the snapshot', () => {
  for (const path of [`/v1/search?q=${prefix}&per_page=5`, `/v1/cards/autocomplete?q=${prefix}`]) {
    test(`${path.split('?')[0]}: a repeat is the same answer and charges again; If-None-Match gives 304`, async () => {
      const first = await keyed(path)
      expect(first.status).toBe(200)
      const etag = first.headers.get('etag')
      expect(etag).toMatch(/^W\/"/)
      const firstBody = (await first.json()) as any
      expect(firstBody.data.length).toBeGreaterThan(0)

      const again = await keyed(path)
      expect(again.status).toBe(200)
      expect(again.headers.get('etag')).toBe(etag)
      const againBody = (await again.json()) as any
      expect(withoutRateLimit(againBody)).toEqual(withoutRateLimit(firstBody))
      expect(againBody.rate_limit.daily_remaining).toBe(firstBody.rate_limit.daily_remaining - 1)

      const notModified = await keyed(path, { 'if-none-match': etag! })
      expect(notModified.status).toBe(304)
      expect(await notModified.text()).toBe('')
      expect(Number(notModified.headers.get('x-ratelimit-remaining'))).toBe(againBody.rate_limit.daily_remaining - 1)
    })
  }

  test('a refused query is refused again, whatever it sends as If-None-Match', async () => {
    for (const path of ['/v1/search?q=ab&game=no-such-game', '/v1/cards/autocomplete?q=ab&game=no-such-game']) {
      for (let i = 0; i < 2; i++) {
        const refused = await keyed(path, { 'if-none-match': '*' })
        expect({ path, status: refused.status }).toEqual({ path, status: 404 })
      }
    }
  })
})
