import { describe, expect, test } from 'bun:test'
import Ajv2020 from 'ajv/dist/2020'
import addFormats from 'ajv-formats'
import { type SQL, sql } from 'drizzle-orm'
import { unpack } from 'msgpackr'
import { accountWithKey } from '../../../test/helpers/auth'
import { freshDatabase, PRIMARY_PRINTING_FIRST, selectRows, testLogger } from '../../../test/helpers/db'
import { startServer } from '../../../test/helpers/server'

// A real marketplace leaves prices out (docs/adr/0094-a-real-source-s-gaps-are-null.md). The
// gaps are written straight into the seeded catalog before the server builds its price snapshot,
// and every answer that shows those fields must carry null, and fit the OpenAPI document.
const database = await freshDatabase('seeded')
const rows = <T>(query: SQL) => selectRows<T>(database.db, query)

interface Picked {
  id: number
  set_id: number
  marketplace_id: number
  name: string
}

/** A card with several printings and history: its listing prices, buylist and listing count are unreported. */
const [gap] = await rows<Picked>(sql`
  select c.id, c.set_id, c.marketplace_id, c.name from cards c
  where (select count(*) from card_prices cp where cp.card_id = c.id) > 1
    and exists (select 1 from price_history h where h.card_id = c.id)
  order by c.id limit 1`)
/** A card of the same set with one printing, whose market price was never reported. */
const [unsold] = await rows<Picked>(sql`
  select c.id, c.set_id, c.marketplace_id, c.name from cards c
  where c.set_id = ${gap!.set_id} and c.id <> ${gap!.id} and (select count(*) from card_prices cp where cp.card_id = c.id) = 1
  order by c.id limit 1`)
/** A card with two foil-type printings or more. */
const [foils] = await rows<{ id: number }>(sql`
  select c.id from cards c where (select count(*) from card_prices cp where cp.card_id = c.id and cp.printing ilike '%foil%') > 1
  order by c.id limit 1`)
/** A card with exactly one foil-type printing, besides its gap-free others. */
const [oneFoil] = await rows<{ id: number }>(sql`
  select c.id from cards c where c.id not in (${gap!.id}, ${unsold!.id})
    and (select count(*) from card_prices cp where cp.card_id = c.id and cp.printing ilike '%foil%') = 1
  order by c.id limit 1`)

/** A card's foil-type printings in the primary-printing order (the test's own oracle), with their market prices. */
const foilPrintingsOf = (cardId: number) =>
  rows<{ printing: string; market_price: number | null }>(sql`
    select cp.printing, cp.market_price from card_prices cp join cards c on c.id = cp.card_id join games g on g.id = c.game_id
    where cp.card_id = ${cardId} and cp.printing ilike '%foil%' order by ${PRIMARY_PRINTING_FIRST}`)

await database.db.execute(sql`update card_prices set low_price = null, median_price = null, lowest_with_shipping = null, buylist_price = null
                              where card_id = ${gap!.id}`)
await database.db.execute(sql`update cards set total_listings = null where id = ${gap!.id}`)
await database.db.execute(sql`update price_history set low_price = null where card_id = ${gap!.id}`)
// Never sold, yet with a change that would top every movers list were it counted.
await database.db.execute(sql`update card_prices set market_price = null, market_price_as_of = null,
                                price_change_24h = 9999, price_change_7d = 9999, price_change_30d = 9999
                              where card_id = ${unsold!.id}`)
const [firstFoil, secondFoil] = await foilPrintingsOf(foils!.id)
await database.db.execute(sql`update card_prices set market_price = null where card_id = ${foils!.id} and printing = ${firstFoil!.printing}`)
await database.db.execute(sql`update card_prices set market_price = null where card_id = ${oneFoil!.id} and printing ilike '%foil%'`)

const server = startServer({ db: database.db, redis: undefined, logger: testLogger })
await server.ready()
const key = (await accountWithKey(database.db, 'business')).key

const doc = (await (await server.get('/openapi.json')).json()) as any
const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false })
addFormats(ajv)
ajv.addSchema(doc, 'openapi.json')
const pointer = (...parts: string[]) => parts.map((part) => part.replaceAll('~', '~0').replaceAll('/', '~1')).join('/')

/** GET with the Business key; the answer must be a 200 that fits the document's schema for the route. */
async function read(route: string, path: string, headers: Record<string, string> = {}): Promise<any> {
  const response = await server.get(path, { headers: { 'x-api-key': key, ...headers } })
  expect(response.status).toBe(200)
  const type = response.headers.get('content-type')!.split(';')[0]!
  const bytes = new Uint8Array(await response.arrayBuffer())
  const body = type.includes('msgpack') ? unpack(bytes) : type === 'text/csv' ? new TextDecoder().decode(bytes) : JSON.parse(new TextDecoder().decode(bytes))
  const validate = ajv.compile({ $ref: `openapi.json#/${pointer('paths', route, 'get', 'responses', '200', 'content', type, 'schema')}` })
  expect(validate(body) ? [] : validate.errors).toEqual([])
  return body
}

