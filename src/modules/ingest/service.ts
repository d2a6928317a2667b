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
import type { MarketplaceSource, SourceGame, SourcePrice, SourceSale } from './source'

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
  /** Only games of these priority tiers (0..3); with `gameSlugs`, the named games of these tiers. */
  tiers?: number[]
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
  /** Every printing whose market price this run changed, in the games that succeeded. */
  changes: PriceChange[]
}

/** A printing's market price moved (or appeared) in a sync: what alert evaluation consumes. */
export interface PriceChange {
  cardId: number
  printing: string
  /** The card_prices value before the sync; null when the printing is new. */
  previousPrice: number | null
  newPrice: number
}

/**
 * Pulls the catalog and today's prices from the marketplace source into the database. Each game
 * is one transaction: a failure rolls that game back to its previous data and the sync goes on
 * with the next game; the failure is recorded in `sync_runs` and returned.
 */
export async function syncGames(deps: SyncDeps, options: SyncOptions = {}): Promise<SyncSummary> {
  const now = deps.clock.now()
  const date = utcDate(now)
  const selected = selectGames(await deps.source.listGames(), options.gameSlugs, options.tiers)
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
  const changes: PriceChange[] = []
  for (const game of selected) {
    const gameId = gameIds.get(game.categoryId)!
    const runId = await repo.startSyncRun(deps.db, gameId, date, now)
    try {
      const outcome = await deps.db.transaction(async (tx) => {
        // A game's seed writes its history since 2025-03-02, and a sync waits for another node's sync of the same game.
        await liftStatementTimeout(tx)
        return syncGame(tx, deps.source, { game, gameId, date, now, backfill: options.backfill })
      })
      const stats = outcome.stats
      for (const change of outcome.changes) changes.push(change)
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
  return { date, games: results, failed: results.filter((r) => r.status === 'failed').length, changes }
}

function selectGames(all: SourceGame[], slugs: string[] | undefined, tiers: number[] | undefined): SourceGame[] {
  const named = !slugs
    ? all
    : slugs.map((slug) => {
        const game = all.find((g) => g.slug === slug)
        if (!game) throw notFound(`Game '${slug}'`)
        return game
      })
  return tiers ? named.filter((game) => tiers.includes(game.priority)) : named
}

interface GameSync {
  game: SourceGame
  gameId: number
  date: string
  now: Date
  backfill: BackfillPlan | undefined
}

interface GameOutcome {
  stats: Record<string, number>
  changes: PriceChange[]
}

async function syncGame(tx: Executor, source: MarketplaceSource, job: GameSync): Promise<GameOutcome> {
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
  const cardRows: repo.CardRow[] = []
  for (const set of sourceSets) {
    for (const product of await source.listProducts(set.groupId)) {
      cardRows.push(toCardRow(product, { setId: setIds.get(set.groupId)!, gameId }, now))
    }
  }
  const cardIds = await repo.upsertCards(tx, gameId, cardRows)
  cardRows.length = 0
  await repo.addSearchWords(tx, gameId)

  const current = await repo.findCurrentPrices(tx, gameId)
  const market = repo.marketStates(current)
  let historyRows = 0
  if (job.backfill) {
    const dates = backfillDates(date, job.backfill)
    const mode = (await repo.hasHistory(tx, gameId)) ? 'upsert' : 'append'
    historyRows += await repo.writeHistory(tx, { mode, withSales: true }, async (emit, flush) => {
      for (const set of sourceSets) {
        await backfillSet(source, { groupId: set.groupId, dates, salesUntil: addDays(date, -2), cardIds, market }, emit)
        await flush()
      }
    })
  }

  const todays: { cardId: number; price: SourcePrice }[] = []
  for (const set of sourceSets) {
    for (const price of await source.listPrices(set.groupId, date)) {
      const cardId = cardIds.get(price.productId)
      if (cardId !== undefined) todays.push({ cardId, price })
    }
  }
  const [day1, day7, day30] = [addDays(date, -1), addDays(date, -7), addDays(date, -30)]
  const past = await repo.findHistoryPoints(
    tx,
    todays.map(({ cardId, price }) => ({ cardId, printing: price.printing })),
    [day1, day7, day30],
  )
  const prices: repo.PriceRow[] = []
  const changes: PriceChange[] = []
  for (const { cardId, price } of todays) {
    const key = printingKey(cardId, price.printing)
    const state = nextMarketState(price, market.get(key), date)
    const points = past.get(key)
    const previousPrice = current.get(key)?.price ?? null
    if (previousPrice !== state.price) changes.push({ cardId, printing: price.printing, previousPrice, newPrice: state.price })
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
  }
  todays.length = 0
  current.clear()
  past.clear()
  await repo.upsertPrices(tx, prices)
  historyRows += await repo.writeHistory(tx, { mode: 'upsert', withSales: false }, async (emit) => {
    for (const price of prices) emit(price.cardId, price.printing, date, price.marketPrice!, price.lowPrice, null, null)
  })

  const sales: repo.SalesRow[] = []
  for (const salesDate of salesDatesFor(game, date)) {
    for (const set of sourceSets) {
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
    stats: {
      sets: sourceSets.length,
      cards: cardIds.size,
      prices: prices.length,
      history_rows: historyRows,
      sales_rows: sales.length,
      price_changes: changes.length,
    },
    changes,
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

/**
 * Emits the set's history points for the backfill dates, each printing's points together and
 * oldest first (the history key's order, so its index grows at a few places), walking each
 * printing's market price forward so quiet days keep the last reported price. Leaves the newest
 * walked state in `market` where it is newer than what the database had. Holds one set's points.
 */
async function backfillSet(
  source: MarketplaceSource,
  job: {
    groupId: number
    dates: string[]
    salesUntil: string
    cardIds: Map<number, number>
    market: Map<string, MarketState>
  },
  emit: repo.EmitHistory,
): Promise<void> {
  const series = new Map<string, PrintingSeries>()
  for (let dateIndex = 0; dateIndex < job.dates.length; dateIndex++) {
    const date = job.dates[dateIndex]!
    const sales = new Map<string, SourceSale>()
    if (date <= job.salesUntil) {
      for (const sale of await source.listSales(job.groupId, date)) sales.set(`${sale.productId}\u0000${sale.printing}`, sale)
    }
    for (const price of await source.listPrices(job.groupId, date)) {
      const cardId = job.cardIds.get(price.productId)
      if (cardId === undefined) continue
      const key = printingKey(cardId, price.printing)
      let points = series.get(key)
      if (!points) series.set(key, (points = { cardId, printing: price.printing, state: undefined, dates: [], market: [], low: [], avg: [], volume: [] }))
      points.state = nextMarketState(price, points.state, date)
      const sale = sales.get(`${price.productId}\u0000${price.printing}`)
      points.dates.push(dateIndex)
      points.market.push(points.state.price)
      points.low.push(price.lowPrice)
      points.avg.push(sale ? sale.avgSalesPrice : null)
      points.volume.push(sale ? sale.salesVolume : null)
    }
  }
  const ordered = [...series.values()].sort((a, b) => a.cardId - b.cardId || (a.printing < b.printing ? -1 : a.printing > b.printing ? 1 : 0))
  for (const points of ordered) {
    for (let i = 0; i < points.dates.length; i++) {
      emit(points.cardId, points.printing, job.dates[points.dates[i]!]!, points.market[i]!, points.low[i]!, points.avg[i]!, points.volume[i]!)
    }
    const key = printingKey(points.cardId, points.printing)
    const known = job.market.get(key)
    if (points.state && (!known || known.asOf < points.state.asOf)) job.market.set(key, points.state)
  }
}

/** One printing's backfilled points, column by column. */
interface PrintingSeries {
  cardId: number
  printing: string
  state: MarketState | undefined
  dates: number[]
  market: number[]
  low: number[]
  avg: (number | null)[]
  volume: (number | null)[]
}

export async function isCatalogEmpty(db: Database): Promise<boolean> {
  const [row] = await db.select({ n: count() }).from(games)
  return (row?.n ?? 0) === 0
}

/** Removes the catalog, prices and history (and the webhooks watching cards); accounts and keys stay. */
export async function wipeCatalog(db: Database): Promise<void> {
  await db.execute(
    sql`truncate price_history, condition_prices, condition_refreshes, card_prices, webhook_attempts, webhook_deliveries, webhooks, cards, sets, sync_runs, job_runs, games restart identity`,
  )
}
