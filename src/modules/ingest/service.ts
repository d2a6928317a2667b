import { type Database, type Executor, liftStatementTimeout } from '../../db/client'
import { addDays, type Clock, utcDate } from '../../shared/clock'
import { notFound } from '../../shared/errors'
import type { Logger } from '../../shared/logger'
import { slugify } from '../../shared/text'
import { type BackfillPlan, backfillDates, type MarketState, nextMarketState, percentChange, printingKey, toCardRow } from './normalize'
import * as repo from './repo'
import type { MarketplaceSource, SourceGame, SourcePrice, SourceProduct, SourceSale, SourceSet } from './source'
import { MarketplaceError } from './sources/request'

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
  /**
   * partial: some of the game's groups failed, or the day's request budget ran out; what was
   * fetched is stored, the rest keeps its previous data and is fetched again by the next run.
   */
  status: 'succeeded' | 'partial' | 'failed'
  stats?: Record<string, number>
  error?: string
}

export interface SyncSummary {
  date: string
  games: GameSyncResult[]
  failed: number
  partial: number
  /** Every printing whose market price this run changed, in the games that stored anything. */
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
  // Highest tier first: when the request budget runs out, the games that matter most are done.
  const listed = await deps.source.listGames().finally(() => deps.source.checkpoint?.())
  const selected = selectGames(listed, options.gameSlugs, options.tiers).sort((a, b) => b.priority - a.priority)
  const gameIds = await repo.upsertGames(
    deps.db,
    selected.map((game) => ({
      marketplaceCategoryId: game.categoryId,
      name: game.name,
      slug: game.slug,
      kind: game.kind,
      priority: game.priority,
      imageUrl: game.imageUrl ?? null,
      logoUrl: game.logoUrl ?? null,
    })),
  )
  // Past prices exist only where the source keeps them; elsewhere history starts with this sync.
  const backfill = deps.source.capabilities.pastPrices ? options.backfill : undefined
  const results: GameSyncResult[] = []
  const changes: PriceChange[] = []
  for (const game of selected) {
    const gameId = gameIds.get(game.categoryId)!
    const runId = await repo.startSyncRun(deps.db, gameId, date, now)
    try {
      const outcome = await deps.db.transaction(async (tx) => {
        // A game's seed writes its history since 2025-03-02, and a sync waits for another node's sync of the same game.
        await liftStatementTimeout(tx)
        return syncGame(tx, deps, { game, gameId, date, now, backfill })
      })
      const { stats, incomplete } = outcome
      for (const change of outcome.changes) changes.push(change)
      const status = incomplete ? 'partial' : 'succeeded'
      await repo.finishSyncRun(deps.db, runId, { status, stats, error: incomplete, now: deps.clock.now() })
      results.push({ slug: game.slug, status, stats, error: incomplete })
      if (incomplete) deps.logger.warn({ game: game.slug, ...stats, reason: incomplete }, 'game synced in part; the rest keeps its previous data')
      else deps.logger.debug({ game: game.slug, ...stats }, 'game synced')
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error)
      const status = isBudgetUsedUp(error) ? 'partial' : 'failed'
      await repo.finishSyncRun(deps.db, runId, { status, error: message, now: deps.clock.now() })
      results.push({ slug: game.slug, status, error: message })
      deps.logger.error({ game: game.slug, err: error }, 'game sync failed; its previous data is kept')
    }
    await deps.source.checkpoint?.()
    options.onProgress?.({ game: game.slug, done: results.length, total: selected.length })
  }
  if (results.some((result) => result.stats)) await repo.refreshStatistics(deps.db)
  return {
    date,
    games: results,
    failed: results.filter((r) => r.status === 'failed').length,
    partial: results.filter((r) => r.status === 'partial').length,
    changes,
  }
}

const isBudgetUsedUp = (error: unknown) => error instanceof MarketplaceError && error.kind === 'budget'

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
  /** Why the game was synced only in part; undefined when every group was. */
  incomplete?: string
}

/** One group's answers in this sync; `products` undefined when unchanged since they were stored. */
interface FetchedGroup {
  set: SourceSet
  products: SourceProduct[] | undefined
  prices: SourcePrice[]
}