const UNREPORTED = { low_price: null, median_price: null, lowest_with_shipping: null, buylist_price: null }

describe('unreported listing prices answer null', () => {
  test("a card's prices, its marketplace lookup and its card", async () => {
    const prices = (await read('/v1/cards/{id}/prices', `/v1/cards/${gap!.id}/prices`)).data
    expect(prices.length).toBeGreaterThan(1)
    for (const price of prices) {
      expect(price).toMatchObject(UNREPORTED)
      expect(price.market_price).toBeNumber()
    }
    const lookup = (await read('/v1/cards/marketplace/{marketplaceId}', `/v1/cards/marketplace/${gap!.marketplace_id}`)).data
    expect(lookup.total_listings).toBeNull()
    expect(lookup.prices).toHaveLength(prices.length)
    for (const price of lookup.prices) expect(price).toMatchObject(UNREPORTED)
    expect((await read('/v1/cards/{id}', `/v1/cards/${gap!.id}`)).data.total_listings).toBeNull()
  })

  test("a set's price rows, its cards, its export as JSON and CSV, and search", async () => {
    const setRows = (await read('/v1/sets/{id}/prices', `/v1/sets/${gap!.set_id}/prices`)).data.filter((row: any) => row.card_id === gap!.id)
    expect(setRows.length).toBeGreaterThan(1)
    for (const row of setRows) expect(row).toMatchObject(UNREPORTED)

    const nullListing = { low_price: null, median_price: null, lowest_with_shipping: null, total_listings: null }
    const setCards = (await read('/v1/sets/{id}/cards', `/v1/sets/${gap!.set_id}/cards?per_page=100`)).data
    expect(setCards.find((card: any) => card.id === gap!.id)).toMatchObject(nullListing)

    const exported = await read('/v1/export/set/{id}', `/v1/export/set/${gap!.set_id}`)
    for (const row of exported.data.filter((row: any) => row.card_id === gap!.id)) expect(row).toMatchObject(UNREPORTED)
    const csv: string = await read('/v1/export/set/{id}', `/v1/export/set/${gap!.set_id}?format=csv`)
    const [header, ...lines] = csv
      .trim()
      .split('\n')
      .map((line) => line.split(','))
    const column = (name: string) => header!.indexOf(name)
    const gapLines = lines.filter((line) => line[column('card_id')] === String(gap!.id))
    expect(gapLines).toHaveLength(setRows.length)
    for (const line of gapLines) {
      for (const name of Object.keys(UNREPORTED)) expect(line[column(name)]).toBe('')
      expect(Number(line[column('market_price')])).toBeGreaterThan(0)
    }

    const found = (await read('/v1/search', `/v1/search?q=${encodeURIComponent(gap!.name)}&set_id=${gap!.set_id}`)).data
    expect(found.find((card: any) => card.id === gap!.id)).toMatchObject(nullListing)
  })

  test('bulk cards, resolve by marketplace id and the change feed', async () => {
    const bulk = (await read('/v1/bulk/cards', `/v1/bulk/cards?ids=${gap!.id}`)).data
    expect(bulk[0].total_listings).toBeNull()
    for (const price of bulk[0].prices) expect(price).toMatchObject(UNREPORTED)

    const response = await server.get('/v1/bulk/resolve/marketplace', {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ ids: [gap!.marketplace_id] }),
    })
    const resolved = ((await response.json()) as any).data.resolved
    expect(resolved[0].card.total_listings).toBeNull()
    for (const price of resolved[0].prices) expect(price).toMatchObject(UNREPORTED)

    const changes = (await read('/v1/prices/changes', '/v1/prices/changes?since=2000-01-01T00:00:00Z&limit=1000')).data
    const gapChanges = changes.filter((row: any) => row.card_id === gap!.id)
    expect(gapChanges.length).toBeGreaterThan(1)
    for (const row of gapChanges) expect(row).toMatchObject(UNREPORTED)
  })

  test('history rows, detailed and bulk', async () => {
    for (const [route, path] of [
      ['/v1/cards/{id}/history', `/v1/cards/${gap!.id}/history?range=all`],
      ['/v1/cards/{id}/history/detailed', `/v1/cards/${gap!.id}/history/detailed`],
    ] as const) {
      const history = (await read(route, path)).data
      expect(history.length).toBeGreaterThan(0)
      for (const row of history) {
        expect(row.low_price).toBeNull()
        expect(row.market_price).toBeNumber()
      }
    }
    const bulk = (await read('/v1/bulk/history', `/v1/bulk/history?ids=${gap!.id}&range=all`)).data[gap!.id]
    expect(bulk.length).toBeGreaterThan(0)
    for (const row of bulk) expect(row.low_price).toBeNull()
  })

  test('bulk price rows, as JSON and msgpack', async () => {
    for (const headers of [{}, { accept: 'application/msgpack' }] as Record<string, string>[]) {
      const [row] = (await read('/v1/bulk/prices', `/v1/bulk/prices?ids=${gap!.id}`, headers)).data
      expect(row.low_price).toBeNull()
      expect(row.market_price).toBeNumber()
    }
  })
})

