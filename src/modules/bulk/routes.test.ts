import { describe, expect, test } from 'bun:test'
import { parse } from 'csv-parse/sync'
import { unpack } from 'msgpackr'
import { type SQL, sql } from 'drizzle-orm'
import { accountWithKey } from '../../../test/helpers/auth'
import { freshDatabase, selectRows, testLogger } from '../../../test/helpers/db'
import { TEST_NOW } from '../../../test/helpers/env'
import { startServer } from '../../../test/helpers/server'
import type { Tier } from '../auth/tiers'
import { EXPORT_COLUMNS, exportSet } from './service'

// Over real HTTP on a private copy of the seeded tiny catalog, in-process quota. The single-card
// endpoints (tested against the database in their own files) and SQL written here are the oracles.
const database = await freshDatabase('seeded')
const { db } = database
const rows = <T>(query: SQL) => selectRows<T>(db, query)
const server = startServer({ db, redis: undefined, logger: testLogger })
const keyOf = async (tier: Tier) => (await accountWithKey(db, tier)).key
const keys = { free: await keyOf('free'), starter: await keyOf('starter'), pro: await keyOf('pro'), business: await keyOf('business') }
/** For the single-card oracles, so their requests never count against the key under test. */
const oracleKey = await keyOf('business')

const get = (path: string, key: string) => server.json(path, key)
async function post(path: string, key: string, body: unknown) {
  const response = await server.get(path, { method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: JSON.stringify(body) })
  return { status: response.status, body: (await response.json()) as any }
}
/** A card's prices as GET /v1/cards/:id/prices gives them, always as a list. */
async function pricesOf(id: number) {
  const { body } = await get(`/v1/cards/${id}/prices`, oracleKey)
  return Array.isArray(body.data) ? body.data : [body.data]
}

const cardIds = (await rows<{ id: number }>(sql`select id from cards order by id`)).map((row) => row.id)
const unknownId = cardIds.at(-1)! + 100
const [bare] = await rows<{ id: number }>(sql`select id from cards c where not exists (select 1 from card_prices cp where cp.card_id = c.id) order by id limit 1`)

describe('GET /v1/bulk/cards', () => {
  test('full cards with their prices, in request order, a repeated id once, unknown ids in not_found', async () => {
    const asked = [cardIds[9]!, unknownId, cardIds[2]!, cardIds[9]!, bare!.id]
    const { status, body } = await get(`/v1/bulk/cards?ids=${asked.join(',')}`, keys.pro)
    expect(status).toBe(200)
    expect(body.data.map((card: { id: number }) => card.id)).toEqual([cardIds[9], cardIds[2], bare!.id])
    for (const card of body.data) {
      const { prices, ...rest } = card
      expect(rest).toEqual((await get(`/v1/cards/${card.id}`, keys.pro)).body.data)
      expect(prices).toEqual(card.id === bare!.id ? [] : await pricesOf(card.id))
    }
    expect(body.meta).toEqual({ requested: 4, found: 3, not_found: [unknownId] })
    expect(body.rate_limit.daily_limit).toBe(10_000)
  })

  test('100 ids are fine, 101 are 400; Starter is 403 naming Pro', async () => {
    expect((await get(`/v1/bulk/cards?ids=${cardIds.slice(0, 100).join(',')}`, keys.pro)).body.data).toHaveLength(100)
    const over = await get(`/v1/bulk/cards?ids=${cardIds.slice(0, 101).join(',')}`, keys.pro)
    expect(over.status).toBe(400)
    expect(over.body.error.details).toEqual([{ field: 'ids', message: 'must be 1 to 100 comma-separated card ids (positive integers up to 2147483647)' }])
    expect((await get('/v1/bulk/cards?ids=1,x', keys.pro)).status).toBe(400)
    const refused = await get('/v1/bulk/cards?ids=1', keys.starter)
    expect(refused.status).toBe(403)
    expect(refused.body.error.message).toContain('Pro')
  })
})