async function syncGame(tx: Executor, deps: Pick<SyncDeps, 'source' | 'logger'>, job: GameSync): Promise<GameOutcome> {
  const { source } = deps
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
      imageUrl: set.imageUrl ?? null,
      setIconUrl: set.setIconUrl ?? null,
    })),
  )

  // Group by group: one that fails keeps its previous data and the others go on (docs/adr/0015-one-transaction-per-game.md).
  const storedModifiedOn = await repo.findProductsModifiedOn(tx, gameId)
  const fetched: FetchedGroup[] = []
  const failures: string[] = []
  let budgetUsedUp: unknown
  for (const set of sourceSets) {
    try {
      const unchanged = set.modifiedOn !== undefined && storedModifiedOn.get(set.groupId) === set.modifiedOn
      const products = unchanged ? undefined : await source.listProducts(set.groupId)
      fetched.push({ set, products, prices: await source.listPrices(set.groupId, date) })
    } catch (error) {
      if (isBudgetUsedUp(error)) {
        budgetUsedUp = error
        break
      }
      failures.push(error instanceof Error ? error.message : String(error))
      deps.logger.warn({ game: game.slug, groupId: set.groupId, err: error }, 'marketplace group failed; its previous data is kept')
    }
  }
  // Nothing fetched: the game fails as a whole (or waits for the next day's budget).
  if (fetched.length === 0 && (budgetUsedUp || failures.length > 0)) {
    if (budgetUsedUp) throw budgetUsedUp
    throw new Error(failures.length === 1 ? failures[0] : `every group failed (${failures.length}); first: ${failures[0]}`)
  }

  // Keyed by product: a product listed in two groups of one answer (it is moving) is written once.
  const cardRows = new Map<number, repo.CardRow>()
  for (const group of fetched) {
    for (const product of group.products ?? []) cardRows.set(product.productId, toCardRow(product, { setId: setIds.get(group.set.groupId)!, gameId }, now))
  }
  const cardIds = await repo.upsertCards(tx, gameId, [...cardRows.values()])
  cardRows.clear()
  await repo.markProductsStored(
    tx,
    fetched.flatMap(({ set, products }) => (products && set.modifiedOn !== undefined ? [{ groupId: set.groupId, modifiedOn: set.modifiedOn }] : [])),
  )

  const current = await repo.findCurrentPrices(tx, gameId)
  const market = repo.marketStates(current)
  let historyRows = 0
  if (job.backfill) {
    const dates = backfillDates(date, job.backfill)
    const mode = (await repo.hasHistory(tx, gameId)) ? 'upsert' : 'append'
    historyRows += await repo.writeHistory(tx, { mode, withSales: true }, async (emit, flush) => {
      for (const { set } of fetched) {
        await backfillSet(source, { groupId: set.groupId, dates, salesUntil: addDays(date, -2), cardIds, market }, emit)
        await flush()
      }
    })
  }

  const todays = new Map<string, { cardId: number; price: SourcePrice }>()
  for (const group of fetched) {
    for (const price of group.prices) {
      const cardId = cardIds.get(price.productId)
      if (cardId !== undefined) todays.set(printingKey(cardId, price.printing), { cardId, price })
    }
    group.prices = []
  }
  const [day1, day7, day30] = [addDays(date, -1), addDays(date, -7), addDays(date, -30)]
  const past = await repo.findHistoryPoints(
    tx,
    [...todays.values()].map(({ cardId, price }) => ({ cardId, printing: price.printing })),
    [day1, day7, day30],
  )
  const prices: repo.PriceRow[] = []
  const changes: PriceChange[] = []
  for (const [key, { cardId, price }] of todays) {
    const state = nextMarketState(price, market.get(key), date)
    const points = past.get(key)
    const previousPrice = current.get(key)?.price ?? null
    if (state && previousPrice !== state.price) changes.push({ cardId, printing: price.printing, previousPrice, newPrice: state.price })
    prices.push({
      cardId,
      printing: price.printing,
      marketPrice: state?.price ?? null,
      marketPriceAsOf: state?.asOf ?? null,
      lowPrice: price.lowPrice,
      medianPrice: price.midPrice,
      lowestWithShipping: price.directLowPrice,
      buylistPrice: price.buylistPrice,
      priceChange24h: state ? percentChange(state.price, points?.get(day1)) : null,
      priceChange7d: state ? percentChange(state.price, points?.get(day7)) : null,
      priceChange30d: state ? percentChange(state.price, points?.get(day30)) : null,
      lastUpdatedAt: now,
    })
  }
  todays.clear()
  current.clear()
  past.clear()
  await repo.upsertPrices(tx, prices)
  // A day's point needs a market price: a printing that never had one gets none.
  historyRows += await repo.writeHistory(tx, { mode: 'upsert', withSales: false }, async (emit) => {
    for (const price of prices) if (price.marketPrice != null) emit(price.cardId, price.printing, date, price.marketPrice, price.lowPrice ?? null, null, null)
  })

  const sales: repo.SalesRow[] = []
  for (const salesDate of source.capabilities.sales ? salesDatesFor(game, date) : []) {
    for (const { set } of fetched) {
      for (const sale of await source.listSales(set.groupId, salesDate)) {
        const cardId = cardIds.get(sale.productId)
        if (cardId === undefined) continue
        sales.push({ cardId, printing: sale.printing, date: salesDate, ...pickSales(sale) })
      }
    }
  }
  await repo.recordSales(tx, sales)
  await repo.finishGameSync(tx, gameId, now)
  const skipped = Object.values(source.takeSkipped?.() ?? {}).reduce((sum, n) => sum + n, 0)
  const incomplete = [
    failures.length > 0 ? `${failures.length} of ${sourceSets.length} groups failed (first: ${failures[0]})` : '',
    budgetUsedUp ? `the day's marketplace request budget ran out after ${fetched.length + failures.length} of ${sourceSets.length} groups; the next run continues` : '',
  ]
    .filter(Boolean)
    .join('; ')
  return {
    stats: {
      sets: sourceSets.length,
      groups_failed: failures.length,
      groups_not_reached: sourceSets.length - fetched.length - failures.length,
      products_fetched: fetched.filter((group) => group.products).length,
      cards: cardIds.size,
      prices: prices.length,
      history_rows: historyRows,
      sales_rows: sales.length,
      price_changes: changes.length,
      rows_skipped: skipped,
    },
    changes,
    incomplete: incomplete || undefined,
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
      if (!points.state) continue
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
  low: (number | null)[]
  avg: (number | null)[]
  volume: (number | null)[]
}

