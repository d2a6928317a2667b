import { afterAll, describe, expect, test } from 'bun:test'
import { SMALL_CATEGORIES, SMALL_GROUPS, SMALL_PRODUCTS, smallPricesOf } from '../fixtures/tcgcsv-data'
import { accountWithKey } from '../helpers/auth'
import { freshDatabase } from '../helpers/db'
import { TEST_DATABASE_URL } from '../helpers/env'
import { type Listening, spawnUntilListening, stopProcess } from '../helpers/process'
import { type FakeTcgcsv, startFakeTcgcsv, TEST_USER_AGENT } from '../helpers/tcgcsv'

// An operator's first start against the TCGCSV mirror (here the fake one, in its own process):
// the server loads the catalog and today's prices before it listens, and every public route
// answers from that data, with what the mirror lacks answered as unavailable or null.

const START_MS = 300_000
const PIKACHU = 565606

describe.skipIf(!TEST_DATABASE_URL)('a first start with MARKETPLACE_SOURCE=tcgcsv', async () => {
  // Bun runs this callback even when the block is skipped: nothing may be set up then.
  let mirror: FakeTcgcsv | undefined
  let server: Listening | undefined
  // Registered before freshDatabase's hook: the server lets go of the database before it is dropped.
  afterAll(async () => {
    if (server) await stopProcess(server.child)
    if (mirror) await mirror.stop()
  }, 30_000)
  const database = TEST_DATABASE_URL ? await freshDatabase('empty') : undefined
  let key = ''
  const get = async (path: string) => {
    const response = await fetch(`${server!.url}${path}`, { headers: { 'x-api-key': key } })
    return { status: response.status, body: (await response.json()) as any }
  }

  test(
    'loads the catalog before listening and says which capabilities are live',
    async () => {
      mirror = await startFakeTcgcsv()
      server = await spawnUntilListening(['src/index.ts'], {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        DATABASE_URL: database!.url,
        MARKETPLACE_SOURCE: 'tcgcsv',
        MARKETPLACE_URL: mirror.url,
        MARKETPLACE_PACING_MS: '0',
        MARKETPLACE_USER_AGENT: TEST_USER_AGENT,
        JOBS_ENABLED: 'false',
        PORT: '0',
        HOST: '127.0.0.1',
        LOG_LEVEL: 'info',
      })
      key = (await accountWithKey(database!.db, 'business')).key
      const ready = await fetch(`${server.url}/ready`)
      expect(ready.status).toBe(200)
      expect(((await ready.json()) as any).source).toEqual({ name: 'tcgcsv', capabilities: { listings: false, sales: false, past_prices: false } })
      expect((await mirror.requests()).every((request) => request.userAgent === TEST_USER_AGENT)).toBe(true)
    },
    START_MS,
  )

  test('games and sets carry the marketplace ids', async () => {
    const games = await get('/v1/games')
    expect(games.status).toBe(200)
    expect(games.body.data.map((game: any) => game.marketplace_id).sort((a: number, b: number) => a - b)).toEqual(
      SMALL_CATEGORIES.map((category) => category.categoryId).sort((a, b) => a - b),
    )
    const pokemon = await get('/v1/games/pokemon/sets')
    expect(pokemon.status).toBe(200)
    expect(pokemon.body.data.map((set: any) => set.marketplace_id).sort()).toEqual(
      SMALL_GROUPS.filter((g) => g.categoryId === 3)
        .map((g) => g.groupId)
        .sort(),
    )
  })

  test('a card, its prices and history come from the mirror; what it lacks is null or unavailable', async () => {
    const product = SMALL_PRODUCTS.find((row) => row.productId === PIKACHU)!
    const lookup = await get(`/v1/cards/marketplace/${PIKACHU}`)
    expect(lookup.status).toBe(200)
    const id = lookup.body.data.id
    const card = await get(`/v1/cards/${id}`)
    expect(card.body.data).toMatchObject({ name: product.name, marketplace_id: PIKACHU, image_url: product.imageUrl, total_listings: null })
    expect(card.body.data.custom_attributes.energyType).toEqual(['Lightning'])
    const prices = await get(`/v1/cards/${id}/prices`)
    expect(prices.status).toBe(200)
    const rows = [prices.body.data].flat()
    const expected = smallPricesOf(product.groupId, '2026-11-20').filter((row) => row.productId === PIKACHU)
    expect(rows.map((row: any) => row.printing).sort()).toEqual(expected.map((row) => row.subTypeName).sort())
    expect(rows.every((row: any) => row.lowest_with_shipping === null && row.buylist_price === null)).toBe(true)
    const history = await get(`/v1/cards/${id}/history`)
    expect(history.status).toBe(200)
    expect(history.body.data.length).toBeGreaterThan(0)
    expect(history.body.data.every((row: any) => row.avg_sales_price === null && row.sales_volume === null)).toBe(true)
    const conditions = await get(`/v1/cards/${id}/prices/conditions`)
    expect(conditions.status).toBe(404)
    expect(conditions.body.error.code).toBe('CONDITION_PRICES_UNAVAILABLE')
  })

  test('search, bulk prices and movers answer from the same data', async () => {
    const search = await get('/v1/search?q=pikachu')
    expect(search.status).toBe(200)
    expect(search.body.data.some((row: any) => row.marketplace_id === PIKACHU || row.name?.startsWith('Pikachu'))).toBe(true)
    const id = (await get(`/v1/cards/marketplace/${PIKACHU}`)).body.data.id
    const bulk = await get(`/v1/bulk/prices?ids=${id}`)
    expect(bulk.status).toBe(200)
    expect(JSON.stringify(bulk.body)).toContain(`"card_id":${id}`)
    const movers = await get('/v1/prices/top-movers')
    expect(movers.status).toBe(200)
  })
})
