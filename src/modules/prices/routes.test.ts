import { describe, expect, test } from 'bun:test'
import { type SQL, sql } from 'drizzle-orm'
import { unpack } from 'msgpackr'
import { accountWithKey } from '../../../test/helpers/auth'
import { PRIMARY_PRINTING_FIRST, selectRows } from '../../../test/helpers/db'
import { seededCatalogServer } from '../../../test/helpers/server'

// Over real HTTP on the seeded tiny catalog, in-process quota. Every expectation is computed from
// the database with SQL written here, not with the snapshot's code.
const { database, server, proKey, freeKey } = await seededCatalogServer()
const rows = <T>(query: SQL) => selectRows<T>(database.db, query)
const businessKey = (await accountWithKey(database.db, 'business')).key
const starterKey = (await accountWithKey(database.db, 'starter')).key

const withKey = (key: string, headers: Record<string, string> = {}) => ({ headers: { 'x-api-key': key, ...headers } })

interface BulkRow {
  card_id: number
  market_price: number | null
  low_price: number | null
  foil_market_price: number | null
  price_change_24h: number | null
  last_updated_at: string | null
}

/** Every card's Bulk price row by docs/adr/0011-primary-printing.md, in SQL: the primary printing, and the first foil-type one with a market price. */
async function expectedBulkRows(): Promise<Map<number, BulkRow>> {
  const found = await rows<Omit<BulkRow, 'last_updated_at'> & { last_updated_at: Date | string | null }>(sql`
    select c.id as card_id, p.market_price, p.low_price, f.market_price as foil_market_price, p.price_change_24h, p.last_updated_at
    from cards c join games g on g.id = c.game_id
    left join lateral (select cp.* from card_prices cp where cp.card_id = c.id order by ${PRIMARY_PRINTING_FIRST} limit 1) p on true
    left join lateral (select cp.market_price from card_prices cp where cp.card_id = c.id and cp.printing ilike '%foil%'
                       and cp.market_price is not null order by ${PRIMARY_PRINTING_FIRST} limit 1) f on true`)
  return new Map(found.map((row) => [row.card_id, { ...row, last_updated_at: row.last_updated_at === null ? null : new Date(row.last_updated_at).toISOString() }]))
}

const allCardIds = (await rows<{ id: number }>(sql`select id from cards order by id`)).map((row) => row.id)
const [{ max: maxCardId }] = (await rows<{ max: number }>(sql`select max(id)::int as max from cards`)) as [{ max: number }]

