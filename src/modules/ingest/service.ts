import { count, sql } from 'drizzle-orm'
import { type Database, type Executor, liftStatementTimeout } from '../../db/client'
import { games } from '../../db/schema'
import { addDays, type Clock, utcDate } from '../../shared/clock'
import { notFound } from '../../shared/errors'
import type { Logger } from '../../shared/logger'
import { slugify } from '../../shared/text'
import {
  type BackfillPlan,
  backfillDates,
  type MarketState,
  nextMarketState,
  percentChange,
  printingKey,
  toCardRow,
} from './normalize'
import * as repo from './repo'
import type { MarketplaceSource, SourceGame, SourceProduct, SourceSet } from './source'

export interface SyncDeps {
  db: Database
  source: MarketplaceSource
  clock: Clock
  logger: Logger
}

export interface SyncProgress {
  /** The game just finished. */
  game: string
  done: number
  total: number
}

export interface SyncOptions {
  /** Only these games (by slug); all of them when absent. */
  gameSlugs?: string[]
  /** Fill history before today first (seeding). */
  backfill?: BackfillPlan
  onProgress?: (progress: SyncProgress) => void
}

export interface GameSyncResult {
  slug: string
  status: 'succeeded' | 'failed'
  stats?: Record<string, number>
  error?: string
}

export interface SyncSummary {
  date: string
  games: GameSyncResult[]
  failed: number
}

/**
 * Pulls the catalog and today's prices from the marketplace source into the database. Each game
 * is one transaction: a failure rolls that game back to its previous data and the sync goes on
 * with the next game; the failure is recorded in `sync_runs` and returned.
 */
export async function syncGames(deps: SyncDeps, options: SyncOptions = {}): Promise<SyncSummary> {
  const now = deps.clock.now()
  const date = utcDate(now)
  const selected = selectGames(await deps.source.listGames(), options.gameSlugs)
  const gameIds = await repo.upsertGames(
    deps.db,
    selected.map((game) => ({
      marketplaceCategoryId: game.categoryId,
      name: game.name,
      slug: game.slug,
      kind: game.kind,
      priority: game.priority,
    })),
  )
  const results: GameSyncResult[] = []
  for (const game of selected) {
    const gameId = gameIds.get(game.categoryId)!
    const runId = await repo.startSyncRun(deps.db, gameId, date, now)
    try {
      const stats = await deps.db.transaction(async (tx) => {
        // A game's sync writes a year of history and waits for another node's sync of the same game.
        await liftStatementTimeout(tx)
        return syncGame(tx, deps.source, { game, gameId, date, now, backfill: options.backfill })
      })
      await repo.finishSyncRun(deps.db, runId, { status: 'succeeded', stats, now: deps.clock.now() })
      results.push({ slug: game.slug, status: 'succeeded', stats })
      deps.logger.debug({ game: game.slug, ...stats }, 'game synced')
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error)
      await repo.finishSyncRun(deps.db, runId, { status: 'failed', error: message, now: deps.clock.now() })
      results.push({ slug: game.slug, status: 'failed', error: message })
      deps.logger.error({ game: game.slug, err: error }, 'game sync failed; its previous data is kept')
    }
    options.onProgress?.({ game: game.slug, done: results.length, total: selected.length })
  }
  if (results.some((result) => result.status === 'succeeded')) await repo.refreshStatistics(deps.db)
  return { date, games: results, failed: results.filter((r) => r.status === 'failed').length }
}

function selectGames(all: SourceGame[], slugs: string[] | undefined): SourceGame[] {
  if (!slugs) return all
  return slugs.map((slug) => {
    const game = all.find((g) => g.slug === slug)
    if (!game) throw notFound(`Game '${slug}'`)
    return game
  })
}

interface GameSync {
  game: SourceGame
  gameId: number
  date: string
  now: Date
  backfill: BackfillPlan | undefined
}

