import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import { asc, count, eq, inArray } from 'drizzle-orm'
import { UNKNOWN_PRINTING } from '../../../../test/fixtures/fake-tcgcsv'
import {
  SMALL_CATEGORIES,
  SMALL_GROUPS,
  SMALL_NOTABLE,
  SMALL_PRICES,
  SMALL_PRODUCTS,
  smallPricesOf,
  smallProductsOf,
  TCGCSV_BASE_DATE,
} from '../../../../test/fixtures/tcgcsv-data'
import { freshDatabase, testLogger } from '../../../../test/helpers/db'
import { eventually } from '../../../../test/helpers/eventually'
import { type FakeTcgcsv, startFakeTcgcsv, TEST_USER_AGENT } from '../../../../test/helpers/tcgcsv'
import type { Database } from '../../../db/client'
import { cardPrices, cards, games, jobRuns, marketplaceRequests, priceHistory, sets, syncRuns } from '../../../db/schema'
import { runSyncJob } from '../../../jobs/sync-job'
import { addDays, clockWithWall } from '../../../shared/clock'
import { percentChange } from '../normalize'
import { syncGames } from '../service'
import { createTcgcsvSource, type TcgcsvSourceOptions } from './tcgcsv'

// The mirror publishes a day's prices around 20:00 UTC; syncs run after it.
const dayClock = (date: string) => clockWithWall(() => new Date(`${date}T21:00:00.000Z`))
const DAY1 = TCGCSV_BASE_DATE
const DAY2 = addDays(DAY1, 1)
const POKEMON = 3

let mirror: FakeTcgcsv
beforeAll(async () => {
  mirror = await startFakeTcgcsv()
})
afterAll(() => mirror.stop(), 30_000)
beforeEach(async () => {
  await mirror.reset()
  await mirror.setDay(DAY1)
})

function source(db: Database, date: string, options: Partial<TcgcsvSourceOptions> = {}) {
  return createTcgcsvSource({
    url: mirror.url,
    timeoutMs: 5_000,
    pacingMs: 0,
    dailyRequests: 10_000,
    userAgent: TEST_USER_AGENT,
    db,
    clock: dayClock(date),
    logger: testLogger,
    retryBaseMs: 10,
    ...options,
  })
}

function sync(db: Database, date: string, options: Partial<TcgcsvSourceOptions> = {}, gameSlugs?: string[]) {
  return syncGames({ db, source: source(db, date, options), clock: dayClock(date), logger: testLogger }, { gameSlugs })
}

const cardOf = async (db: Database, productId: number) => (await db.select().from(cards).where(eq(cards.marketplaceId, productId)))[0]
const pricesOf = (db: Database, productId: number) =>
  db
    .select({ price: cardPrices })
    .from(cardPrices)
    .innerJoin(cards, eq(cards.id, cardPrices.cardId))
    .where(eq(cards.marketplaceId, productId))
    .orderBy(asc(cardPrices.printing))
    .then((rows) => rows.map((row) => row.price))
const requestsTo = async (part: string) => (await mirror.requests()).filter((request) => request.path.includes(part))