describe('GET /v1/bulk/prices', () => {
  test('every card of the catalog, 500 ids at a time, equals its row computed from Postgres; cards without prices are in meta.unpriced', async () => {
    await server.ready()
    const expected = await expectedBulkRows()
    expect(expected.size).toBe(allCardIds.length)
    let seen = 0
    let unpriced = 0
    for (let i = 0; i < allCardIds.length; i += 500) {
      const ids = allCardIds.slice(i, i + 500)
      const priced = ids.filter((id) => expected.get(id)!.last_updated_at !== null)
      const { status, body } = await server.json(`/v1/bulk/prices?ids=${ids.join(',')}`, proKey)
      expect(status).toBe(200)
      expect(body.data).toEqual(priced.map((id) => expected.get(id)))
      const without = ids.filter((id) => !priced.includes(id))
      expect(body.meta).toMatchObject({ requested: ids.length, found: ids.length, not_found: [], unpriced: without, total: priced.length })
      seen += body.data.length + body.meta.unpriced.length
      unpriced += without.length
    }
    expect(seen).toBe(allCardIds.length)
    // The catalog has cards without prices (presales).
    expect(unpriced).toBeGreaterThan(0)
  })

  test("no row breaks the spec's non-null types for lack of prices: a presale card is left out and named in meta.unpriced", async () => {
    const [presale] = await rows<{ id: number }>(sql`select id from cards c where not exists (select 1 from card_prices cp where cp.card_id = c.id) order by id limit 1`)
    const [priced] = allCardIds.filter((id) => id !== presale!.id)
    const path = `/v1/bulk/prices?ids=${presale!.id},${priced},${maxCardId + 9},${presale!.id}`
    const { status, body } = await server.json(path, proKey)
    expect(status).toBe(200)
    expect(body.data.map((row: BulkRow) => row.card_id)).toEqual([priced])
    expect(body.meta).toMatchObject({ requested: 3, found: 2, not_found: [maxCardId + 9], unpriced: [presale!.id], total: 1 })
    for (const row of body.data) for (const field of ['market_price', 'low_price', 'price_change_24h', 'last_updated_at']) expect(row[field]).not.toBeNull()
    const packed = await server.get(path, withKey(proKey, { accept: 'application/msgpack' }))
    expect(unpack(new Uint8Array(await packed.arrayBuffer()))).toMatchObject({ data: body.data, meta: { unpriced: [presale!.id], total: 1 } })
    const alone = await server.json(`/v1/bulk/prices?ids=${presale!.id}`, proKey)
    expect(alone.body.data).toEqual([])
    expect(alone.body.meta).toMatchObject({ found: 1, unpriced: [presale!.id], total: 0 })
  })

  test('any order of ids is whole JSON: every card in reverse, whichever row the snapshot stored first', async () => {
    const expected = await expectedBulkRows()
    const reversed = [...allCardIds].reverse()
    for (let i = 0; i < reversed.length; i += 500) {
      const ids = reversed.slice(i, i + 500)
      const response = await server.get(`/v1/bulk/prices?ids=${ids.join(',')}`, withKey(proKey))
      const body = JSON.parse(await response.text())
      expect(body.data).toEqual(ids.map((id) => expected.get(id)!).filter((row) => row.last_updated_at !== null))
    }
  })

  test('rows in request order, a repeated id once, unknown ids in meta.not_found in request order', async () => {
    const [a, b, c] = [allCardIds[7]!, allCardIds[3]!, allCardIds[42]!]
    const unknown = [maxCardId + 5, maxCardId + 1]
    const { status, body, headers } = await server.json(`/v1/bulk/prices?ids=${[a, unknown[0], b, a, c, unknown[1], b].join(',')}`, proKey)
    expect(status).toBe(200)
    expect(body.data.map((row: BulkRow) => row.card_id)).toEqual([a, b, c])
    expect(body.meta).toMatchObject({ requested: 5, found: 3, not_found: unknown })
    expect(body.meta.snapshot_version).toMatch(/^[0-9a-z]+$/)
    const [{ newest }] = (await rows<{ newest: Date | string }>(sql`select max(last_updated_at) as newest from card_prices`)) as [{ newest: Date }]
    expect(body.meta.as_of).toBe(new Date(newest).toISOString())
    expect(body.rate_limit).toMatchObject({ daily_limit: 10_000 })
    expect(headers.get('x-ratelimit-limit')).toBe('10000')
    expect(Number(headers.get('x-ratelimit-remaining'))).toBe(body.rate_limit.daily_remaining)
    expect(headers.get('content-type')).toBe('application/json;charset=utf-8')
  })

  test('one id is an array of one row; ids of no card alone are an empty array', async () => {
    const one = await server.json(`/v1/bulk/prices?ids=${allCardIds[5]}`, proKey)
    expect(one.body.data.map((row: BulkRow) => row.card_id)).toEqual([allCardIds[5]])
    const none = await server.json(`/v1/bulk/prices?ids=${maxCardId + 3},${maxCardId + 2}`, proKey)
    expect(none.status).toBe(200)
    expect(none.body.data).toEqual([])
    expect(none.body.meta).toMatchObject({ requested: 2, found: 0, not_found: [maxCardId + 3, maxCardId + 2] })
  })

  test('spaces around ids are allowed; exactly 500 ids is fine', async () => {
    const spaced = await server.json(`/v1/bulk/prices?ids=${encodeURIComponent(` ${allCardIds[0]} , ${allCardIds[1]}`)}`, proKey)
    expect(spaced.body.data.map((row: BulkRow) => row.card_id)).toEqual([allCardIds[0], allCardIds[1]])
    const fiveHundred = Array.from({ length: 500 }, (_, i) => i + 1)
    const full = await server.json(`/v1/bulk/prices?ids=${fiveHundred.join(',')}`, proKey)
    expect(full.status).toBe(200)
    expect(full.body.meta.requested).toBe(500)
  })

  test.each([
    ['', 'it is empty'],
    [' ', 'it is empty'],
    ['1,,2', 'an item is empty'],
    ['1,2,', 'an item is empty'],
    ['abc', "'abc' is not one"],
    ['0', "'0' is not one"],
    ['-4', "'-4' is not one"],
    ['1.5', "'1.5' is not one"],
    ['007', "'007' is not one"],
    ['2147483648', "'2147483648' is not one"],
    [Array.from({ length: 501 }, (_, i) => i + 1).join(','), 'got 501'],
  ])('ids=%j is 400 INVALID_PARAMETER naming ids (%s)', async (ids, problem) => {
    const { status, body } = await server.json(`/v1/bulk/prices?ids=${encodeURIComponent(ids)}`, proKey)
    expect(status).toBe(400)
    expect(body.error.code).toBe('INVALID_PARAMETER')
    expect(body.error.message).toContain(problem)
    expect(body.error.details).toEqual([{ field: 'ids', message: 'must be 1 to 500 comma-separated card ids (positive integers up to 2147483647)' }])
    expect(body.rate_limit).toBeDefined()
  })

  test('a missing ids is 400; no key 401; Free and Starter 403 TIER_REQUIRED naming Pro', async () => {
    const missing = await server.json('/v1/bulk/prices', proKey)
    expect(missing.status).toBe(400)
    expect(missing.body.error.details).toEqual([{ field: 'ids', message: 'is required' }])
    expect((await server.json('/v1/bulk/prices?ids=1')).status).toBe(401)
    for (const key of [freeKey, starterKey]) {
      const refused = await server.json('/v1/bulk/prices?ids=1', key)
      expect(refused.status).toBe(403)
      expect(refused.body.error.code).toBe('TIER_REQUIRED')
      expect(refused.body.error.message).toContain('Pro')
    }
    expect((await server.json('/v1/bulk/prices?ids=1', businessKey)).status).toBe(200)
  })

  test('ETag: If-None-Match answers 304 with no body (and still counts); another query or format has another tag', async () => {
    const path = `/v1/bulk/prices?ids=${allCardIds.slice(0, 3).join(',')}`
    const first = await server.get(path, withKey(proKey))
    const etag = first.headers.get('etag')!
    expect(etag).toMatch(/^W\/"[0-9a-z]+-[0-9a-z]+"$/)
    expect(first.headers.get('vary')).toBe('Accept, Accept-Encoding')
    const remaining = Number(first.headers.get('x-ratelimit-remaining'))

    const again = await server.get(path, withKey(proKey, { 'if-none-match': etag }))
    expect(again.status).toBe(304)
    expect(await again.text()).toBe('')
    expect(again.headers.get('etag')).toBe(etag)
    expect(Number(again.headers.get('x-ratelimit-remaining'))).toBe(remaining - 1)
    // A list of tags, a strong form of the same tag and * also match; a stale tag does not.
    for (const header of [`"other", ${etag}`, etag.slice(2), '*']) {
      expect((await server.get(path, withKey(proKey, { 'if-none-match': header }))).status).toBe(304)
    }
    expect((await server.get(path, withKey(proKey, { 'if-none-match': 'W/"stale-1"' }))).status).toBe(200)

    const other = await server.get(`/v1/bulk/prices?ids=${allCardIds.slice(0, 4).join(',')}`, withKey(proKey))
    expect(other.headers.get('etag')).not.toBe(etag)
    const packed = await server.get(path, withKey(proKey, { accept: 'application/msgpack' }))
    expect(packed.headers.get('etag')).not.toBe(etag)
  })

  test('Accept: application/msgpack returns the same body msgpack-encoded; JSON otherwise', async () => {
    const path = `/v1/bulk/prices?ids=${[...allCardIds.slice(0, 60), maxCardId + 9].join(',')}`
    const json = (await (await server.get(path, withKey(proKey))).json()) as any
    for (const accept of ['application/msgpack', 'application/x-msgpack', 'application/json;q=0.5, application/msgpack']) {
      const response = await server.get(path, withKey(proKey, { accept }))
      expect(response.status).toBe(200)
      expect(response.headers.get('content-type')).toBe('application/msgpack')
      const decoded = unpack(new Uint8Array(await response.arrayBuffer()))
      expect(decoded.data).toEqual(json.data)
      expect(decoded.meta).toEqual(json.meta)
      expect(decoded.rate_limit.daily_limit).toBe(json.rate_limit.daily_limit)
    }
    for (const accept of ['application/json', 'application/msgpack;q=0, application/json', 'application/json, application/msgpack;q=0.5', '*/*']) {
      const response = await server.get(path, withKey(proKey, { accept }))
      expect(response.headers.get('content-type')).toBe('application/json;charset=utf-8')
    }
  })

  test('an answer of 15 KiB or more is sent as one chunked stream, a smaller one with its Content-Length; both whole', async () => {
    // Uncompressed: a compressed bulk answer is far under 15 KiB (test/flows/compression.test.ts).
    const identity = { 'accept-encoding': 'identity' }
    const expected = await expectedBulkRows()
    const ids = allCardIds.filter((id) => expected.get(id)!.last_updated_at !== null).slice(0, 500)
    for (const [accept, decode] of [
      ['application/json', (bytes: Uint8Array) => JSON.parse(new TextDecoder().decode(bytes))],
      ['application/msgpack', (bytes: Uint8Array) => unpack(bytes)],
    ] as const) {
      const large = await server.get(`/v1/bulk/prices?ids=${ids.join(',')}`, withKey(proKey, { accept, ...identity }))
      const largeBytes = new Uint8Array(await large.arrayBuffer())
      expect(largeBytes.byteLength).toBeGreaterThanOrEqual(15 * 1024)
      expect(large.headers.get('transfer-encoding')).toBe('chunked')
      expect(large.headers.get('content-length')).toBeNull()
      expect(decode(largeBytes).data).toEqual(ids.map((id) => expected.get(id)))

      const small = await server.get(`/v1/bulk/prices?ids=${ids.slice(0, 3).join(',')}`, withKey(proKey, { accept, ...identity }))
      const smallBytes = new Uint8Array(await small.arrayBuffer())
      expect(small.headers.get('content-length')).toBe(String(smallBytes.byteLength))
      expect(decode(smallBytes).data).toEqual(ids.slice(0, 3).map((id) => expected.get(id)))
    }
  })
})

