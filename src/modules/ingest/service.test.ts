import { describe, expect, test } from 'bun:test'
import { and, asc, count, eq, inArray, sql } from 'drizzle-orm'
import { freshDatabase, selectRows, testClock, testLogger, tinySource } from '../../../test/helpers/db'
import { TEST_NOW } from '../../../test/helpers/env'
import type { Database } from '../../db/client'
import { cardPrices, cards, games, priceHistory, sets, syncRuns } from '../../db/schema'
import { addDays, clockWithWall, utcDate } from '../../shared/clock'
import { cleanName } from '../../shared/text'
import { backfillDates, DEFAULT_BACKFILL, HISTORY_START, percentChange } from './normalize'
import { syncGames } from './service'
import type { MarketplaceSource, SourceProduct } from './source'

const TODAY = utcDate(TEST_NOW)
const TOMORROW = addDays(TODAY, 1)
const tomorrowClock = clockWithWall(() => new Date(TEST_NOW.getTime() + 86_400_000))

/** Everything a sync writes, in a stable order, minus the "last synced" stamps. */
async function catalogState(db: Database) {
  return {
    games: (await db.select().from(games).orderBy(asc(games.id))).map(({ lastSyncedAt: _, ...g }) => g),
    sets: (await db.select().from(sets).orderBy(asc(sets.id))).map(({ lastSyncedAt: _, ...s }) => s),
    cards: await db.select().from(cards).orderBy(asc(cards.id)),
    prices: await db.select().from(cardPrices).orderBy(asc(cardPrices.cardId), asc(cardPrices.printing)),
    history: await db.select().from(priceHistory).orderBy(asc(priceHistory.cardId), asc(priceHistory.printing), asc(priceHistory.date)),
  }
}