describe('a first load from the mirror', async () => {
  const { db } = await freshDatabase('empty')
  let summary: Awaited<ReturnType<typeof syncGames>>
  let requests: Awaited<ReturnType<FakeTcgcsv['requests']>>
  beforeAll(async () => {
    await mirror.reset()
    await mirror.setDay(DAY1)
    summary = await sync(db, DAY1)
    requests = await mirror.requests()
  })

  test('every category, group and product is stored, with every request carrying the User-Agent', async () => {
    expect(summary).toMatchObject({ failed: 0, partial: 0 })
    const storedGames = await db.select().from(games).orderBy(asc(games.marketplaceCategoryId))
    expect(storedGames.map((game) => game.marketplaceCategoryId)).toEqual(SMALL_CATEGORIES.map((c) => c.categoryId).sort((a, b) => a - b))
    expect(storedGames.find((game) => game.marketplaceCategoryId === POKEMON)).toMatchObject({ slug: 'pokemon', name: 'Pokemon', kind: 'creature', priority: 3 })
    expect(storedGames.find((game) => game.marketplaceCategoryId === 1)).toMatchObject({ slug: 'magic', name: 'Magic: The Gathering', kind: 'mana' })
    // The mirror's categories carry no images.
    expect(storedGames.every((game) => game.imageUrl === null && game.logoUrl === null)).toBe(true)
    const [{ n: setCount }] = (await db.select({ n: count() }).from(sets)) as [{ n: number }]
    expect(setCount).toBe(SMALL_GROUPS.length)
    const [{ n: cardCount }] = (await db.select({ n: count() }).from(cards)) as [{ n: number }]
    expect(cardCount).toBe(SMALL_PRODUCTS.length)
    expect(requests.length).toBe(1 + SMALL_CATEGORIES.length + 2 * SMALL_GROUPS.length)
    expect(requests.every((request) => request.userAgent === TEST_USER_AGENT)).toBe(true)
  })

  test('groups become sets: release date from publishedOn, a missing abbreviation empty, no images', async () => {
    for (const group of SMALL_GROUPS) {
      const [set] = await db.select().from(sets).where(eq(sets.marketplaceGroupId, group.groupId))
      expect(set).toMatchObject({ name: group.name, abbreviation: group.abbreviation ?? '', releaseDate: group.publishedOn.slice(0, 10), productsModifiedOn: group.modifiedOn })
      expect(set).toMatchObject({ imageUrl: null, setIconUrl: null })
    }
  })

  test('products become cards and sealed products with the contract fields', async () => {
    for (const product of SMALL_PRODUCTS) {
      const card = (await cardOf(db, product.productId))!
      const fields = new Map(product.extendedData.map((field) => [field.name, field.value]))
      const sealed = !fields.has('Number') && !fields.has('Rarity')
      expect(card).toMatchObject({
        name: product.name,
        imageUrl: product.imageUrl,
        marketplaceUrl: product.url,
        number: fields.get('Number') ?? null,
        rarity: fields.get('Rarity') ?? '',
        productType: sealed ? 'Sealed Products' : 'Cards',
        productStatusId: product.presaleInfo.isPresale ? 20 : 1,
        totalListings: null,
      })
      expect(card.shippingCategoryId).toBe(sealed ? (/\bcase\b/i.test(product.name) ? 4 : 3) : 1)
    }
    expect((await cardOf(db, SMALL_NOTABLE.presaleProductId))!.productStatusId).toBe(20)
    expect((await cardOf(db, SMALL_NOTABLE.foilOnlyProductId))!.foilOnly).toBe(1)
    expect((await cardOf(db, SMALL_NOTABLE.unpricedProductId))!).toMatchObject({ productType: 'Sealed Products', number: null })
  })

  test('extended data is mapped to the contract attribute names per game kind', async () => {
    const pikachu = (await cardOf(db, 565606))!
    expect(pikachu.hp).toBe('200')
    expect(pikachu.customAttributes).toMatchObject({ stage: 'Basic', cardType: 'Lightning', energyType: ['Lightning'], hp: '200' })
    expect(Object.keys(pikachu.customAttributes)).toContain('attack1')
    const elves = (await cardOf(db, 579413))!
    expect(elves.hp).toBeNull()
    expect(elves.customAttributes).toEqual({
      power: '1',
      toughness: '1',
      subType: 'Creature — Elf Druid',
      flavorText: 'One bough of the great forest, and already the canopy hums.',
      oracleText: '{T}: Add {G}.',
    })
    for (const product of SMALL_PRODUCTS.filter((row) => row.categoryId === 2)) {
      const attributes = (await cardOf(db, product.productId))!.customAttributes
      expect(Object.keys(attributes).every((name) => ['cardType', 'attribute', 'level', 'attack', 'defense', 'description'].includes(name))).toBe(true)
    }
  })

  test('price rows become printings; what the mirror lacks is null, never made up', async () => {
    const rows = await db.select().from(cardPrices)
    expect(rows.length).toBe(SMALL_PRICES.length)
    for (const expected of SMALL_PRICES) {
      const row = (await pricesOf(db, expected.productId)).find((price) => price.printing === expected.subTypeName)!
      expect(row).toMatchObject({
        marketPrice: expected.marketPrice,
        marketPriceAsOf: expected.marketPrice === null ? null : DAY1,
        lowPrice: expected.lowPrice,
        medianPrice: expected.midPrice,
        lowestWithShipping: null,
        buylistPrice: null,
        priceChange24h: null,
      })
    }
    expect(await pricesOf(db, SMALL_NOTABLE.unpricedProductId)).toEqual([])
    expect((await pricesOf(db, SMALL_NOTABLE.threePrintingsProductId)).map((price) => price.printing).sort()).toEqual(['Cold Foil', 'Normal', 'Rainbow Foil'])
  })

  test('history starts with this sync: one point per printing with a market price, sales not recorded', async () => {
    const points = await db.select().from(priceHistory)
    expect(points.length).toBe(SMALL_PRICES.filter((row) => row.marketPrice !== null).length)
    expect(points.every((point) => point.date === DAY1 && point.avgSalesPrice === null && point.salesVolume === null)).toBe(true)
  })

  test('the next day: prices only, one more history point each, changes reported; a modified group is fetched again', async () => {
    await mirror.reset()
    await mirror.setDay(DAY2)
    const next = await sync(db, DAY2)
    expect(next).toMatchObject({ failed: 0, partial: 0 })
    expect(await requestsTo('/products')).toEqual([])
    expect((await requestsTo('/prices')).length).toBe(SMALL_GROUPS.length)
    expect(next.changes.length).toBeGreaterThan(0)
    const points = await db.select().from(priceHistory).where(eq(priceHistory.date, DAY2))
    expect(points.length).toBe(SMALL_PRICES.filter((row) => row.marketPrice !== null).length)
    const moved = smallPricesOf(SMALL_GROUPS[0]!.groupId, DAY2).find((row) => row.marketPrice !== null)!
    const [stored] = (await pricesOf(db, moved.productId)).filter((price) => price.printing === moved.subTypeName)
    expect(stored!.marketPrice).toBe(moved.marketPrice)
    // Movers follow: the 24-hour change is against the point the first load recorded.
    const first = SMALL_PRICES.find((row) => row.productId === moved.productId && row.subTypeName === moved.subTypeName)!
    expect(stored!.priceChange24h).toBe(percentChange(moved.marketPrice!, first.marketPrice!))

    await mirror.reset()
    const group = SMALL_GROUPS[1]!
    const modification = await mirror.modifyGroup(group.groupId)
    await sync(db, DAY2)
    expect((await requestsTo('/products')).map((request) => request.path)).toEqual([`/tcgplayer/${group.categoryId}/${group.groupId}/products`])
    const renamed = (await cardOf(db, modification.productId!))!
    expect(renamed.name).toBe(modification.name!)
  })
})