interface MoverRow {
  card_id: number
  printing: string
  market_price: number
  price_change: number
}

/** The top movers computed by Postgres: the order is the API's contract (change, then card id, then printing). */
async function expectedMovers(options: MoverOptions) {
  const column = sql.raw(`price_change_${options.period ?? '24h'}`)
  const down = options.direction === 'down'
  type Row = MoverRow & { name: string; set_name: string; set_slug: string; game_name: string; game_slug: string; product_type: string }
  const found = await rows<Row & { foil_only: number; image_url: string; marketplace_id: number; last_updated_at: Date | string }>(sql`
    select cp.card_id, c.name, s.name as set_name, s.slug as set_slug, g.name as game_name, g.slug as game_slug, c.product_type,
           c.foil_only::int as foil_only, cp.printing, cp.market_price, cp.${column} as price_change, c.image_url,
           c.marketplace_id, cp.last_updated_at
    from card_prices cp join cards c on c.id = cp.card_id join sets s on s.id = c.set_id join games g on g.id = c.game_id
    where cp.market_price is not null and cp.${column} ${down ? sql`< 0` : sql`> 0`}
      ${options.game ? sql`and g.slug = ${options.game}` : sql``}
      ${options.type ? sql`and c.product_type = ${options.type}` : sql``}
      ${options.printing ? sql`and cp.printing = ${options.printing}` : sql``}
    order by cp.${column} ${down ? sql`asc` : sql`desc`}, cp.card_id, cp.printing collate "C"
    limit ${options.limit ?? 20}`)
  return found.map((row) => ({ ...row, last_updated_at: new Date(row.last_updated_at).toISOString() }))
}

