import { describe, expect, test } from 'bun:test'
import { parse } from 'csv-parse/sync'
import { type SQL, sql } from 'drizzle-orm'
import { unpack } from 'msgpackr'
import { accountWithKey } from '../../../test/helpers/auth'
import { freshDatabase, selectRows, testLogger } from '../../../test/helpers/db'
import { TEST_NOW } from '../../../test/helpers/env'
import { eventually } from '../../../test/helpers/eventually'
import { startServer } from '../../../test/helpers/server'
import { openPostgres } from '../../db/client'
import { createLogger } from '../../shared/logger'
import type { Tier } from '../auth/tiers'
import { EXPORT_ATTRIBUTES, EXPORT_COLUMNS, exportSet } from './service'

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
/** For resolve's prices, which carry no sales whatever the tier: card prices as below Pro. */
const plainOracleKey = await keyOf('starter')
/** A card's prices as GET /v1/cards/:id/prices gives them, always as a list: with sales (Business), or without. */
async function pricesOf(id: number, key = oracleKey) {
  const { body } = await get(`/v1/cards/${id}/prices`, key)
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
    expect(body.meta).toEqual({ requested: 4, found: 3, not_found: [unknownId], total: 3 })
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
      expect(
        Object.keys(body.data)
          .map(Number)
          .sort((a, b) => a - b),
      ).toEqual([withHistory!.id, bare!.id, cardIds[4]!].sort((a, b) => a - b))
      let count = 0
      for (const id of [withHistory!.id, bare!.id, cardIds[4]!]) {
        const single = await get(`/v1/cards/${id}/history?range=${range}`, keys.business)
        expect(body.data[id]).toEqual(single.body.data)
        const { count: _count, total: _total, ...window } = single.body.meta
        expect(body.meta).toMatchObject(window)
        count += single.body.data.length
      }
      expect(body.data[withHistory!.id].length).toBeGreaterThan(0)
      expect(body.data[bare!.id]).toEqual([])
      expect(body.meta).toMatchObject({ range, requested: 4, found: 3, not_found: [unknownId], count, total: count })
    }
  })

  test('range=all is the full history the tier allows, as for one card', async () => {
    // The seed reaches back a year; a point from March 2025 (where the data starts) is older than any `year` window.
    const [card] = await rows<{ id: number }>(sql`select card_id as id from price_history group by card_id order by card_id limit 1`)
    await db.execute(sql`
      insert into price_history (card_id, printing, date, market_price, low_price)
      select card_id, printing, ${'2025-03-02'}, 1.5, 1.25 from price_history where card_id = ${card!.id} group by card_id, printing`)
    const { status, body } = await get(`/v1/bulk/history?ids=${card!.id}&range=all`, keys.business)
    expect(status).toBe(200)
    const single = await get(`/v1/cards/${card!.id}/history?range=all`, keys.business)
    expect(body.data[card!.id]).toEqual(single.body.data)
    expect(body.meta).toMatchObject({ range: 'all', days: null, from: null, clipped_to_tier: false, tier_history_days: null })
    // Older than a year: `all` really reaches past `year`.
    const year = await get(`/v1/bulk/history?ids=${card!.id}&range=year`, keys.business)
    expect(body.data[card!.id].length).toBeGreaterThan(year.body.data[card!.id].length)
    expect(body.data[card!.id][0].date < year.body.meta.from).toBe(true)
  })

  test('printing is an exact filter: cards without it get an empty list; a printing none of them has is 400', async () => {
    // One card with Holofoil points and one (of a game without Holofoil) with points of other printings only.
    const [holo] = await rows<{ id: number }>(sql`select card_id as id from price_history where printing = 'Holofoil' group by card_id order by card_id limit 1`)
    const [other] = await rows<{ id: number }>(sql`
      select h.card_id as id from price_history h
      where not exists (select 1 from card_prices cp where cp.card_id = h.card_id and cp.printing = 'Holofoil')
      group by h.card_id order by h.card_id limit 1`)
    const path = `/v1/bulk/history?ids=${holo!.id},${other!.id},${unknownId}&range=year&printing=Holofoil`
    const { status, body } = await get(path, keys.business)
    expect(status).toBe(200)
    const single = await get(`/v1/cards/${holo!.id}/history?range=year&printing=Holofoil`, keys.business)
    expect(single.body.data.length).toBeGreaterThan(0)
    expect(body.data[holo!.id]).toEqual(single.body.data)
    expect(body.data[other!.id]).toEqual([])
    expect(body.meta).toMatchObject({ found: 2, not_found: [unknownId], count: single.body.data.length })
    // Without the filter the same card has other printings' points too.
    const unfiltered = await get(`/v1/bulk/history?ids=${holo!.id}&range=year`, keys.business)
    expect(unfiltered.body.data[holo!.id].length).toBeGreaterThan(single.body.data.length)

    const [printings] = await rows<{ list: string }>(sql`
      select string_agg(distinct printing, ', ' order by printing) as list from card_prices where card_id = ${other!.id}`)
    const typo = await get(`/v1/bulk/history?ids=${other!.id},${bare!.id}&printing=Holofoil`, keys.business)
    expect(typo.status).toBe(400)
    expect(typo.body.error.code).toBe('INVALID_PARAMETER')
    expect(typo.body.error.details).toEqual([{ field: 'printing', message: `must be a printing of one of these cards: ${printings!.list}` }])
    // Only ids that name no card: nothing to check the printing against, every id is not found.
    const none = await get(`/v1/bulk/history?ids=${unknownId}&printing=Holofoil`, keys.business)
    expect(none.status).toBe(200)
    expect(none.body).toMatchObject({ data: {}, meta: { found: 0, not_found: [unknownId], count: 0 } })
    expect((await get(`/v1/bulk/history?ids=${holo!.id}&printing=`, keys.business)).status).toBe(400)
  })

  test('range defaults to month; an unknown range, 51 ids and Pro keys are refused', async () => {
    expect((await get(`/v1/bulk/history?ids=${cardIds[0]}`, keys.business)).body.meta).toMatchObject({ range: 'month', days: 30 })
    const decade = await get(`/v1/bulk/history?ids=${cardIds[0]}&range=decade`, keys.business)
    expect(decade.status).toBe(400)
    expect(decade.body.error.details).toEqual([{ field: 'range', message: 'must be one of: month, quarter, year, all' }])
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
  // An attribute no export column names (as a real source keeps for kinds the spec does not list): in custom_attributes.other.
  await db.execute(sql`update cards set custom_attributes = custom_attributes || '{"artist": "Ken Sugimori"}'::jsonb where id = ${renamed!.id}`)
  // A presale card of the set, with no prices yet: exported too. A copy of the renamed card under a new id and number.
  await db.execute(sql`insert into cards (set_id, game_id, marketplace_id, name, clean_name, number, rarity, image_url, marketplace_url, product_type,
                         foil_only, total_listings, shipping_category_id, product_status_id, hp, custom_attributes, updated_at)
                       select set_id, game_id, (select max(marketplace_id) + 1 from cards), 'Presale Card', 'presale card', '999', rarity, image_url,
                              marketplace_url, product_type, foil_only, total_listings, shipping_category_id, 20, hp, custom_attributes, updated_at
                       from cards where id = ${renamed!.id}`)
  const download = (format: string, key = keys.business) => server.get(`/v1/export/set/${set!.id}${format}`, { headers: { 'x-api-key': key } })

  test('JSON: every card and sealed product of the set, priced or not, in number order, with prices and sales, as an attachment', async () => {
    const response = await download('')
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toBe('application/json;charset=utf-8')
    expect(response.headers.get('content-disposition')).toBe(`attachment; filename="${set!.game_slug}-${set!.slug}-prices-2026-11-20.json"`)
    const body = (await response.json()) as any
    // Every product of the set, cards by number ("2" before "10"), sealed products last.
    const products = await rows<{ id: number }>(sql`select id from cards where set_id = ${set!.id}
      order by product_type = 'Sealed Products', length(number), number, id`)
    expect(body.data.map((card: { id: number }) => card.id)).toEqual(products.map((row) => row.id))
    // Each item is the full card with its prices and sales, as bulk cards gives it.
    const bulk = await get(
      `/v1/bulk/cards?ids=${products
        .slice(0, 100)
        .map((row) => row.id)
        .join(',')}`,
      keys.pro,
    )
    expect(body.data.slice(0, 100)).toEqual(bulk.body.data)
    expect(body.data.some((card: { product_type: string; number: string | null }) => card.product_type === 'Sealed Products' && card.number === null)).toBe(true)
    expect(body.data.some((card: { prices: unknown[] }) => card.prices.length === 0)).toBe(true)
    expect(body.data.some((card: { prices: { sales_as_of: string | null }[] }) => card.prices.some((price) => price.sales_as_of !== null))).toBe(true)
    expect(body.data.some((card: { name: string }) => card.name.includes('"Quoted"'))).toBe(true)
    expect(body.meta).toEqual({
      set_id: set!.id,
      set_name: expect.any(String),
      game_slug: set!.game_slug,
      count: body.data.length,
      total: body.data.length,
      exported_at: TEST_NOW.toISOString(),
    })
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
    // The JSON flattened by hand: a row per card and printing, one row with empty price cells for a card without prices.
    const json = ((await (await download('')).json()) as any).data as Record<string, any>[]
    const cell = (value: unknown) => (value === null || value === undefined ? '' : Array.isArray(value) ? value.join('|') : String(value))
    const expected = json.flatMap((card) => {
      const { prices, custom_attributes: attributes, ...fields } = card
      const named = Object.entries(attributes).filter(([name]) => (EXPORT_ATTRIBUTES as readonly string[]).includes(name))
      const others = Object.entries(attributes).filter(([name]) => !(EXPORT_ATTRIBUTES as readonly string[]).includes(name))
      const cardCells: Record<string, unknown> = {
        ...fields,
        ...Object.fromEntries(named.map(([name, value]) => [`custom_attributes.${name}`, value])),
        'custom_attributes.other': others.length > 0 ? JSON.stringify(Object.fromEntries(others)) : null,
      }
      return (prices.length === 0 ? [{}] : prices).map((price: Record<string, unknown>) =>
        EXPORT_COLUMNS.map((column) => cell(column === 'card_id' ? card.id : ({ ...cardCells, ...price } as Record<string, unknown>)[column])),
      )
    })
    expect(records).toEqual(expected)
    expect(text).toContain('"{""artist"":""Ken Sugimori""}"')
    const printings = json.reduce((n, card) => n + Math.max(1, card.prices.length), 0)
    expect(records).toHaveLength(printings)
    // Stable columns: another game's set has the very same header.
    const [other] = await rows<{ id: number }>(sql`select s.id from sets s join games g on g.id = s.game_id where g.slug <> ${set!.game_slug} order by s.id limit 1`)
    const otherText = await (await server.get(`/v1/export/set/${other!.id}?format=csv`, { headers: { 'x-api-key': keys.business } })).text()
    expect((parse(otherText) as string[][])[0]).toEqual([...EXPORT_COLUMNS])
    // A list attribute (energyType) is joined with |, when the set's game has it.
    const lists = json.filter((card) => Array.isArray(card.custom_attributes.energyType) && card.custom_attributes.energyType.length > 1)
    for (const card of lists) expect(text).toContain(card.custom_attributes.energyType.join('|'))
  })

  test('streamed a batch of cards at a time: any batch size gives the same rows', async () => {
    const whole = ((await (await download('')).json()) as any).data
    for (const batchCards of [1, 3, 1000]) {
      for (const format of ['json', 'csv'] as const) {
        const exported = await exportSet(db, { setId: set!.id, format, now: TEST_NOW, rateLimit: null, onError: () => {}, batchCards })
        const text = await new Response(exported.stream).text()
        if (format === 'json') expect(JSON.parse(text).data).toEqual(whole)
        else expect(parse(text, { columns: true })).toHaveLength(whole.reduce((n: number, card: { prices: unknown[] }) => n + Math.max(1, card.prices.length), 0))
      }
    }
  })

  test("HEAD answers GET's status and headers with no body, charges 1 like GET and logs nothing", async () => {
    const logged: string[] = []
    const watched = startServer({ db, redis: undefined, logger: createLogger('warn', { write: (line: string) => void logged.push(line) }) })
    const key = await keyOf('business')
    for (const format of ['', '?format=csv']) {
      // A HEAD is never coded (docs/adr/0127-response-compression.md): the GET it is compared with asks for no coding either.
      const send = (method: string) => watched.get(`/v1/export/set/${set!.id}${format}`, { method, headers: { 'x-api-key': key, 'accept-encoding': 'identity' } })
      const head = await send('HEAD')
      expect(head.status).toBe(200)
      expect(await head.text()).toBe('')
      const get = await send('GET')
      expect((await get.text()).length).toBeGreaterThan(0)
      const described = (response: Response) => {
        const headers = Object.fromEntries(response.headers)
        delete headers.date
        delete headers['x-request-id'] // each answer names its own request
        return { ...headers, 'x-ratelimit-remaining': Number(headers['x-ratelimit-remaining']) }
      }
      expect(described(head)).toEqual({ ...described(get), 'x-ratelimit-remaining': described(get)['x-ratelimit-remaining'] + 1 })
      expect(head.headers.get('content-length')).toBeNull() // a streamed GET has no length either
    }
    const missing = await watched.get('/v1/export/set/999999', { method: 'HEAD', headers: { 'x-api-key': key } })
    expect(missing.status).toBe(404)
    expect(await missing.text()).toBe('')
    // A HEAD that started the export would fail writing its first batch a moment later: each HEAD
    // above was followed by a whole GET export, several statements read after that batch.
    expect(logged).toEqual([])
  })

  test('a client that hangs up mid-export stops it quietly: no failure is reported', async () => {
    const failures: unknown[] = []
    // One connection (PGlite has only one): a statement sent after the hang-up ends after the batch
    // the export was reading then, so the test knows that batch came back and was dealt with.
    const single = database.url ? await openPostgres(database.url, { max: 1 }) : undefined
    const exportDb = single?.db ?? db
    const exported = await exportSet(exportDb, { setId: set!.id, format: 'json', now: TEST_NOW, rateLimit: null, onError: (error) => failures.push(error), batchCards: 1 })
    // The export as served: its first batch, then nothing more until the client hangs up, which
    // lands while the export reads its next batch (a batch per card).
    let hungUp = false
    let sent = false
    const reader = exported.stream.getReader()
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (sent) return new Promise<void>(() => {})
        sent = true
        controller.enqueue((await reader.read()).value!)
      },
      cancel(reason) {
        hungUp = true
        void reader.read().catch(() => {})
        return reader.cancel(reason)
      },
    })
    const served = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response(body) })
    try {
      const hangUp = new AbortController()
      const response = await fetch(`http://127.0.0.1:${served.port}/`, { signal: hangUp.signal })
      await response.body!.getReader().read()
      hangUp.abort()
      await eventually(() => hungUp, { what: 'the server seeing the client hang up' })
      await exportDb.execute(sql`select 1`)
      await new Promise((resolve) => setImmediate(resolve)) // what that batch's answer resumed has run
      expect(failures).toEqual([])
    } finally {
      served.stop(true)
      await single?.close()
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
    for (const [tier, credits] of [
      ['starter', 4],
      ['pro', 2],
      ['business', 1],
    ] as const) {
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
        expect(item.prices).toEqual(await pricesOf(item.card.id, plainOracleKey))
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

  test('JSON that does not parse: the key and tier are checked first, then a 400 that costs 1', async () => {
    const send = (path: string, key?: string) =>
      server.get(path, { method: 'POST', headers: { 'content-type': 'application/json', ...(key && { 'x-api-key': key }) }, body: '{"ids": [1,' })
    const hobby = await keyOf('hobby')
    for (const path of ['/v1/bulk/resolve/marketplace', '/v1/bulk/resolve/name']) {
      const keyless = await send(path)
      expect([keyless.status, ((await keyless.json()) as any).error.code]).toEqual([401, 'API_KEY_REQUIRED'])
      const unknown = await send(path, 'tcg_live_00000000000000000000000000000000')
      expect([unknown.status, ((await unknown.json()) as any).error.code]).toEqual([401, 'INVALID_API_KEY'])
      const low = await send(path, hobby)
      expect([low.status, ((await low.json()) as any).error.code]).toEqual([403, 'TIER_REQUIRED'])

      const key = await keyOf('starter')
      const refused = await send(path, key)
      const body = (await refused.json()) as any
      expect(refused.status).toBe(400)
      expect(body.error).toEqual({
        code: 'INVALID_PARAMETER',
        message: 'The request body could not be parsed',
        details: [{ field: 'body', message: 'is not valid JSON' }],
        request_id: expect.any(String),
      })
      expect(body.rate_limit).toMatchObject({ daily_limit: 2_500, daily_remaining: 2_499 })
      expect(refused.headers.get('x-ratelimit-remaining')).toBe('2499')
      expect(refused.headers.get('x-ratelimit-limit')).toBe('2500')
      expect((await get('/v1/usage', key)).body.data.account.today_requests).toBe(1)
    }
    // The hobby key was refused for its tier, which costs nothing.
    expect((await get('/v1/usage', hobby)).body.data.account.today_requests).toBe(0)
  })

  test('no body is a 400 and a body that is not JSON a 415, both after the key and costing 1; OpenAPI lists JSON bodies', async () => {
    const key = await keyOf('starter')
    const notJson = (type: string) => ({
      code: 'UNSUPPORTED_MEDIA_TYPE',
      message: `The body must be JSON (Content-Type: application/json), not ${type}`,
    })
    const cases: [RequestInit, number, object][] = [
      [{}, 400, { code: 'INVALID_PARAMETER', message: "Invalid body: 'body' must be a JSON object", details: [{ field: 'body', message: 'must be a JSON object' }] }],
      [{ body: 'ids=1', headers: { 'content-type': 'application/x-www-form-urlencoded' } }, 415, notJson('application/x-www-form-urlencoded')],
      [{ body: '{"ids":[1]}', headers: { 'content-type': 'text/plain' } }, 415, notJson('text/plain')],
    ]
    for (const [i, [init, status, error]] of cases.entries()) {
      const response = await server.get('/v1/bulk/resolve/marketplace', { method: 'POST', ...init, headers: { ...(init.headers as object), 'x-api-key': key } })
      const body = (await response.json()) as any
      expect({ status: response.status, error: body.error }).toEqual({ status, error: { ...error, request_id: response.headers.get('x-request-id') } })
      expect(body.rate_limit.daily_remaining).toBe(2_500 - i - 1)
    }
    const doc = (await server.json('/openapi.json')).body
    for (const path of ['/v1/bulk/resolve/marketplace', '/v1/bulk/resolve/name']) {
      expect(Object.keys(doc.paths[path].post.requestBody.content)).toEqual(['application/json'])
    }
  })

  // The cases: a list of the right length whose items the schema refuses was charged in full.
  test('a body the route refuses costs 1 however many items it holds; a valid one costs its credits', async () => {
    const hundredEmpty = Array.from({ length: 100 }, () => '')
    const cases: [Tier, string, unknown][] = [
      ['starter', '/v1/bulk/resolve/name', { names: hundredEmpty }],
      ['starter', '/v1/bulk/resolve/name', { names: [...hundredEmpty.slice(1).fill('Dragon'), 'x'.repeat(151)] }],
      ['starter', '/v1/bulk/resolve/name', { names: Array.from({ length: 100 }, () => 'Dragon'), game: '' }],
      ['starter', '/v1/bulk/resolve/name', { names: Array.from({ length: 100 }, () => 7) }],
      ['business', '/v1/bulk/resolve/marketplace', { ids: Array.from({ length: 1_000 }, () => ({})) }],
      ['business', '/v1/bulk/resolve/marketplace', { ids: Array.from({ length: 1_000 }, () => null) }],
      ['business', '/v1/bulk/resolve/marketplace', { ids: [...Array.from({ length: 999 }, () => 1), 0] }],
      ['business', '/v1/bulk/resolve/marketplace', { ids: Array.from({ length: 1_000 }, () => '1') }],
    ]
    for (const [tier, path, body] of cases) {
      const key = await keyOf(tier)
      const refused = await post(path, key, body)
      expect({ path, status: refused.status, code: refused.body.error?.code }).toEqual({ path, status: 400, code: 'INVALID_PARAMETER' })
      expect(refused.body.rate_limit.daily_remaining).toBe(refused.body.rate_limit.daily_limit - 1)
      expect((await get('/v1/usage', key)).body.data.account.today_requests).toBe(1)
    }
    // The same lists, valid, cost their credits: 100 on Starter, 1,000 × 0.1 on Business.
    const starter = await keyOf('starter')
    expect((await post('/v1/bulk/resolve/name', starter, { names: Array.from({ length: 100 }, () => 'Dragon') })).body.meta.credits_consumed).toBe(100)
    expect((await get('/v1/usage', starter)).body.data.account.today_requests).toBe(100)
    const business = await keyOf('business')
    expect((await post('/v1/bulk/resolve/marketplace', business, { ids: Array.from({ length: 1_000 }, () => 1) })).body.meta.credits_consumed).toBe(100)
    expect((await get('/v1/usage', business)).body.data.account.today_requests).toBe(100)
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
  const [shared] = await rows<{ name: string; slug: string; set_slug: string; id: number }>(sql`
    select c.name, g.slug, s.slug as set_slug, c.id from cards c join games g on g.id = c.game_id join sets s on s.id = c.set_id
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
    expect(exact.prices).toEqual(await pricesOf(unique!.id, plainOracleKey))
    expect(fuzzy).toMatchObject({ query: misspelt, match: 'fuzzy', card: { id: unique!.id } })
    expect(fuzzy.score).toBeGreaterThanOrEqual(0.6)
    expect(fuzzy.score).toBeLessThan(1)
    // The shared name, exact or misspelt, fits several cards equally well: reported, not guessed.
    expect(body.data.ambiguous.map((item: { query: string }) => item.query)).toEqual([shared!.name, sharedMisspelt])
    for (const [i, item] of body.data.ambiguous.entries()) {
      expect(item.candidates.length).toBeGreaterThan(1)
      expect(item.candidates.map((c: { id: number }) => c.id)).toContain(shared!.id)
      // A candidate names its set and game by name and by slug, as a card does.
      expect(item.candidates.find((c: { id: number }) => c.id === shared!.id)).toMatchObject({ game_slug: shared!.slug, set_slug: shared!.set_slug })
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
      const send = (accept: string) => server.get(path, { ...init, headers: { 'x-api-key': keys.business, 'content-type': 'application/json', accept } })
      const json = await send('application/json')
      expect(json.headers.get('content-type')).toStartWith('application/json')
      expect(json.headers.get('vary')).toBe('Accept, Accept-Encoding')
      const packed = await send('application/msgpack')
      expect(packed.status).toBe(200)
      expect(packed.headers.get('content-type')).toBe('application/msgpack')
      const { rate_limit: jsonLimit, ...jsonBody } = (await json.json()) as any
      const { rate_limit: packedLimit, ...packedBody } = unpack(new Uint8Array(await packed.arrayBuffer()))
      expect(packedBody).toEqual(jsonBody)
      expect(packedLimit.daily_remaining).toBe(jsonLimit.daily_remaining - 1) // each costs 1 (3 resolves × 0.1 on Business)
    }
  })

  // A client that asked for msgpack still gets its refusals as the spec's JSON envelope, on every bulk route.
  test('errors are the JSON envelope whatever Accept asks for', async () => {
    const resolve = (body: unknown): RequestInit => ({ method: 'POST', body: JSON.stringify(body) })
    const cases: [string, RequestInit, string, number, string][] = [
      ['/v1/bulk/cards?ids=abc', {}, keys.business, 400, 'INVALID_PARAMETER'],
      ['/v1/bulk/history?ids=1&range=zz', {}, keys.business, 400, 'INVALID_PARAMETER'],
      ['/v1/bulk/prices?ids=abc', {}, keys.business, 400, 'INVALID_PARAMETER'],
      ['/v1/bulk/cards?ids=1', {}, keys.starter, 403, 'TIER_REQUIRED'],
      ['/v1/bulk/cards?ids=1', {}, 'tcg_live_00000000000000000000000000000000', 401, 'INVALID_API_KEY'],
      ['/v1/export/set/0', {}, keys.business, 400, 'INVALID_PARAMETER'],
      ['/v1/bulk/resolve/marketplace', resolve({ ids: [] }), keys.business, 400, 'INVALID_PARAMETER'],
      ['/v1/bulk/resolve/name', resolve({ names: ['x y'], game: 'no-such-game' }), keys.business, 404, 'NOT_FOUND'],
    ]
    for (const [path, init, key, status, code] of cases) {
      for (const accept of ['application/msgpack', 'application/x-msgpack', 'application/msgpack, application/json;q=0.5']) {
        const response = await server.get(path, { ...init, headers: { 'x-api-key': key, 'content-type': 'application/json', accept } })
        const text = await response.text()
        expect({ path, accept, status: response.status, type: response.headers.get('content-type') }).toEqual({
          path,
          accept,
          status,
          type: 'application/json;charset=utf-8',
        })
        expect(JSON.parse(text).error.code).toBe(code)
      }
    }
  })
})