describe('GET /v1/bulk/history', () => {
  test('keyed by card id, each list the single-card history of the same window; unknown ids in not_found', async () => {
    const [withHistory] = await rows<{ id: number }>(sql`select card_id as id from price_history group by card_id order by count(*) desc, card_id limit 1`)
    const asked = [withHistory!.id, unknownId, bare!.id, cardIds[4]!]
    for (const range of ['month', 'quarter', 'year'] as const) {
      const { status, body } = await get(`/v1/bulk/history?ids=${asked.join(',')}&range=${range}`, keys.business)
      expect(status).toBe(200)
      expect(Object.keys(body.data).map(Number).sort((a, b) => a - b)).toEqual([withHistory!.id, bare!.id, cardIds[4]!].sort((a, b) => a - b))
      let count = 0
      for (const id of [withHistory!.id, bare!.id, cardIds[4]!]) {
        const single = await get(`/v1/cards/${id}/history?range=${range}`, keys.business)
        expect(body.data[id]).toEqual(single.body.data)
        const { count: _count, ...window } = single.body.meta
        expect(body.meta).toMatchObject(window)
        count += single.body.data.length
      }
      expect(body.data[withHistory!.id].length).toBeGreaterThan(0)
      expect(body.data[bare!.id]).toEqual([])
      expect(body.meta).toMatchObject({ range, requested: 4, found: 3, not_found: [unknownId], count })
    }
  })

  test('range defaults to month; all, 51 ids and Pro keys are refused', async () => {
    expect((await get(`/v1/bulk/history?ids=${cardIds[0]}`, keys.business)).body.meta).toMatchObject({ range: 'month', days: 30 })
    const all = await get(`/v1/bulk/history?ids=${cardIds[0]}&range=all`, keys.business)
    expect(all.status).toBe(400)
    expect(all.body.error.details).toEqual([{ field: 'range', message: 'must be one of: month, quarter, year' }])
    expect((await get(`/v1/bulk/history?ids=${cardIds.slice(0, 51).join(',')}`, keys.business)).status).toBe(400)
    expect((await get(`/v1/bulk/history?ids=${cardIds.slice(0, 50).join(',')}`, keys.business)).status).toBe(200)
    const refused = await get(`/v1/bulk/history?ids=${cardIds[0]}`, keys.pro)
    expect(refused.status).toBe(403)
    expect(refused.body.error.message).toContain('Business')
  })
})

describe('GET /v1/export/set/:id', async () => {
  // A set with sealed products and several printings; one card renamed so CSV must quote it.
  const [set] = await rows<{ id: number; slug: string; game_slug: string }>(sql`
    select s.id, s.slug, g.slug as game_slug from sets s join games g on g.id = s.game_id
    where (select count(*) from cards c join card_prices cp on cp.card_id = c.id where c.set_id = s.id) > 20
    order by s.id limit 1`)
  const [renamed] = await rows<{ id: number }>(sql`select c.id from cards c join card_prices cp on cp.card_id = c.id where c.set_id = ${set!.id} order by c.id limit 1`)
  await db.execute(sql`update cards set name = ${'The "Quoted", Card\nof Lines'} where id = ${renamed!.id}`)
  const download = (format: string, key = keys.business) => server.get(`/v1/export/set/${set!.id}${format}`, { headers: { 'x-api-key': key } })

  test('JSON: the set price rows, as an attachment, with a count and rate_limit', async () => {
    const response = await download('')
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toBe('application/json')
    expect(response.headers.get('content-disposition')).toBe(`attachment; filename="${set!.game_slug}-${set!.slug}-prices-2026-11-20.json"`)
    const body = (await response.json()) as any
    const prices = await get(`/v1/sets/${set!.id}/prices`, keys.business)
    expect(body.data).toEqual(prices.body.data)
    expect(body.data.some((row: { name: string }) => row.name.includes('"Quoted"'))).toBe(true)
    expect(body.meta).toEqual({ set_id: set!.id, set_name: expect.any(String), game_slug: set!.game_slug, count: body.data.length, exported_at: TEST_NOW.toISOString() })
    expect(body.rate_limit.daily_limit).toBe(50_000)
    expect(response.headers.get('x-ratelimit-limit')).toBe('50000')
  })

  test('CSV: RFC 4180 with a header row; parsed back, the same rows as JSON (nulls empty)', async () => {
    const response = await download('?format=csv')
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toBe('text/csv; charset=utf-8')
    expect(response.headers.get('content-disposition')).toBe(`attachment; filename="${set!.game_slug}-${set!.slug}-prices-2026-11-20.csv"`)
    const text = await response.text()
    expect(text).toContain('"The ""Quoted"", Card\nof Lines"')
    const [header, ...records] = parse(text) as string[][]
    expect(header).toEqual([...EXPORT_COLUMNS])
    const json = ((await (await download('')).json()) as any).data as Record<string, unknown>[]
    expect(records).toEqual(json.map((row) => EXPORT_COLUMNS.map((column) => (row[column] === null ? '' : String(row[column])))))
  })

  test('streamed a batch of cards at a time: any batch size gives the same rows', async () => {
    const whole = ((await (await download('')).json()) as any).data
    for (const batchCards of [1, 3, 1000]) {
      for (const format of ['json', 'csv'] as const) {
        const exported = await exportSet(db, { setId: set!.id, format, now: TEST_NOW, rateLimit: null, onError: () => {}, batchCards })
        const text = await new Response(exported.stream).text()
        if (format === 'json') expect(JSON.parse(text).data).toEqual(whole)
        else expect(parse(text, { columns: true })).toHaveLength(whole.length)
      }
    }
  })

  test('an unknown set is 404 before anything is sent; format=xml is 400; Pro is 403', async () => {
    const missing = await server.json('/v1/export/set/999999', keys.business)
    expect(missing.status).toBe(404)
    expect(missing.body.error.code).toBe('NOT_FOUND')
    const xml = await server.json(`/v1/export/set/${set!.id}?format=xml`, keys.business)
    expect(xml.status).toBe(400)
    expect(xml.body.error.details).toEqual([{ field: 'format', message: 'must be one of: json, csv' }])
    expect((await download('', keys.pro)).status).toBe(403)
  })
})