/** A game with sealed products that fell over 7 days, for the filter combinations. */
const [game] = await rows<{ slug: string }>(sql`
  select g.slug from games g join cards c on c.game_id = g.id join card_prices cp on cp.card_id = c.id
  where c.product_type = 'Sealed Products' and cp.price_change_7d < 0 group by g.slug order by count(*) desc, g.slug limit 1`)

type MoverOptions = { period?: string; direction?: string; game?: string; type?: string; printing?: string; limit?: number }

describe('GET /v1/prices/top-movers', () => {
  test.each<[MoverOptions]>([
    [{}],
    [{ period: '7d' }],
    [{ period: '30d', direction: 'down' }],
    [{ direction: 'down', limit: 50 }],
    [{ game: game!.slug, limit: 50 }],
    [{ game: game!.slug, type: 'Sealed Products', period: '7d', direction: 'down' }],
    [{ type: 'Cards', limit: 5 }],
    [{ printing: 'Holofoil', limit: 50 }],
    [{ printing: 'Foil', period: '30d', direction: 'down', limit: 7 }],
  ])('%j: the rows Postgres ranks first, with every field', async (options) => {
    const query = new URLSearchParams(Object.entries(options).map(([k, v]) => [k, String(v)] as [string, string]))
    const { status, body } = await server.json(`/v1/prices/top-movers?${query}`, freeKey)
    expect(status).toBe(200)
    const expected = await expectedMovers(options)
    expect(expected.length).toBeGreaterThan(0)
    expect(body.data).toEqual(expected)
    expect(body.meta).toMatchObject({ period: options.period ?? '24h', direction: options.direction ?? 'up', count: expected.length })
    const changes = body.data.map((row: MoverRow) => row.price_change)
    for (const change of changes) expect(options.direction === 'down' ? change < 0 : change > 0).toBe(true)
  })

  test('asked again, with another limit or one filter changed, each answer is still its own (answers are kept serialised)', async () => {
    const asks: MoverOptions[] = [
      { game: game!.slug, limit: 5 },
      { game: game!.slug, limit: 12 },
      { game: game!.slug, limit: 5 },
      { game: game!.slug, limit: 5, direction: 'down' },
      { game: game!.slug, limit: 5, period: '7d' },
      { game: game!.slug, limit: 5, type: 'Sealed Products' },
      { limit: 5 },
      { game: game!.slug, limit: 12 },
    ]
    for (const options of asks) {
      const query = new URLSearchParams(Object.entries(options).map(([k, v]) => [k, String(v)] as [string, string]))
      const { body } = await server.json(`/v1/prices/top-movers?${query}`, freeKey)
      expect(body.data).toEqual(await expectedMovers(options))
    }
  })

  test('default limit is 20; a game with no movers in a direction gives an empty list, not an error', async () => {
    expect((await server.json('/v1/prices/top-movers', freeKey)).body.data).toHaveLength(20)
    for (const printing of ['No%20Such%20Printing', '*']) {
      const none = await server.json(`/v1/prices/top-movers?game=${game!.slug}&printing=${printing}`, freeKey)
      expect(none.status).toBe(200)
      expect(none.body.data).toEqual([])
    }
  })

  test.each([
    ['direction=sideways', 'direction', 'must be one of: up, down'],
    ['period=1w', 'period', 'must be one of: 24h, 7d, 30d'],
    ['type=Foo', 'type', 'must be one of: Cards, Sealed Products'],
    ['limit=51', 'limit', 'must be an integer from 1 to 50'],
    ['limit=0', 'limit', 'must be an integer from 1 to 50'],
    ['limit=2.5', 'limit', 'must be an integer from 1 to 50'],
  ])('%s is 400 INVALID_PARAMETER naming %s', async (query, field, message) => {
    const { status, body } = await server.json(`/v1/prices/top-movers?${query}`, freeKey)
    expect(status).toBe(400)
    expect(body.error.code).toBe('INVALID_PARAMETER')
    expect(body.error.details).toEqual([{ field, message }])
  })

  test('an unknown game is 404 NOT_FOUND; no key 401', async () => {
    const unknown = await server.json('/v1/prices/top-movers?game=no-such-game', freeKey)
    expect(unknown.status).toBe(404)
    expect(unknown.body.error.code).toBe('NOT_FOUND')
    expect(unknown.body.error.message).toContain('no-such-game')
    expect((await server.json('/v1/prices/top-movers')).status).toBe(401)
  })

  test('ETag and If-None-Match work here too', async () => {
    const first = await server.get('/v1/prices/top-movers?limit=3', withKey(freeKey))
    const etag = first.headers.get('etag')!
    expect((await server.get('/v1/prices/top-movers?limit=3', withKey(freeKey, { 'if-none-match': etag }))).status).toBe(304)
    expect((await server.get('/v1/prices/top-movers?limit=4', withKey(freeKey, { 'if-none-match': etag }))).status).toBe(200)
  })
})

