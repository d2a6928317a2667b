import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { accountWithKey } from '../../../test/helpers/auth'
import { freshDatabase, selectRows, testLogger } from '../../../test/helpers/db'
import { TEST_NOW } from '../../../test/helpers/env'
import { startServer } from '../../../test/helpers/server'

// A private seeded catalog whose price rows are spread over the 12 hours before TEST_NOW (as syncs
// of different games would leave them), written before the server builds its snapshot.
const database = await freshDatabase('seeded')
const { db } = database
await db.execute(sql`update card_prices set last_updated_at = ${TEST_NOW.toISOString()}::timestamptz - ((card_id % 12) || ' hours')::interval`)
const server = startServer({ db, redis: undefined, logger: testLogger })
const proKey = (await accountWithKey(db, 'pro')).key
const starterKey = (await accountWithKey(db, 'starter')).key

interface Row {
  card_id: number
  printing: string
  last_updated_at: string
  [field: string]: unknown
}

/** Every price row after `since` as docs/adr/0041-card-prices-and-card-fields.md's price row, in the feed's order, computed by Postgres. */
async function expectedRows(since: string, game?: string): Promise<Row[]> {
  const rows = await selectRows<Row & { last_updated_at: string | Date; market_price_as_of: string | Date | null }>(
    db,
    sql`select cp.card_id, c.name, c.marketplace_id, c.product_type, c.foil_only::int as foil_only, cp.printing,
               cp.market_price, to_char(cp.market_price_as_of, 'YYYY-MM-DD') as market_price_as_of, cp.low_price, cp.median_price,
               cp.lowest_with_shipping, cp.buylist_price, cp.price_change_24h, cp.price_change_7d, cp.price_change_30d,
               cp.last_updated_at, c.image_url
        from card_prices cp join cards c on c.id = cp.card_id join games g on g.id = c.game_id
        where cp.last_updated_at > ${since}::timestamptz ${game ? sql`and g.slug = ${game}` : sql``}
        order by cp.last_updated_at, cp.card_id, cp.printing collate "C"`,
  )
  return rows.map((row) => ({ ...row, last_updated_at: new Date(row.last_updated_at).toISOString() }))
}

async function feed(query: string, key = proKey) {
  return server.json(`/v1/prices/changes?${query}`, key)
}

/** Follows `next` until `has_more` is false; returns every row and the last `next`. */
async function walk(first: string, limit: number) {
  const rows: Row[] = []
  let answer = await feed(`${first}&limit=${limit}`)
  for (;;) {
    expect(answer.status).toBe(200)
    expect(answer.body.data.length).toBeLessThanOrEqual(limit)
    rows.push(...answer.body.data)
    if (!answer.body.meta.has_more) return { rows, next: answer.body.meta.next as string }
    answer = await feed(`cursor=${answer.body.meta.next}&limit=${limit}`)
  }
}

describe('GET /v1/prices/changes', () => {
  test('following next from an old instant returns every price row once, in update order, with every field', async () => {
    const since = '2000-01-01T00:00:00Z'
    const { rows } = await walk(`since=${since}`, 97)
    const expected = await expectedRows(since)
    expect(expected.length).toBeGreaterThan(500)
    expect(rows).toEqual(expected)
  })

  test('since is exclusive and may carry an offset; a game narrows the feed', async () => {
    const middle = new Date(TEST_NOW.getTime() - 5 * 3600_000)
    const [game] = await selectRows<{ slug: string }>(db, sql`select slug from games where card_count > 0 order by id limit 1`)
    const { rows } = await walk(`since=${encodeURIComponent('2026-11-20T09:00:00+02:00')}&game=${game!.slug}`, 40)
    expect(new Date('2026-11-20T09:00:00+02:00').getTime()).toBe(middle.getTime())
    expect(rows).toEqual(await expectedRows(middle.toISOString(), game!.slug))
    expect(rows.length).toBeGreaterThan(0)
    for (const row of rows) expect(new Date(row.last_updated_at).getTime()).toBeGreaterThan(middle.getTime())
  })

  test('the last next is a resume point: nothing new, nothing returned, and it stays the same', async () => {
    const { next } = await walk('since=2000-01-01T00:00:00Z', 500)
    const later = await feed(`cursor=${next}`)
    expect(later.body).toMatchObject({ data: [], meta: { count: 0, has_more: false, next } })
    const future = await feed('since=2100-01-01T00:00:00Z')
    expect(future.body.data).toEqual([])
    expect((await feed(`cursor=${future.body.meta.next}`)).body.data).toEqual([])
  })

  test.each([
    ['', ['since', 'cursor'], 'give exactly one of since and cursor'],
    ['since=2026-11-20T00:00:00Z&cursor=abc', ['since', 'cursor'], 'give exactly one of since and cursor'],
    ['since=yesterday', ['since'], 'must be an ISO 8601 date-time with a zone, e.g. 2026-11-20T00:00:00Z'],
    ['since=2026-11-20', ['since'], 'must be an ISO 8601 date-time with a zone, e.g. 2026-11-20T00:00:00Z'],
    ['cursor=not-a-cursor', ['cursor'], "must be a previous answer's meta.next, unchanged"],
    [`cursor=${Buffer.from('["x",1,"Normal"]').toString('base64url')}`, ['cursor'], "must be a previous answer's meta.next, unchanged"],
    ['since=2026-11-20T00:00:00Z&limit=1001', ['limit'], 'must be an integer from 1 to 1000'],
  ])('%j is 400 INVALID_PARAMETER naming %j', async (query, fields, message) => {
    const { status, body } = await feed(query)
    expect(status).toBe(400)
    expect(body.error.code).toBe('INVALID_PARAMETER')
    expect(body.error.details.map((detail: { field: string }) => detail.field)).toEqual(fields)
    expect(body.error.details[0].message).toBe(message)
  })

  test('an unknown game is 404; Starter is 403 TIER_REQUIRED', async () => {
    expect((await feed('since=2026-11-20T00:00:00Z&game=no-such-game')).status).toBe(404)
    const refused = await feed('since=2026-11-20T00:00:00Z', starterKey)
    expect(refused.status).toBe(403)
    expect(refused.body.error.code).toBe('TIER_REQUIRED')
  })
})