describe('pacing and budget', async () => {
  const { db } = await freshDatabase('empty')

  test('requests go one at a time, each the pacing after the previous answer, even when asked for at once', async () => {
    const paced = source(db, DAY1, { pacingMs: 60 })
    const [game] = (await paced.listGames()).filter((g) => g.categoryId === POKEMON)
    await Promise.all((await paced.listSets(game!.categoryId)).map((set) => paced.listProducts(set.groupId)))
    const arrivals = (await mirror.requests()).map((request) => request.atMs)
    expect(arrivals.length).toBeGreaterThan(4)
    // The mirror logs an arrival before its answer ends; the next request leaves 60 ms after that answer.
    for (let i = 1; i < arrivals.length; i++) expect(arrivals[i]! - arrivals[i - 1]!).toBeGreaterThanOrEqual(59)
  })

  test('a load that does not fit the day budget stops, keeps what it fetched, and the next day goes on', async () => {
    await db.delete(marketplaceRequests)
    // categories, pokemon's groups, one group's products and prices, the next group's products: then the budget is out.
    const partial = await sync(db, DAY1, { dailyRequests: 5, categories: [POKEMON] })
    expect(partial).toMatchObject({ failed: 0, partial: 1 })
    expect(partial.games[0]!.error).toContain("the day's marketplace request budget ran out")
    expect((await db.select().from(marketplaceRequests))[0]).toEqual({ day: DAY1, requests: 5 })
    expect((await mirror.requests()).length).toBe(5)
    const [firstGroup] = SMALL_GROUPS.filter((group) => group.categoryId === POKEMON)
    const [{ n: stored }] = (await db.select({ n: count() }).from(cards)) as [{ n: number }]
    expect(stored).toBe(smallProductsOf(firstGroup!.groupId).length)

    // The same day, nothing more is sent.
    await mirror.reset()
    await expect(sync(db, DAY1, { dailyRequests: 5, categories: [POKEMON] })).rejects.toThrow('requests are used up')
    expect(await mirror.requests()).toEqual([])

    // The next day's budget finishes the load; the group already stored is not fetched again.
    await mirror.setDay(DAY2)
    const done = await sync(db, DAY2, { dailyRequests: 100, categories: [POKEMON] })
    expect(done).toMatchObject({ failed: 0, partial: 0 })
    const pokemonGroups = SMALL_GROUPS.filter((group) => group.categoryId === POKEMON)
    expect((await requestsTo('/products')).length).toBe(pokemonGroups.length - 1)
    const [{ n: all }] = (await db.select({ n: count() }).from(cards)) as [{ n: number }]
    expect(all).toBe(SMALL_PRODUCTS.filter((product) => product.categoryId === POKEMON).length)
  })
})