describe('GET /v1/cards/:id/prices from the snapshot', () => {
  test('its ETag answers 304 until the query changes', async () => {
    const path = `/v1/cards/${allCardIds[5]}/prices`
    const first = await server.get(path, withKey(freeKey))
    expect(first.status).toBe(200)
    const etag = first.headers.get('etag')!
    expect(etag).toStartWith('W/"')
    expect((await server.get(path, withKey(freeKey, { 'if-none-match': etag }))).status).toBe(304)
    const body = (await first.json()) as any
    const printing = Array.isArray(body.data) ? body.data[0].printing : body.data.printing
    const filtered = await server.get(`${path}?printing=${encodeURIComponent(printing)}`, withKey(freeKey, { 'if-none-match': etag }))
    expect(filtered.status).toBe(200)
  })
})

describe('answers kept per path and query', () => {
  test("asked again: the same answer and ETag, with this request's own rate_limit, and whole JSON each time", async () => {
    const path = `/v1/cards/${allCardIds[7]}/prices`
    const { key } = await accountWithKey(database.db, 'pro')
    const answers = []
    for (let i = 0; i < 3; i++) {
      const response = await server.get(path, withKey(key))
      expect(response.status).toBe(200)
      answers.push({ etag: response.headers.get('etag'), text: await response.text(), remaining: response.headers.get('x-ratelimit-remaining') })
    }
    const bodies = answers.map((answer) => JSON.parse(answer.text))
    expect(new Set(answers.map((answer) => answer.etag)).size).toBe(1)
    expect(bodies[1].data).toEqual(bodies[0].data)
    expect(bodies[2].data).toEqual(bodies[0].data)
    expect(bodies.map((body) => body.rate_limit.daily_remaining)).toEqual([9_999, 9_998, 9_997])
    expect(answers.map((answer) => Number(answer.remaining))).toEqual([9_999, 9_998, 9_997])
    expect(Object.keys(bodies[2])).toEqual(['data', 'rate_limit'])
    // Computed from the database, not from what the first answer said.
    const printings = await rows<{ printing: string }>(sql`select printing from card_prices where card_id = ${allCardIds[7]!}`)
    const data = Array.isArray(bodies[2].data) ? bodies[2].data : [bodies[2].data]
    expect(data.map((price: { printing: string }) => price.printing).sort()).toEqual(printings.map((row) => row.printing).sort())
  })

  test('a refused request is never kept: an unknown card is 404 each time, whatever If-None-Match says', async () => {
    for (const headers of [{}, { 'if-none-match': '*' }, {}] as Record<string, string>[]) {
      const response = await server.get(`/v1/cards/${maxCardId + 1}/prices`, withKey(businessKey, headers))
      expect(response.status).toBe(404)
    }
    for (const headers of [{}, { 'if-none-match': '*' }] as Record<string, string>[]) {
      expect((await server.get('/v1/prices/top-movers?game=no-such-game', withKey(businessKey, headers))).status).toBe(404)
    }
  })

  test('movers asked with invented extra parameters: each answer is still the movers list', async () => {
    const reference = await server.json('/v1/prices/top-movers?limit=50', businessKey)
    for (let i = 0; i < 40; i++) {
      const response = await server.json(`/v1/prices/top-movers?limit=50&junk=${i}`, businessKey)
      if (response.status === 400) return // unknown parameters refused: nothing to keep
      expect(response.status).toBe(200)
      expect(response.body.data).toEqual(reference.body.data)
    }
  })
})

