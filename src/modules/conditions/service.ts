import type Redis from 'ioredis'
import type { Database } from '../../db/client'
import { type Clock, withTimeout } from '../../shared/clock'
import { AppError, notFound } from '../../shared/errors'
import { parseIdList } from '../../shared/id-list'
import type { Logger } from '../../shared/logger'
import type { Metrics } from '../../shared/metrics'
import { type LiveRefreshClaim, nextUtcMidnight } from '../auth/quota'
import { printingOrder } from '../catalog/printings'
import type { MarketplaceSource } from '../ingest/source'
import { aggregateListings, type ConditionAggregate } from './aggregate'
import { type BulkConditionRow, type ConditionPriceRow, type ConditionPricesMeta, FRESH_FOR_MS, LISTING_CONDITIONS, MAX_BULK_CONDITION_IDS } from './model'
import { type RefreshLocks, refreshLocks } from './refresh-lock'
import * as repo from './repo'

export interface ConditionDeps {
  db: Database
  redis: Redis | undefined
  source: MarketplaceSource
  clock: Clock
  logger: Logger
  config: { marketplaceTimeoutMs: number }
  /** Where live refreshes are counted; absent: not counted. */
  metrics?: Metrics
}

/** Who pays for a live refresh: an account's daily allowance (the re-crawl pays nothing). */
export interface RefreshPayer {
  accountId: number
  /** The tier's live refreshes per day. */
  limit: number
  claim(claim: LiveRefreshClaim): Promise<{ admitted: boolean; used: number }>
  refund(accountId: number, now: Date): Promise<void>
  /** Counts a refresh that happened, for the stored daily usage. */
  recordRefresh(accountId: number, at: Date): void
}

export type RefreshOutcome =
  | { kind: 'refreshed'; at: Date; rows: ConditionAggregate[]; conditionCounts: Record<string, number> }
  /** Refreshed by someone else since it was found stale: nothing to do. */
  | { kind: 'fresh' }
  | { kind: 'over-allowance'; used: number }
  | { kind: 'failed'; error: unknown }

/** The write of a refresh may take this long beyond the marketplace's answer before another node may take the card. */
const LOCK_WRITE_MARGIN_MS = 5_000
/** Rounds of "someone else is refreshing it, read again" before a request settles for what it has. */
const MAX_REFRESH_ROUNDS = 3
/** What a client is told to wait after the marketplace failed. */
const UPSTREAM_RETRY_AFTER_SECONDS = 30

/** No answer within `marketplaceTimeoutMs` of the service's clock: a slow marketplace is a failed refresh. */
class MarketplaceTimeout extends Error {
  override name = 'MarketplaceTimeout'
}

const isFresh = (refreshedAt: Date, now: Date) => now.getTime() - refreshedAt.getTime() < FRESH_FOR_MS

/** API order: the card's printings in docs/adr/0011-primary-printing.md's order, conditions in the spec's, then language. */
function rowOrder(kind: string) {
  const byPrinting = printingOrder(kind)
  const conditionRank = (condition: string) => {
    const rank = LISTING_CONDITIONS.indexOf(condition as never)
    return rank === -1 ? LISTING_CONDITIONS.length : rank
  }
  return (a: repo.ConditionRecord, b: repo.ConditionRecord) =>
    byPrinting(a.printing, b.printing) || conditionRank(a.condition) - conditionRank(b.condition) || (a.language < b.language ? -1 : a.language > b.language ? 1 : 0)
}

function toRow(record: repo.ConditionRecord): ConditionPriceRow {
  return {
    card_id: record.cardId,
    printing: record.printing,
    condition: record.condition as ConditionPriceRow['condition'],
    language: record.language,
    low_price: record.lowPrice,
    lowest_with_shipping: record.lowestWithShipping,
    median_with_shipping: record.medianWithShipping,
    sample_count: record.sampleCount,
    last_updated_at: record.lastUpdatedAt.toISOString(),
  }
}

/** 400 naming `printing` and listing the card's, worded as card prices word it. */
function checkPrinting(card: repo.ConditionCard, printing: string | undefined) {
  if (printing === undefined || card.printings.includes(printing)) return
  const known = [...card.printings].sort(printingOrder(card.kind))
  throw new AppError('INVALID_PARAMETER', `Card ${card.id} has no printing '${printing}'; its printings: ${known.length > 0 ? known.join(', ') : 'none yet'}`, [
    { field: 'printing', message: `one of: ${known.join(', ')}` },
  ])
}