async function syncGame(tx: Executor, source: MarketplaceSource, job: GameSync): Promise<Record<string, number>> {
  const { game, gameId, date, now } = job
  await repo.lockGameForSync(tx, gameId)

  const sourceSets = await source.listSets(game.categoryId)
  const setIds = await repo.upsertSets(
    tx,
    gameId,
    sourceSets.map((set) => ({
      gameId,
      marketplaceGroupId: set.groupId,
      name: set.name,
      slug: set.slug || slugify(set.name),
      abbreviation: set.abbreviation,
      releaseDate: set.releaseDate,
    })),
  )
  const productsBySet: [SourceSet, SourceProduct[]][] = []
  for (const set of sourceSets) productsBySet.push([set, await source.listProducts(set.groupId)])
  const cardIds = await repo.upsertCards(
    tx,
    gameId,
    productsBySet.flatMap(([set, products]) =>
      products.map((product) => toCardRow(product, { setId: setIds.get(set.groupId)!, gameId }, now)),
    ),
  )
  await repo.addSearchWords(tx, gameId)

  const market = await repo.findMarketStates(tx, gameId)
  let historyRows = 0
  if (job.backfill) {
    const dates = backfillDates(date, job.backfill)
    for (const [set] of productsBySet) {
      historyRows += await backfillSet(tx, source, { groupId: set.groupId, dates, salesUntil: addDays(date, -2), cardIds, market })
    }
  }

  const [day1, day7, day30] = [addDays(date, -1), addDays(date, -7), addDays(date, -30)]
  const past = await repo.findHistoryPoints(tx, gameId, [day1, day7, day30])
  const prices: repo.PriceRow[] = []
  const history: repo.HistoryRow[] = []
  for (const [set] of productsBySet) {
    for (const price of await source.listPrices(set.groupId, date)) {
      const cardId = cardIds.get(price.productId)
      if (cardId === undefined) continue
      const key = printingKey(cardId, price.printing)
      const state = nextMarketState(price, market.get(key), date)
      const points = past.get(key)
      prices.push({
        cardId,
        printing: price.printing,
        marketPrice: state.price,
        marketPriceAsOf: state.asOf,
        lowPrice: price.lowPrice,
        medianPrice: price.midPrice,
        lowestWithShipping: price.directLowPrice,
        buylistPrice: price.buylistPrice,
        priceChange24h: percentChange(state.price, points?.get(day1)),
        priceChange7d: percentChange(state.price, points?.get(day7)),
        priceChange30d: percentChange(state.price, points?.get(day30)),
        lastUpdatedAt: now,
      })
      history.push({ cardId, printing: price.printing, date, marketPrice: state.price, lowPrice: price.lowPrice })
    }
  }
  await repo.upsertPrices(tx, prices)
  await repo.upsertHistory(tx, history)

  const sales: repo.SalesRow[] = []
  for (const salesDate of salesDatesFor(game, date)) {
    for (const [set] of productsBySet) {
      for (const sale of await source.listSales(set.groupId, salesDate)) {
        const cardId = cardIds.get(sale.productId)
        if (cardId === undefined) continue
        sales.push({ cardId, printing: sale.printing, date: salesDate, ...pickSales(sale) })
      }
    }
  }
  await repo.recordSales(tx, sales)
  await repo.finishGameSync(tx, gameId, now)
  return {
    sets: sourceSets.length,
    cards: cardIds.size,
    prices: prices.length,
    history_rows: historyRows + history.length,
    sales_rows: sales.length,
  }
}

/**
 * Sales arrive a day late, from a separate per-card pull: daily for daily-refresh games (tiers 2
 * and 3), every third day (covering the three days before) for the others.
 */
function salesDatesFor(game: SourceGame, date: string): string[] {
  if (game.priority >= 2) return [addDays(date, -1)]
  const dayNumber = Date.parse(`${date}T00:00:00Z`) / 86_400_000
  return dayNumber % 3 === 0 ? [addDays(date, -1), addDays(date, -2), addDays(date, -3)] : []
}

const pickSales = (sale: { avgSalesPrice: number | null; salesVolume: number }) => ({
  avgSalesPrice: sale.avgSalesPrice,
  salesVolume: sale.salesVolume,
})

const HISTORY_FLUSH_ROWS = 20_000

/**
 * Writes the set's history points for the backfill dates, walking each printing's market price
 * forward so quiet days keep the last reported price. Leaves the newest walked state in `market`
 * where it is newer than what the database had.
 */
async function backfillSet(
  tx: Executor,
  source: MarketplaceSource,
  job: {
    groupId: number
    dates: string[]
    salesUntil: string
    cardIds: Map<number, number>
    market: Map<string, MarketState>
  },
): Promise<number> {
  const walk = new Map<string, MarketState>()
  let pending: repo.HistoryRow[] = []
  let written = 0
  for (const date of job.dates) {
    const sales = new Map<string, ReturnType<typeof pickSales>>()
    if (date <= job.salesUntil) {
      for (const sale of await source.listSales(job.groupId, date)) {
        const cardId = job.cardIds.get(sale.productId)
        if (cardId !== undefined) sales.set(printingKey(cardId, sale.printing), pickSales(sale))
      }
    }
    for (const price of await source.listPrices(job.groupId, date)) {
      const cardId = job.cardIds.get(price.productId)
      if (cardId === undefined) continue
      const key = printingKey(cardId, price.printing)
      const state = nextMarketState(price, walk.get(key), date)
      walk.set(key, state)
      const sale = sales.get(key)
      pending.push({
        cardId,
        printing: price.printing,
        date,
        marketPrice: state.price,
        lowPrice: price.lowPrice,
        avgSalesPrice: sale?.avgSalesPrice ?? null,
        salesVolume: sale?.salesVolume ?? null,
      })
    }
    if (pending.length >= HISTORY_FLUSH_ROWS) {
      await repo.upsertHistory(tx, pending)
      written += pending.length
      pending = []
    }
  }
  await repo.upsertHistory(tx, pending)
  written += pending.length
  for (const [key, state] of walk) {
    const known = job.market.get(key)
    if (!known || known.asOf < state.asOf) job.market.set(key, state)
  }
  return written
}

export async function isCatalogEmpty(db: Database): Promise<boolean> {
  const [row] = await db.select({ n: count() }).from(games)
  return (row?.n ?? 0) === 0
}

/** Removes the catalog, prices and history (and the webhooks watching cards); accounts and keys stay. */
export async function wipeCatalog(db: Database): Promise<void> {
  await db.execute(
    sql`truncate price_history, condition_prices, condition_refreshes, card_prices, webhook_deliveries, webhooks, cards, sets, sync_runs, job_runs, games restart identity`,
  )
}