describe('OpenAPI', () => {
  test('both routes are documented with their response schemas', async () => {
    const doc = (await server.json('/openapi.json')).body
    // Top movers is open to every tier, so it cannot answer 403.
    const statuses = {
      '/v1/bulk/prices': ['200', '304', '400', '401', '403', '429', '503'],
      '/v1/prices/top-movers': ['200', '304', '400', '401', '404', '429', '503'],
    }
    for (const [path, expected] of Object.entries(statuses)) {
      const get = doc.paths[path].get
      expect(get.responses['200'].content['application/json'].schema).toBeDefined()
      expect(Object.keys(get.responses).sort()).toEqual(expected)
      expect(get.responses['304'].content).toBeUndefined() // no body
    }
    expect(doc.components.schemas.BulkPriceRow.required).toEqual(
      expect.arrayContaining(['card_id', 'market_price', 'low_price', 'foil_market_price', 'price_change_24h', 'last_updated_at']),
    )
    // The spec's ten fields, and what the public service's clients also read (docs/adr/0025-compatibility-superset.md).
    expect(Object.keys(doc.components.schemas.TopMoverRow.properties).sort()).toEqual([
      'card_id',
      'foil_only',
      'game_name',
      'game_slug',
      'image_url',
      'last_updated_at',
      'market_price',
      'marketplace_id',
      'name',
      'price_change',
      'printing',
      'product_type',
      'set_name',
      'set_slug',
    ])
    expect(doc.components.schemas.TopMoverRow.required).toEqual(expect.arrayContaining(['marketplace_id', 'game_slug', 'last_updated_at']))
  })
})