describe('seeding the demo catalog', async () => {
  const { db } = await freshDatabase('seeded')
  const source = tinySource()

  test('every source product has a card, and every printing of a released one a current price', async () => {
    let products = 0
    let releasedPrintings = 0
    let presale = 0
    for (const game of await source.listGames()) {
      for (const set of await source.listSets(game.categoryId)) {
        for (const product of await source.listProducts(set.groupId)) {
          products++
          if (product.productStatusId === 1) releasedPrintings += product.printings.length
          else presale++
        }
      }
    }
    const [cardCount] = await db.select({ n: count() }).from(cards)
    const [priceCount] = await db.select({ n: count() }).from(cardPrices)
    expect(cardCount!.n).toBe(products)
    // Presale products (their set is released after today) have no price yet.
    expect(presale).toBeGreaterThan(0)
    expect(priceCount!.n).toBe(releasedPrintings)
  })

  test('presale cards (a set released after the sync day) have no prices and no history; released cards have both', async () => {
    const byStatus = await selectRows<{ status: number; cards: number; priced: number; with_history: number; future_sets: number }>(
      db,
      sql`
      select c.product_status_id as status, count(*)::int as cards,
             count(*) filter (where exists (select 1 from card_prices cp where cp.card_id = c.id))::int as priced,
             count(*) filter (where exists (select 1 from price_history h where h.card_id = c.id))::int as with_history,
             count(*) filter (where s.release_date > ${TODAY}::date)::int as future_sets
      from cards c join sets s on s.id = c.set_id group by c.product_status_id order by 1`,
    )
    const [active, presale] = byStatus
    expect(active).toMatchObject({ status: 1, future_sets: 0 })
    expect(active!.priced).toBe(active!.cards)
    expect(active!.with_history).toBe(active!.cards)
    expect(presale).toMatchObject({ status: 20, priced: 0, with_history: 0 })
    expect(presale!.future_sets).toBe(presale!.cards)
  })

  test("games and sets carry the source's image, logo and set icon; null where it has none", async () => {
    const sourceGames = await source.listGames()
    const storedGames = new Map((await db.select().from(games)).map((game) => [game.marketplaceCategoryId, game]))
    const storedSets = new Map((await db.select().from(sets)).map((set) => [set.marketplaceGroupId, set]))
    for (const game of sourceGames) {
      expect(storedGames.get(game.categoryId)).toMatchObject({ imageUrl: game.imageUrl ?? null, logoUrl: game.logoUrl ?? null })
      for (const set of await source.listSets(game.categoryId)) {
        expect(storedSets.get(set.groupId)).toMatchObject({ imageUrl: set.imageUrl ?? null, setIconUrl: set.setIconUrl ?? null })
      }
    }
    // The tiny catalog has both: some games without a logo, some sets without an icon.
    expect([...storedGames.values()].filter((game) => game.logoUrl === null).length).toBeGreaterThan(0)
    expect([...storedGames.values()].filter((game) => game.logoUrl !== null).length).toBeGreaterThan(0)
    expect([...storedSets.values()].filter((set) => set.setIconUrl === null).length).toBeGreaterThan(0)
  })

  test('sealed products are stored with no number (null), cards with theirs', async () => {
    const rows = await selectRows<{ product_type: string; numbered: number; total: number }>(
      db,
      sql`
      select product_type, count(number)::int as numbered, count(*)::int as total from cards group by product_type order by 1`,
    )
    expect(rows).toEqual([
      { product_type: 'Cards', numbered: rows[0]!.total, total: rows[0]!.total },
      { product_type: 'Sealed Products', numbered: 0, total: rows[1]!.total },
    ])
    expect(rows[1]!.total).toBeGreaterThan(0)
  })

  test('cards carry the source fields, a derived foil_only and a search-ready clean_name', async () => {
    const products = new Map<number, SourceProduct>()
    for (const game of await source.listGames()) {
      for (const set of await source.listSets(game.categoryId)) {
        for (const product of await source.listProducts(set.groupId)) products.set(product.productId, product)
      }
    }
    const rows = await db.select().from(cards)
    let foilOnlyCards = 0
    for (const card of rows) {
      const product = products.get(card.marketplaceId)!
      const allFoil = product.printings.every((printing) => /foil/i.test(printing))
      expect(card.foilOnly).toBe(allFoil ? 1 : 0)
      foilOnlyCards += card.foilOnly
      expect(card.cleanName).toBe(cleanName(product.name))
      expect(card).toMatchObject({
        name: product.name,
        number: product.number,
        productType: product.productType,
        shippingCategoryId: product.shippingCategoryId,
        productStatusId: product.productStatusId,
        hp: product.hp,
        customAttributes: product.customAttributes,
      })
    }
    expect(foilOnlyCards).toBeGreaterThan(0)
  })

  test('history holds weekly then daily points, oldest first, ending today', async () => {
    // The printing with the longest history: a card released before the history starts.
    const [row] = await db
      .select({ cardId: priceHistory.cardId, printing: priceHistory.printing })
      .from(priceHistory)
      .groupBy(priceHistory.cardId, priceHistory.printing)
      .orderBy(sql`count(*) desc`, asc(priceHistory.cardId))
      .limit(1)
    const points = await db
      .select({ date: priceHistory.date })
      .from(priceHistory)
      .where(and(eq(priceHistory.cardId, row!.cardId), eq(priceHistory.printing, row!.printing)))
      .orderBy(asc(priceHistory.date))
    const dates = points.map((p) => p.date)
    // Weekly points fall on the weekday of the history's first day, 2025-03-02, whatever the seed day.
    expect(HISTORY_START).toBe('2025-03-02')
    expect(backfillDates(TODAY, DEFAULT_BACKFILL)[0]).toBe(HISTORY_START)
    const weekly = dates.slice(
      0,
      dates.findIndex((d, i) => i > 0 && Date.parse(d) - Date.parse(dates[i - 1]!) === 86_400_000),
    )
    expect(weekly.length).toBeGreaterThan(1)
    expect(weekly.every((d) => ((Date.parse(d) - Date.parse(HISTORY_START)) / 86_400_000) % 7 === 0)).toBe(true)
    expect(dates.at(-1)).toBe(TODAY)
    expect(dates).toContain(addDays(TODAY, -DEFAULT_BACKFILL.dailyDays))
    const gaps = dates.slice(1).map((d, i) => (Date.parse(d) - Date.parse(dates[i]!)) / 86_400_000)
    expect(new Set(gaps)).toEqual(new Set([7, 1]))
    expect(gaps.indexOf(1)).toBeGreaterThan(0)
    expect(gaps.slice(gaps.indexOf(1)).every((g) => g === 1)).toBe(true)
  })

  test('sales are recorded up to yesterday and null for today', async () => {
    const byDate = await db
      .select({
        date: priceHistory.date,
        withSales: sql<number>`count(${priceHistory.salesVolume})::int`,
      })
      .from(priceHistory)
      .where(inArray(priceHistory.date, [TODAY, addDays(TODAY, -1)]))
      .groupBy(priceHistory.date)
    const counts = Object.fromEntries(byDate.map((r) => [r.date, r.withSales]))
    expect(counts[TODAY]).toBe(0)
    expect(counts[addDays(TODAY, -1)]).toBeGreaterThan(0)
  })

  test('price changes are computed from the history points 1, 7 and 30 days back', async () => {
    const rows = await db.select().from(cardPrices).limit(50)
    for (const price of rows) {
      const points = await db
        .select({ date: priceHistory.date, market: priceHistory.marketPrice })
        .from(priceHistory)
        .where(and(eq(priceHistory.cardId, price.cardId), eq(priceHistory.printing, price.printing)))
      const at = (days: number) => points.find((p) => p.date === addDays(TODAY, -days))?.market
      expect(price.priceChange24h).toBe(percentChange(price.marketPrice!, at(1)))
      expect(price.priceChange7d).toBe(percentChange(price.marketPrice!, at(7)))
      expect(price.priceChange30d).toBe(percentChange(price.marketPrice!, at(30)))
      expect(points.find((p) => p.date === TODAY)?.market).toBe(price.marketPrice!)
    }
    expect(rows.filter((r) => r.priceChange24h !== null).length).toBeGreaterThan(25)
  })

  test('a quiet market price is kept and dated, not dropped', async () => {
    const today = new Map<string, boolean>()
    for (const game of await source.listGames()) {
      for (const set of await source.listSets(game.categoryId)) {
        for (const price of await source.listPrices(set.groupId, TODAY)) {
          today.set(`${price.productId}|${price.printing}`, price.marketPrice === null)
        }
      }
    }
    const rows = await db
      .select({ marketplaceId: cards.marketplaceId, printing: cardPrices.printing, asOf: cardPrices.marketPriceAsOf, price: cardPrices.marketPrice })
      .from(cardPrices)
      .innerJoin(cards, eq(cards.id, cardPrices.cardId))
    const quiet = rows.filter((r) => today.get(`${r.marketplaceId}|${r.printing}`))
    expect(quiet.length).toBeGreaterThan(0)
    for (const row of quiet) {
      expect(row.asOf! < TODAY).toBe(true)
      expect(row.price).toBeGreaterThan(0)
    }
    const loud = rows.filter((r) => today.get(`${r.marketplaceId}|${r.printing}`) === false)
    expect(loud.every((r) => r.asOf === TODAY)).toBe(true)
  })

  test('every sync run is recorded as succeeded', async () => {
    const runs = await db.select().from(syncRuns)
    expect(runs).toHaveLength(57)
    expect(runs.every((r) => r.status === 'succeeded' && r.finishedAt !== null)).toBe(true)
  })

  test('the planner has statistics for every table the sync wrote (no autovacuum needed)', async () => {
    const analysed = await selectRows<{ table: string }>(
      db,
      sql`
      select distinct tablename as table from pg_stats
      where schemaname = 'public' and tablename in ('games', 'sets', 'cards', 'card_prices', 'price_history')`,
    )
    expect(analysed.map((row) => row.table).sort()).toEqual(['card_prices', 'cards', 'games', 'price_history', 'sets'])
  })
})

