import { findRecrawlCandidates } from './repo'
import { type ConditionDeps, conditionService } from './service'

/**
 * A card is re-crawled once its rows are this old: younger ones are fresh enough for a request
 * (Rule 1 refreshes at 24 hours), and leaving them alone spreads the marketplace's load.
 */
export const RECRAWL_AFTER_MS = 12 * 3_600_000

/**
 * Each priority tier makes a game's cards count this much older in the re-crawl's order: tier 3
 * cards come up to three days before tier 0 cards refreshed at the same time, and a tier 0 card
 * still gets its turn once it is that much older than the others (no starvation).
 */
export const PRIORITY_BONUS_MS = 24 * 3_600_000

/** Sources the re-crawl has said it skips: said once per source, not every minute. */
const toldWithoutListings = new WeakSet<ConditionDeps['source']>()

export interface RecrawlOptions {
  /** At most this many cards this run (the configured re-crawl rate per minute). */
  limit: number
  /** The span the run's marketplace requests are spread over (default one minute: the job runs each minute). */
  windowMs?: number
}

/**
 * The rolling re-crawl of the condition catalog (spec: Data refresh schedule; docs/adr/0063-the-schedule.md):
 * refreshes up to `limit` cards, oldest refresh first (never refreshed first), popular games
 * first, one at a time and spaced evenly over `windowMs`, so the marketplace sees a bounded rate
 * whatever the size of the catalog. It takes each card's single-flight lock, so it never races a
 * live refresh (a card being refreshed live is skipped), and costs no account's allowance. A run
 * that falls behind its window stops there rather than overlap the next one.
 */
export async function recrawlConditions(deps: ConditionDeps, options: RecrawlOptions): Promise<{ refreshed: number; failed: number }> {
  const result = { refreshed: 0, failed: 0 }
  if (options.limit <= 0) return result
  if (!deps.source.capabilities.listings) {
    if (!toldWithoutListings.has(deps.source)) {
      toldWithoutListings.add(deps.source)
      deps.logger.info({ source: deps.source.name }, 'condition re-crawl: the marketplace source has no live listings; it refreshes nothing')
    }
    return result
  }
  const windowMs = options.windowMs ?? 60_000
  const now = deps.clock.now()
  const staleBefore = new Date(now.getTime() - RECRAWL_AFTER_MS)
  const candidates = await findRecrawlCandidates(deps.db, { limit: options.limit, before: staleBefore, priorityBonusMs: PRIORITY_BONUS_MS })
  const service = conditionService(deps)
  const spacingMs = windowMs / options.limit
  const started = deps.clock.monotonic()
  for (const [index, card] of candidates.entries()) {
    const due = started + index * spacingMs
    const wait = due - deps.clock.monotonic()
    if (wait > 0) await deps.clock.sleep(wait)
    if (deps.clock.monotonic() - started >= windowMs) break
    try {
      const outcome = await service.refreshCard(card, { staleBefore })
      if (outcome !== 'busy' && outcome.kind === 'refreshed') result.refreshed++
      else if (outcome !== 'busy' && outcome.kind === 'failed') result.failed++
    } catch (error) {
      // A database failure: this card waits for the next run, the others are tried.
      deps.logger.warn({ err: error, cardId: card.id }, 'condition re-crawl could not store a refresh')
      result.failed++
    }
  }
  if (result.failed > 0) deps.logger.warn({ ...result, candidates: candidates.length }, 'condition re-crawl: some refreshes failed')
  return result
}