export async function isCatalogEmpty(db: Database): Promise<boolean> {
  return (await repo.countGames(db)) === 0
}

/** Removes the catalog, prices and history (and the webhooks watching cards); accounts and keys stay. */
export async function wipeCatalog(db: Database): Promise<void> {
  await repo.truncateCatalog(db)
}

/** Each game's last successful sync (null when never synced), by slug. */
export const lastSyncedBySlug = (db: Executor) => repo.findLastSyncedBySlug(db)

/**
 * Per update tier, the instant by which every game of the tier was last synced (its least
 * recently synced game's `last_synced_at`); null when one was never synced or the tier has no games.
 */
export async function lastSyncPerTier(db: Executor): Promise<Record<`tier_${0 | 1 | 2 | 3}`, string | null>> {
  const tiers: Record<string, string | null> = { tier_3: null, tier_2: null, tier_1: null, tier_0: null }
  for (const row of await repo.findOldestSyncPerTier(db)) {
    const tier = `tier_${row.priority}`
    if (row.oldest !== null && tier in tiers) tiers[tier] = new Date(row.oldest).toISOString()
  }
  return tiers as Record<`tier_${0 | 1 | 2 | 3}`, string | null>
}

/**
 * Game syncs a process left `running` when it died mid-way, among those started before
 * `startedBefore`, are marked `interrupted` (see `interruptAbandonedSyncRuns`); returns how many.
 */
export const interruptAbandonedGameSyncs = (db: Executor, options: { startedBefore: Date; now: Date }) => repo.interruptAbandonedSyncRuns(db, options)