describe('what a source leaves out', async () => {
  const { db } = await freshDatabase('empty')
  const real = tinySource()
  // A marketplace without images, logos or icons, which sends sealed products' numbers blank.
  const bare: MarketplaceSource = {
    ...real,
    listGames: async () => (await real.listGames()).map(({ imageUrl: _image, logoUrl: _logo, ...game }) => game),
    listSets: async (id) => (await real.listSets(id)).map(({ imageUrl: _image, setIconUrl: _icon, ...set }) => set),
    listProducts: async (id) => (await real.listProducts(id)).map((product) => ({ ...product, number: product.number ?? '' })),
    listPrices: (id, date) => real.listPrices(id, date),
    listSales: (id, date) => real.listSales(id, date),
    listListings: (id) => real.listListings(id),
  }
  const pokemon = async () => {
    const [game] = await db.select().from(games).where(eq(games.slug, 'pokemon'))
    return { game: game!, sets: await db.select().from(sets).where(eq(sets.gameId, game!.id)) }
  }
  const sealedNumbers = async () => (await db.select({ number: cards.number }).from(cards).where(eq(cards.productType, 'Sealed Products'))).map((row) => row.number)

  test('images it does not give are null; a blank number is stored as null', async () => {
    expect((await syncGames({ db, source: bare, clock: testClock, logger: testLogger }, { gameSlugs: ['pokemon'] })).failed).toBe(0)
    const { game, sets: stored } = await pokemon()
    expect(game).toMatchObject({ imageUrl: null, logoUrl: null })
    expect(stored.length).toBeGreaterThan(0)
    for (const set of stored) expect(set).toMatchObject({ imageUrl: null, setIconUrl: null })
    const numbers = await sealedNumbers()
    expect(numbers.length).toBeGreaterThan(0)
    expect(numbers.every((number) => number === null)).toBe(true)
  })

  test('images it gives later are stored by the next sync', async () => {
    await syncGames({ db, source: real, clock: testClock, logger: testLogger }, { gameSlugs: ['pokemon'] })
    const { game, sets: stored } = await pokemon()
    const sourceGame = (await real.listGames()).find((g) => g.slug === 'pokemon')!
    expect(game).toMatchObject({ imageUrl: sourceGame.imageUrl!, logoUrl: sourceGame.logoUrl! })
    const sourceSets = new Map((await real.listSets(sourceGame.categoryId)).map((set) => [set.groupId, set]))
    for (const set of stored) {
      const expected = sourceSets.get(set.marketplaceGroupId)!
      expect(set).toMatchObject({ imageUrl: expected.imageUrl!, setIconUrl: expected.setIconUrl! })
    }
  })
})