describe('a printing never sold: market price null', () => {
  test('answers null where shown, its card sorts and filters as unpriced', async () => {
    const price = (await read('/v1/cards/{id}/prices', `/v1/cards/${unsold!.id}/prices`)).data
    expect(price).toMatchObject({ card_id: unsold!.id, market_price: null, market_price_as_of: null })
    expect(price.low_price).toBeNumber()

    const [bulk] = (await read('/v1/bulk/prices', `/v1/bulk/prices?ids=${unsold!.id}`)).data
    expect(bulk).toMatchObject({ card_id: unsold!.id, market_price: null })

    const ascending = (await read('/v1/sets/{id}/cards', `/v1/sets/${unsold!.set_id}/cards?sort=price_asc&per_page=100`)).data
    const row = ascending.find((card: any) => card.id === unsold!.id)
    expect(row).toMatchObject({ market_price: null, printing: price.printing })
    expect(ascending.slice(ascending.indexOf(row)).every((card: any) => card.market_price === null)).toBe(true)

    const search = (q: string) => read('/v1/search', `/v1/search?q=${encodeURIComponent(unsold!.name)}&set_id=${unsold!.set_id}${q}`)
    expect((await search('')).data.some((card: any) => card.id === unsold!.id)).toBe(true)
    expect((await search('&min_price=0')).data.some((card: any) => card.id === unsold!.id)).toBe(false)
  })

  test('is not a mover, whatever its change', async () => {
    const [card] = await rows<{ slug: string; printing: string }>(sql`
      select g.slug, cp.printing from cards c join games g on g.id = c.game_id join card_prices cp on cp.card_id = c.id where c.id = ${unsold!.id}`)
    let listed = 0
    for (const period of ['24h', '7d', '30d']) {
      for (const filter of ['', `&game=${card!.slug}`, `&printing=${encodeURIComponent(card!.printing)}`]) {
        const movers = (await read('/v1/prices/top-movers', `/v1/prices/top-movers?period=${period}&limit=50${filter}`)).data
        listed += movers.length
        expect(movers.some((mover: any) => mover.card_id === unsold!.id)).toBe(false)
      }
    }
    expect(listed).toBeGreaterThan(0)
  })

  test("foil_market_price: the first foil printing's with a market price; null when no foil printing has one", async () => {
    expect(secondFoil!.market_price).toBeNumber()
    const byId = new Map((await read('/v1/bulk/prices', `/v1/bulk/prices?ids=${foils!.id},${oneFoil!.id}`)).data.map((row: any) => [row.card_id, row]))
    expect(byId.get(foils!.id)).toMatchObject({ foil_market_price: secondFoil!.market_price })
    expect(byId.get(oneFoil!.id)).toMatchObject({ foil_market_price: null })
  })
})

describe('the OpenAPI document', () => {
  test('every price field a source may leave out allows null and says so', () => {
    const schemas = doc.components.schemas
    const fields: [string, Record<string, any>][] = [
      ...(['market_price', 'low_price', 'median_price', 'lowest_with_shipping', 'buylist_price'].flatMap((name) => [
        [name, schemas.Price.properties],
        [name, schemas.PriceRow.properties],
      ]) as [string, Record<string, any>][]),
      ...['market_price', 'low_price', 'median_price', 'lowest_with_shipping'].map((name) => [name, schemas.CardWithPrice.properties] as [string, Record<string, any>]),
      ['market_price', schemas.BulkPriceRow.properties],
      ['low_price', schemas.BulkPriceRow.properties],
      ['low_price', schemas.HistoryRow.properties],
      ['total_listings', schemas.Card.properties],
    ]
    for (const [name, properties] of fields) {
      const field = properties[name]
      expect(
        field.anyOf.map((option: any) => option.type),
        name,
      ).toContain('null')
      expect(field.description, name).toContain('null when the marketplace source does not report it')
    }
  })
})