describe('POST /v1/bulk/resolve/marketplace', async () => {
  const known = await rows<{ id: number; marketplace_id: number }>(sql`select id, marketplace_id from cards order by id limit 5`)

  test('cards with prices in request order; unknown ids in not_found; credits by tier', async () => {
    const ids = [known[3]!.marketplace_id, 42, known[0]!.marketplace_id, known[3]!.marketplace_id]
    for (const [tier, credits] of [['starter', 4], ['pro', 2], ['business', 1]] as const) {
      const before = (await get('/v1/usage', keys[tier])).body.data.account.today_requests
      const { status, body } = await post('/v1/bulk/resolve/marketplace', keys[tier], { ids })
      expect(status).toBe(200)
      expect(body.data.resolved.map((item: any) => [item.marketplace_id, item.card.id])).toEqual([
        [known[3]!.marketplace_id, known[3]!.id],
        [known[0]!.marketplace_id, known[0]!.id],
        [known[3]!.marketplace_id, known[3]!.id],
      ])
      for (const item of body.data.resolved) {
        expect(item.card).toEqual((await get(`/v1/cards/${item.card.id}`, oracleKey)).body.data)
        expect(item.prices).toEqual(await pricesOf(item.card.id))
      }
      expect(body.data.not_found).toEqual([42])
      expect(body.meta).toEqual({ requested: 4, resolved: 3, credits_consumed: credits })
      expect((await get('/v1/usage', keys[tier])).body.data.account.today_requests).toBe(before + credits)
    }
  })

  test('over the tier limit is 400 and costs 1; bad bodies are 400; Hobby is 403', async () => {
    const key = await keyOf('starter')
    const over = await post('/v1/bulk/resolve/marketplace', key, { ids: Array.from({ length: 101 }, (_, i) => i + 1) })
    expect(over.status).toBe(400)
    expect(over.body.error.details).toEqual([{ field: 'ids', message: 'must hold at most 100 items on the Starter tier' }])
    expect(over.body.rate_limit.daily_remaining).toBe(2_499)
    for (const body of [{}, { ids: [] }, { ids: 'x' }, { ids: [0] }, { ids: [1.5] }]) {
      expect((await post('/v1/bulk/resolve/marketplace', key, body)).status).toBe(400)
    }
    const refused = await post('/v1/bulk/resolve/marketplace', await keyOf('hobby'), { ids: [1] })
    expect(refused.status).toBe(403)
    expect(refused.body.error.message).toContain('Starter')
  })

  test('not enough quota left for the credits: 429 naming them, and nothing is taken', async () => {
    const key = await keyOf('starter') // 2,500 a day, 1 credit per item
    const hundred = Array.from({ length: 100 }, (_, i) => known[i % known.length]!.marketplace_id)
    for (let i = 0; i < 24; i++) expect((await post('/v1/bulk/resolve/marketplace', key, { ids: hundred })).status).toBe(200)
    expect((await post('/v1/bulk/resolve/marketplace', key, { ids: [known[0]!.marketplace_id] })).body.rate_limit.daily_remaining).toBe(99)
    const refused = await post('/v1/bulk/resolve/marketplace', key, { ids: hundred })
    expect(refused.status).toBe(429)
    expect(refused.body.error.code).toBe('RATE_LIMIT_EXCEEDED')
    expect(refused.body.error.message).toContain('needs 100 credits')
    expect(refused.body.error.message).toContain('99 are left')
    const usage = (await get('/v1/usage', key)).body.data.account
    expect(usage).toMatchObject({ today_requests: 2_401, rejected_today: 1 })
    expect((await post('/v1/bulk/resolve/marketplace', key, { ids: hundred.slice(0, 99) })).status).toBe(200)
  })
})