describe('sync idempotency', async () => {
  const { db } = await freshDatabase('seeded')
  const deps = { db, source: tinySource(), clock: testClock, logger: testLogger }

  test('syncing the same day again changes nothing', async () => {
    const before = await catalogState(db)
    const summary = await syncGames(deps)
    expect(summary.failed).toBe(0)
    expect(summary.changes).toEqual([])
    expect(await catalogState(db)).toEqual(before)
  }, 60_000) // a whole sync: 20 s seen with both cores busy

  test('tiers select the games of those priority tiers, within the named games if any', async () => {
    const all = await tinySource().listGames()
    const majors = await syncGames(deps, { tiers: [3] })
    expect(majors.games.map((g) => g.slug)).toEqual(all.filter((g) => g.priority === 3).map((g) => g.slug))
    expect(majors.games).toHaveLength(7)
    const named = await syncGames(deps, { gameSlugs: ['pokemon', 'weiss-schwarz'], tiers: [2] })
    expect(named.games.map((g) => g.slug)).toEqual(['weiss-schwarz'])
  })

  test('seeding again adds no duplicate history rows and changes nothing', async () => {
    const before = await catalogState(db)
    await syncGames(deps, { backfill: DEFAULT_BACKFILL })
    const after = await catalogState(db)
    expect(after.history.length).toBe(before.history.length)
    expect(after).toEqual(before)
    // A full backfill of the tiny catalog: 5.3 to 5.7 s on embedded PGlite on a slow 2-core machine,
    // 26 s on PostgreSQL with both cores busy and other suites running.
  }, 120_000)
})

describe('the next day', async () => {
  const { db } = await freshDatabase('seeded')
  const pricesBefore = await db.select().from(cardPrices)
  const summary = await syncGames({ db, source: tinySource(), clock: tomorrowClock, logger: testLogger })

  test('reports every printing whose market price moved, with the price before (null when new)', async () => {
    const before = new Map(pricesBefore.map((row) => [`${row.cardId}|${row.printing}`, row.marketPrice]))
    const expected = (await db.select().from(cardPrices))
      .filter((row) => before.get(`${row.cardId}|${row.printing}`) !== row.marketPrice)
      .map((row) => ({ cardId: row.cardId, printing: row.printing, previousPrice: before.get(`${row.cardId}|${row.printing}`) ?? null, newPrice: row.marketPrice! }))
    const byKey = (a: { cardId: number; printing: string }, b: { cardId: number; printing: string }) => a.cardId - b.cardId || a.printing.localeCompare(b.printing)
    expect(expected.length).toBeGreaterThan(pricesBefore.length / 2)
    expect([...summary.changes].sort(byKey)).toEqual(expected.sort(byKey))
  })

  test('appends one history point per priced printing and refreshes prices', async () => {
    expect(summary.failed).toBe(0)
    const [points] = await db.select({ n: count() }).from(priceHistory).where(eq(priceHistory.date, TOMORROW))
    const [prices] = await db.select({ n: count() }).from(cardPrices)
    expect(points!.n).toBe(prices!.n)
    const [stale] = await db.select({ n: count() }).from(cardPrices).where(sql`${cardPrices.marketPriceAsOf} < ${TODAY}`)
    expect(stale!.n).toBeLessThan(prices!.n * 0.2)
  })

  test("records yesterday's sales", async () => {
    const [withSales] = await db
      .select({ n: count(priceHistory.salesVolume) })
      .from(priceHistory)
      .where(eq(priceHistory.date, TODAY))
    expect(withSales!.n).toBeGreaterThan(0)
  })

  test('the game and its sets are stamped with the sync time', async () => {
    const [game] = await db.select().from(games).where(eq(games.slug, 'pokemon'))
    expect(game!.lastSyncedAt?.toISOString()).toBe(tomorrowClock.now().toISOString())
  })
})