export interface ConditionService {
  /**
   * 404 CONDITION_PRICES_UNAVAILABLE when the source has no live listings, undefined when it has:
   * condition prices exist only from listings, and none is made up (docs/adr/0101-real-sources-declare-what-they-lack.md).
   */
  unavailable(): AppError | undefined
  /** `GET /v1/cards/:id/prices/conditions`: rules 1 to 4 of the spec. */
  cardConditions(request: { cardId: number; printing?: string; payer: RefreshPayer; now: Date }): Promise<{ data: ConditionPriceRow[]; meta: ConditionPricesMeta }>
  /** `GET /v1/bulk/conditions`: cached rows only, never a refresh. */
  bulkConditions(rawIds: string): Promise<{
    data: BulkConditionRow[]
    meta: { requested: number; found: number; not_found: number[]; not_cached: number[]; total: number }
  }>
  /**
   * Refreshes one card's rows from the marketplace unless they were refreshed at or after
   * `staleBefore`, as the card's only refresh (single flight, across nodes with Redis). Without
   * a payer it costs no allowance (the re-crawl).
   */
  refreshCard(card: { id: number; marketplaceId: number }, options: { staleBefore: Date; payer?: RefreshPayer }): Promise<RefreshOutcome | 'busy'>
}

export function conditionService(deps: ConditionDeps): ConditionService {
  const locks: RefreshLocks = refreshLocks({
    db: deps.db,
    redis: deps.redis,
    logger: deps.logger,
    clock: deps.clock,
    lockMs: deps.config.marketplaceTimeoutMs + LOCK_WRITE_MARGIN_MS,
  })

  /** The refresh itself, run under the card's lock. */
  async function refreshUnderLock(card: { id: number; marketplaceId: number }, staleBefore: Date, payer?: RefreshPayer): Promise<RefreshOutcome> {
    const current = await repo.findRefresh(deps.db, card.id)
    if (current && current.refreshedAt >= staleBefore) return { kind: 'fresh' }
    const claimedAt = deps.clock.now()
    if (payer) {
      const claim = await payer.claim({ accountId: payer.accountId, limit: payer.limit, now: claimedAt })
      if (!claim.admitted) return { kind: 'over-allowance', used: claim.used }
    }
    const refund = async () => {
      if (payer) await payer.refund(payer.accountId, claimedAt).catch((error) => deps.logger.warn({ err: error }, 'live refresh not refunded'))
    }
    let listings: Awaited<ReturnType<MarketplaceSource['listListings']>>
    try {
      const ms = deps.config.marketplaceTimeoutMs
      listings = await withTimeout(deps.clock, deps.source.listListings(card.marketplaceId), ms, () => new MarketplaceTimeout(`the marketplace did not answer within ${ms} ms`))
      if (!listings || !Array.isArray(listings.listings)) throw new Error('the marketplace answered listings in an unexpected shape')
    } catch (error) {
      await refund()
      deps.logger.warn({ err: error, cardId: card.id, marketplaceId: card.marketplaceId }, 'condition refresh failed: the marketplace did not answer')
      return { kind: 'failed', error }
    }
    const rows = aggregateListings(listings.listings)
    const conditionCounts: Record<string, number> = {}
    for (const [condition, count] of Object.entries(listings.conditionCounts ?? {})) {
      if (Number.isInteger(count) && count! >= 0) conditionCounts[condition] = count!
    }
    const at = deps.clock.now()
    try {
      await repo.replaceConditionRows(deps.db, { cardId: card.id, at, rows, conditionCounts })
    } catch (error) {
      await refund()
      throw error
    }
    payer?.recordRefresh(payer.accountId, at)
    return { kind: 'refreshed', at, rows, conditionCounts }
  }

  async function refreshCardOnce(card: { id: number; marketplaceId: number }, options: { staleBefore: Date; payer?: RefreshPayer }) {
    const flight = await locks.run(card.id, () => refreshUnderLock(card, options.staleBefore, options.payer))
    if ('busy' in flight) return 'busy' as const
    // A refresh this call joined was paid by its own payer: for this caller it is someone else's.
    if (!flight.ran && flight.value.kind === 'refreshed') return { kind: 'fresh' } as const
    if (!flight.ran && flight.value.kind === 'over-allowance') return 'busy' as const
    return flight.value
  }

  /** The refresh, counted by trigger and outcome. */
  async function refreshCard(card: { id: number; marketplaceId: number }, options: { staleBefore: Date; payer?: RefreshPayer }) {
    const outcome = await refreshCardOnce(card, options)
    deps.metrics?.conditionRefreshes
      .series(options.payer ? 'request' : 'recrawl', outcome === 'busy' ? 'busy' : outcome.kind === 'over-allowance' ? 'over_allowance' : outcome.kind)
      .inc()
    return outcome
  }

  async function rowsOf(card: repo.ConditionCard, printing: string | undefined): Promise<ConditionPriceRow[]> {
    const records = await repo.findCardConditionRows(deps.db, card.id)
    return records
      .filter((record) => printing === undefined || record.printing === printing)
      .sort(rowOrder(card.kind))
      .map(toRow)
  }

  /** Rule 2 and the marketplace's failure: the newest cached rows, marked stale; or the refusal when there are none. */
  async function staleOr(card: repo.ConditionCard, printing: string | undefined, reason: NonNullable<ConditionPricesMeta['stale_reason']>, payer: RefreshPayer, now: Date) {
    const refresh = await repo.findRefresh(deps.db, card.id)
    if (refresh) {
      return { data: await rowsOf(card, printing), meta: { cached: true, as_of: refresh.refreshedAt.toISOString(), stale: true, stale_reason: reason } }
    }
    if (reason === 'live_refresh_limit') {
      const reset = nextUtcMidnight(now)
      throw new AppError(
        'LIVE_FETCH_LIMIT',
        `Card ${card.id} has no cached condition prices, and this account's ${payer.limit} live refreshes for today are used up; ` +
          `they reset at midnight UTC (${reset.toISOString()})`,
        undefined,
        { 'retry-after': String(Math.max(1, Math.ceil((reset.getTime() - now.getTime()) / 1000))) },
      )
    }
    throw new AppError('UPSTREAM_UNAVAILABLE', `Card ${card.id} has no cached condition prices, and the marketplace is not answering; try again shortly`, undefined, {
      'retry-after': String(UPSTREAM_RETRY_AFTER_SECONDS),
    })
  }

  /** One card's condition rows by rules 1 to 4 of the spec; `cardConditions` adds their count. */
  async function uncountedConditions({ cardId, printing, payer, now }: Parameters<ConditionService['cardConditions']>[0]) {
    const card = await repo.findConditionCard(deps.db, cardId)
    if (!card) throw notFound(`Card ${cardId}`)
    checkPrinting(card, printing)
    const staleBefore = new Date(now.getTime() - FRESH_FOR_MS)
    for (let round = 0; round < MAX_REFRESH_ROUNDS; round++) {
      const refresh = round === 0 ? card.refresh : await repo.findRefresh(deps.db, card.id)
      if (refresh && isFresh(refresh.refreshedAt, now)) {
        return { data: await rowsOf(card, printing), meta: { cached: true, as_of: refresh.refreshedAt.toISOString(), stale: false } }
      }
      const outcome = await refreshCard(card, { staleBefore, payer })
      // Another request or node refreshed it (or is done trying): read again.
      if (outcome === 'busy' || outcome.kind === 'fresh') continue
      if (outcome.kind === 'over-allowance') return staleOr(card, printing, 'live_refresh_limit', payer, now)
      if (outcome.kind === 'failed') return staleOr(card, printing, 'upstream_unavailable', payer, now)
      const rows = outcome.rows
        .map((row): repo.ConditionRecord => ({ ...row, cardId: card.id, lastUpdatedAt: outcome.at }))
        .filter((record) => printing === undefined || record.printing === printing)
        .sort(rowOrder(card.kind))
        .map(toRow)
      return {
        data: rows,
        meta: { cached: false, as_of: outcome.at.toISOString(), stale: false, condition_counts: outcome.conditionCounts },
      }
    }
    // Refreshes elsewhere kept ending without fresh rows (their marketplace calls failing): settle for the cache.
    const refresh = await repo.findRefresh(deps.db, card.id)
    if (refresh && isFresh(refresh.refreshedAt, now)) {
      return { data: await rowsOf(card, printing), meta: { cached: true, as_of: refresh.refreshedAt.toISOString(), stale: false } }
    }
    return staleOr(card, printing, 'upstream_unavailable', payer, now)
  }

  return {
    unavailable() {
      if (deps.source.capabilities.listings) return undefined
      return new AppError(
        'CONDITION_PRICES_UNAVAILABLE',
        `Condition prices are not available: this service reads the ${deps.source.name} marketplace source, which has no live listings`,
      )
    },

    refreshCard,

    async cardConditions(request) {
      const { data, meta } = await uncountedConditions(request)
      return { data, meta: { ...meta, total: data.length } }
    },

    async bulkConditions(rawIds) {
      const ids = parseIdList(rawIds, MAX_BULK_CONDITION_IDS)
      const [cards, records] = await Promise.all([repo.findCardsOfIds(deps.db, ids), repo.findConditionRows(deps.db, ids)])
      const byId = new Map(cards.map((card) => [card.id, card]))
      const recordsByCard = new Map<number, repo.ConditionRecord[]>()
      for (const record of records) {
        const list = recordsByCard.get(record.cardId)
        if (list) list.push(record)
        else recordsByCard.set(record.cardId, [record])
      }
      const data: BulkConditionRow[] = []
      const notFound: number[] = []
      const notCached: number[] = []
      for (const id of ids) {
        const card = byId.get(id)
        if (!card) {
          notFound.push(id)
          continue
        }
        const own = recordsByCard.get(id)
        if (!own) {
          notCached.push(id)
          continue
        }
        for (const record of own.sort(rowOrder(card.kind))) data.push({ ...toRow(record), name: card.name, marketplace_id: card.marketplaceId })
      }
      return { data, meta: { requested: ids.length, found: byId.size, not_found: notFound, not_cached: notCached, total: data.length } }
    },
  }
}