describe('faults', async () => {
  const pokemonGroups = SMALL_GROUPS.filter((group) => group.categoryId === POKEMON)
  const target = pokemonGroups[1]!
  const targetPrices = `/${target.groupId}/prices`
  const targetProducts = `/${target.groupId}/products`

  test('429 with Retry-After is retried after the wait the mirror asked for', async () => {
    const { db } = await freshDatabase('empty')
    await mirror.setFault({ kind: 'status', status: 429, retryAfter: 1, match: targetPrices, times: 1 })
    const result = await sync(db, DAY1, { categories: [POKEMON] })
    expect(result).toMatchObject({ failed: 0, partial: 0 })
    const tries = await requestsTo(targetPrices)
    expect(tries.length).toBe(2)
    expect(tries[1]!.atMs - tries[0]!.atMs).toBeGreaterThanOrEqual(999)
  })

  test('5xx, a stalled answer, a broken connection and a truncated body are retried; a slow answer within the timeout is taken', async () => {
    const { db } = await freshDatabase('empty')
    await mirror.setFault([
      { kind: 'status', status: 503, match: targetProducts, times: 1 },
      { kind: 'hang', match: targetPrices, times: 1 },
      { kind: 'reset', match: `/${pokemonGroups[0]!.groupId}/prices`, times: 2 },
      { kind: 'truncated', match: `/${pokemonGroups[2]!.groupId}/products`, times: 1 },
      { kind: 'slow', delayMs: 300, match: `/${pokemonGroups[2]!.groupId}/prices`, times: 1 },
    ])
    // The hang costs one timeout; ordinary answers take far less even on a loaded machine.
    const result = await sync(db, DAY1, { categories: [POKEMON], timeoutMs: 2_000 })
    expect(result).toMatchObject({ failed: 0, partial: 0 })
    expect((await requestsTo(targetProducts)).length).toBe(2)
    expect((await requestsTo(targetPrices)).length).toBe(2)
    const [{ n }] = (await db.select({ n: count() }).from(cards)) as [{ n: number }]
    expect(n).toBe(SMALL_PRODUCTS.filter((product) => product.categoryId === POKEMON).length)
  })

  test('a group that keeps failing keeps its previous data; the next run fetches it again', async () => {
    const { db } = await freshDatabase('empty')
    await sync(db, DAY1, { categories: [POKEMON] })
    const before = await pricesOf(db, smallProductsOf(target.groupId)[0]!.productId)
    await mirror.reset()
    await mirror.setDay(DAY2)
    await mirror.setFault({ kind: 'status', status: 500, match: targetPrices })
    const result = await sync(db, DAY2, { categories: [POKEMON] })
    expect(result.games[0]).toMatchObject({ status: 'partial', stats: { groups_failed: 1 } })
    expect(result.games[0]!.error).toContain(`1 of ${pokemonGroups.length} groups failed`)
    expect((await requestsTo(targetPrices)).length).toBe(4)
    expect(await pricesOf(db, smallProductsOf(target.groupId)[0]!.productId)).toEqual(before)
    const runs = await db.select().from(syncRuns).where(eq(syncRuns.status, 'partial'))
    expect(runs.length).toBe(1)

    await mirror.setFault([])
    expect(await sync(db, DAY2, { categories: [POKEMON] })).toMatchObject({ failed: 0, partial: 0 })
    const after = await pricesOf(db, smallProductsOf(target.groupId)[0]!.productId)
    expect(after.every((price) => price.lastUpdatedAt.toISOString() === dayClock(DAY2).now().toISOString())).toBe(true)
  })

  test('success: false fails the group at once, without retrying', async () => {
    const { db } = await freshDatabase('empty')
    await mirror.setFault({ kind: 'failure', match: targetPrices })
    const result = await sync(db, DAY1, { categories: [POKEMON] })
    expect(result.games[0]!.status).toBe('partial')
    expect(result.games[0]!.error).toContain('success: false')
    expect((await requestsTo(targetPrices)).length).toBe(1)
  })

  test('junk rows are skipped and counted; the good rows of the same answer are stored', async () => {
    const { db } = await freshDatabase('empty')
    await mirror.setFault([
      { kind: 'junk', match: targetProducts },
      { kind: 'junk', match: targetPrices },
    ])
    // As the schedule runs it: the run's job_runs row counts the skipped rows too.
    const { runId, summary: result } = await runSyncJob(
      { db, source: source(db, DAY1, { categories: [POKEMON] }), clock: dayClock(DAY1), logger: testLogger, redis: undefined, alertHook: async () => {} },
      { job: 'manual-sync', scheduledFor: dayClock(DAY1).now() },
    )
    expect(result.games[0]!.status).toBe('succeeded')
    expect((await db.select().from(jobRuns).where(eq(jobRuns.id, runId)))[0]).toMatchObject({ outcome: 'succeeded', rowsSkipped: 3 + 5 })
    const products = smallProductsOf(target.groupId)
    const prices = smallPricesOf(target.groupId, DAY1)
    // Products: the nameless first row and two copies with bad ids. Prices: three bad values and two copies with bad ids.
    expect(result.games[0]!.stats!.rows_skipped).toBe(3 + 5)
    expect(await cardOf(db, products[0]!.productId)).toBeUndefined()
    for (const product of products.slice(1)) expect(await cardOf(db, product.productId)).toBeDefined()
    const storedPrices = await db
      .select({ n: count() })
      .from(cardPrices)
      .innerJoin(cards, eq(cards.id, cardPrices.cardId))
      .where(
        inArray(
          cards.marketplaceId,
          products.map((product) => product.productId),
        ),
      )
    // The three junk price rows are gone, and so are the prices of the product whose row was refused.
    const ofFirst = prices.filter((row) => row.productId === products[0]!.productId).length
    const junkOfOthers = prices.slice(0, 3).filter((row) => row.productId !== products[0]!.productId).length
    expect(storedPrices[0]!.n).toBe(prices.length - ofFirst - junkOfOthers)
  })

  test('an unknown printing is kept, after the known ones; duplicates are stored once and counted', async () => {
    const { db } = await freshDatabase('empty')
    await mirror.setFault([
      { kind: 'unknownPrinting', match: targetPrices },
      { kind: 'duplicates', match: `/${target.groupId}/` },
    ])
    const result = await sync(db, DAY1, { categories: [POKEMON] })
    expect(result.games[0]!.stats!.rows_skipped).toBe(2)
    const all = await db.select({ printing: cardPrices.printing, productId: cards.marketplaceId }).from(cardPrices).innerJoin(cards, eq(cards.id, cardPrices.cardId))
    const unknown = all.filter((row) => row.printing === UNKNOWN_PRINTING)
    expect(unknown.length).toBe(1)
    expect(all.length).toBe(SMALL_PRICES.filter((row) => pokemonGroups.some((g) => smallProductsOf(g.groupId).some((p) => p.productId === row.productId))).length + 1)
  })

  test('a product listed in another group moves there', async () => {
    const { db } = await freshDatabase('empty')
    const product = smallProductsOf(pokemonGroups[0]!.groupId)[0]!
    await mirror.setFault({ kind: 'moveProduct', productId: product.productId, toGroupId: target.groupId })
    await sync(db, DAY1, { categories: [POKEMON] })
    const [row] = await db.select({ groupId: sets.marketplaceGroupId }).from(cards).innerJoin(sets, eq(sets.id, cards.setId)).where(eq(cards.marketplaceId, product.productId))
    expect(row!.groupId).toBe(target.groupId)
  })

  test('a generic User-Agent is refused by the mirror and not retried', async () => {
    const { db } = await freshDatabase('empty')
    await expect(sync(db, DAY1, { userAgent: 'Bun/1.4' })).rejects.toThrow('answered 403')
    expect((await mirror.requests()).length).toBe(1)
  })

  test('a mirror that dies mid-sync leaves the stored catalog as it was', async () => {
    const { db } = await freshDatabase('empty')
    const own = await startFakeTcgcsv()
    try {
      const ownSource = (date: string) =>
        createTcgcsvSource({
          url: own.url,
          timeoutMs: 2_000,
          pacingMs: 0,
          dailyRequests: 1_000,
          userAgent: TEST_USER_AGENT,
          db,
          clock: dayClock(date),
          logger: testLogger,
          retryBaseMs: 10,
        })
      await syncGames({ db, source: ownSource(DAY1), clock: dayClock(DAY1), logger: testLogger })
      const before = await db.select().from(cardPrices).orderBy(asc(cardPrices.cardId), asc(cardPrices.printing))
      await own.reset()
      await own.setDay(DAY2)
      // The mirror stalls on pokemon's second group and is killed while the sync waits on it.
      await own.setFault({ kind: 'hang', match: targetPrices })
      const syncing = syncGames({ db, source: ownSource(DAY2), clock: dayClock(DAY2), logger: testLogger })
      await eventuallyRequested(own, targetPrices)
      await own.kill()
      const summary = await syncing
      expect(summary.games.find((game) => game.slug === 'pokemon')).toMatchObject({ status: 'partial' })
      // What the mirror never answered (the stalled group, the game after it) is exactly as it was.
      const untouched = [...smallProductsOf(target.groupId), ...SMALL_PRODUCTS.filter((product) => product.categoryId === 62)]
      for (const product of untouched) {
        const card = (await cardOf(db, product.productId))!
        const rows = (await db.select().from(cardPrices).where(eq(cardPrices.cardId, card.id))).sort((a, b) => a.printing.localeCompare(b.printing))
        expect(rows).toEqual(before.filter((row) => row.cardId === card.id).sort((a, b) => a.printing.localeCompare(b.printing)))
      }
      expect(summary.games.find((game) => game.slug.startsWith('flesh'))!.status).toBe('failed')
    } finally {
      await own.stop()
    }
  })
})

async function eventuallyRequested(own: FakeTcgcsv, part: string) {
  await eventually(async () => (await own.requests()).some((request) => request.path.includes(part)))
}