describe('a failure mid-sync', async () => {
  const { db } = await freshDatabase('seeded')
  const real = tinySource()
  const pokemon = (await real.listGames()).find((g) => g.slug === 'pokemon')!
  const pokemonSets = await real.listSets(pokemon.categoryId)
  const failingGroups = new Set<number>()
  // Fails the chosen groups' prices, after the game's sets were written.
  const failing: MarketplaceSource = {
    ...real,
    listGames: () => real.listGames(),
    listSets: (id) => real.listSets(id),
    listProducts: (id) => real.listProducts(id),
    listSales: (id, date) => real.listSales(id, date),
    listListings: (id) => real.listListings(id),
    listPrices: async (groupId, date) => {
      if (failingGroups.has(groupId)) throw new Error('marketplace timed out')
      return real.listPrices(groupId, date)
    },
  }
  const pokemonPrices = (groupId?: number) =>
    db
      .select({ price: cardPrices })
      .from(cardPrices)
      .innerJoin(cards, eq(cards.id, cardPrices.cardId))
      .innerJoin(games, eq(games.id, cards.gameId))
      .innerJoin(sets, eq(sets.id, cards.setId))
      .where(and(eq(games.slug, 'pokemon'), groupId === undefined ? undefined : eq(sets.marketplaceGroupId, groupId)))
      .orderBy(asc(cardPrices.cardId), asc(cardPrices.printing))
      .then((rows) => rows.map((row) => row.price))
  const historyOn = async (date: string, groupId: number) => {
    const [row] = await db
      .select({ n: count() })
      .from(priceHistory)
      .innerJoin(cards, eq(cards.id, priceHistory.cardId))
      .innerJoin(sets, eq(sets.id, cards.setId))
      .where(and(eq(priceHistory.date, date), eq(sets.marketplaceGroupId, groupId)))
    return row!.n
  }

  test('a failing group keeps its previous data; the other groups of the game and the other games go on', async () => {
    const [firstSet, secondSet] = pokemonSets
    failingGroups.add(secondSet!.groupId)
    const secondBefore = await pokemonPrices(secondSet!.groupId)
    const firstBefore = await pokemonPrices(firstSet!.groupId)

    const summary = await syncGames({ db, source: failing, clock: tomorrowClock, logger: testLogger })

    expect(summary.failed).toBe(0)
    expect(summary.partial).toBe(1)
    const result = summary.games.find((g) => g.slug === 'pokemon')!
    expect(result.status).toBe('partial')
    expect(result.error).toBe(`1 of ${pokemonSets.length} groups failed (first: marketplace timed out)`)
    expect(result.stats).toMatchObject({ groups_failed: 1, sets: pokemonSets.length })
    expect(await pokemonPrices(secondSet!.groupId)).toEqual(secondBefore)
    expect(await historyOn(TOMORROW, secondSet!.groupId)).toBe(0)
    const firstAfter = await pokemonPrices(firstSet!.groupId)
    expect(firstAfter.length).toBe(firstBefore.length)
    expect(firstAfter.every((row) => row.lastUpdatedAt.getTime() === tomorrowClock.now().getTime())).toBe(true)
    expect(await historyOn(TOMORROW, firstSet!.groupId)).toBeGreaterThan(0)
    expect(summary.games.filter((g) => g.slug !== 'pokemon').every((g) => g.status === 'succeeded')).toBe(true)
    const runs = await db.select().from(syncRuns).where(eq(syncRuns.status, 'partial'))
    expect(runs).toHaveLength(1)
    expect(runs[0]!.error).toBe(result.error!)
  }, 60_000) // a whole sync: 14 s seen with both cores busy

  test('a game whose every group fails is rolled back to its previous data and recorded failed', async () => {
    for (const set of pokemonSets) failingGroups.add(set.groupId)
    const [gameBefore] = await db.select().from(games).where(eq(games.slug, 'pokemon'))
    const pricesBefore = await pokemonPrices()
    const dayAfter = clockWithWall(() => new Date(TEST_NOW.getTime() + 2 * 86_400_000))

    const summary = await syncGames({ db, source: failing, clock: dayAfter, logger: testLogger }, { gameSlugs: ['pokemon'] })

    expect(summary.failed).toBe(1)
    expect(summary.games[0]).toMatchObject({ slug: 'pokemon', status: 'failed', error: `every group failed (${pokemonSets.length}); first: marketplace timed out` })
    expect(await pokemonPrices()).toEqual(pricesBefore)
    const [gameAfter] = await db.select().from(games).where(eq(games.slug, 'pokemon'))
    expect(gameAfter).toEqual(gameBefore!)
  }, 60_000)
})