describe('POST /v1/bulk/resolve/name', async () => {
  // A name only one card has; a name several games share (a reprint) but one game has once.
  const [unique] = await rows<{ id: number; name: string }>(sql`
    select min(id) as id, min(name) as name from cards group by clean_name having count(*) = 1 and min(length(name)) > 12 order by min(id) limit 1`)
  const [shared] = await rows<{ name: string; slug: string; id: number }>(sql`
    select c.name, g.slug, c.id from cards c join games g on g.id = c.game_id
    where (select count(*) from cards o where o.clean_name = c.clean_name) > 1
      and (select count(*) from cards o where o.clean_name = c.clean_name and o.game_id = c.game_id) = 1
    order by c.id limit 1`)
  const misspelt = unique!.name.slice(0, 3) + unique!.name.slice(4)
  const sharedMisspelt = shared!.name.slice(0, 2) + shared!.name.slice(3)

  test('exact, misspelt, shared and unknown names; the game filter settles the shared one', async () => {
    const names = [unique!.name.toUpperCase(), misspelt, shared!.name, 'Zzqx Wvvy Qqq', sharedMisspelt]
    const { status, body } = await post('/v1/bulk/resolve/name', keys.pro, { names })
    expect(status).toBe(200)
    const [exact, fuzzy] = body.data.resolved
    expect(exact).toMatchObject({ query: names[0], match: 'exact', score: 1, card: { id: unique!.id } })
    expect(exact.prices).toEqual(await pricesOf(unique!.id))
    expect(fuzzy).toMatchObject({ query: misspelt, match: 'fuzzy', card: { id: unique!.id } })
    expect(fuzzy.score).toBeGreaterThanOrEqual(0.6)
    expect(fuzzy.score).toBeLessThan(1)
    // The shared name, exact or misspelt, fits several cards equally well: reported, not guessed.
    expect(body.data.ambiguous.map((item: { query: string }) => item.query)).toEqual([shared!.name, sharedMisspelt])
    for (const [i, item] of body.data.ambiguous.entries()) {
      expect(item.candidates.length).toBeGreaterThan(1)
      expect(item.candidates.map((c: { id: number }) => c.id)).toContain(shared!.id)
      expect(item.candidates[1].score).toBe(item.candidates[0].score)
      if (i === 0) for (const c of item.candidates) expect(c.score).toBe(1)
      else expect(item.candidates[0].score).toBeLessThan(1)
    }
    expect(body.data.not_found).toEqual(['Zzqx Wvvy Qqq'])
    expect(body.meta).toEqual({ requested: 5, resolved: 2, credits_consumed: 3 })

    const narrowed = await post('/v1/bulk/resolve/name', keys.pro, { names: [shared!.name], game: shared!.slug })
    expect(narrowed.body.data.resolved).toMatchObject([{ match: 'exact', card: { id: shared!.id } }])
    expect(narrowed.body.data.ambiguous).toEqual([])
  })

  test('an unknown game is 404; an empty or too long name is 400', async () => {
    expect((await post('/v1/bulk/resolve/name', keys.pro, { names: ['x y'], game: 'no-such-game' })).status).toBe(404)
    expect((await post('/v1/bulk/resolve/name', keys.pro, { names: [''] })).status).toBe(400)
    expect((await post('/v1/bulk/resolve/name', keys.pro, { names: ['x'.repeat(201)] })).status).toBe(400)
    expect((await post('/v1/bulk/resolve/name', keys.pro, { names: [] })).status).toBe(400)
  })
})

describe('msgpack on the bulk endpoints', () => {
  test('Accept: application/msgpack gives the JSON body msgpack-encoded, for reads and resolves alike', async () => {
    const requests: [string, RequestInit][] = [
      [`/v1/bulk/cards?ids=${cardIds.slice(0, 5).join(',')}`, {}],
      [`/v1/bulk/history?ids=${cardIds.slice(0, 3).join(',')}&range=quarter`, {}],
      ['/v1/bulk/resolve/marketplace', { method: 'POST', body: JSON.stringify({ ids: [1, 2, 3] }) }],
    ]
    for (const [path, init] of requests) {
      const send = (accept: string) =>
        server.get(path, { ...init, headers: { 'x-api-key': keys.business, 'content-type': 'application/json', accept } })
      const json = await send('application/json')
      expect(json.headers.get('content-type')).toStartWith('application/json')
      expect(json.headers.get('vary')).toBe('Accept')
      const packed = await send('application/msgpack')
      expect(packed.status).toBe(200)
      expect(packed.headers.get('content-type')).toBe('application/msgpack')
      const { rate_limit: jsonLimit, ...jsonBody } = (await json.json()) as any
      const { rate_limit: packedLimit, ...packedBody } = unpack(new Uint8Array(await packed.arrayBuffer()))
      expect(packedBody).toEqual(jsonBody)
      expect(packedLimit.daily_remaining).toBe(jsonLimit.daily_remaining - 1) // each costs 1 (3 resolves × 0.1 on Business)
    }
  })
})
