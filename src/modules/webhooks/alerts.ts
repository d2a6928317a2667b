import { type Database, liftStatementTimeout } from '../../db/client'
import type { Clock } from '../../shared/clock'
import type { Logger } from '../../shared/logger'
import type { PriceChange } from '../ingest/service'
import { type AlertEvaluation, applyTransitions, lockDueTransitions, watchedAmong } from './alerts-repo'
import { newEventId } from './signing'

/** What a finished sync hands to alert evaluation. */
export interface PriceChangeBatch {
  /** The job that ran the sync (`sync-tier-3`, `manual-sync`, …) and its row in `job_runs`. */
  job: string
  runId: number
  changes: PriceChange[]
}

/**
 * The one place price alerts are evaluated after a sync, once the new prices are committed and
 * the snapshot rebuilt. A failure is logged by the caller and never fails the sync: the prices
 * are already written.
 */
export type AlertHook = (batch: PriceChangeBatch) => Promise<void>

/** The spec's price alert event (Events section), its keys in the spec's order. */
export interface PriceAlertPayload {
  event: 'price_alert'
  card_id: number
  card_name: string
  condition: string
  threshold: number
  current_price: number
  /** ISO 8601. */
  timestamp: string
}

/** The exact body every delivery attempt of the alert sends: JSON without spaces, numbers as JavaScript prints them. */
export function priceAlertBody(alert: Omit<PriceAlertPayload, 'event' | 'timestamp'>, at: Date): string {
  const payload: PriceAlertPayload = {
    event: 'price_alert',
    card_id: alert.card_id,
    card_name: alert.card_name,
    condition: alert.condition,
    threshold: alert.threshold,
    current_price: alert.current_price,
    timestamp: at.toISOString(),
  }
  return JSON.stringify(payload)
}

/**
 * Brings every active webhook's armed state in line with its card's current primary market price
 * (docs/adr/0059-when-an-alert-fires.md): an armed webhook whose price reached its threshold (`above`: at or above,
 * `below`: at or below) fires, writing the alert to the outbox and disarming in one transaction;
 * a disarmed one whose price is back on the far side re-arms. Because it compares the state with
 * the committed price, not with a sync's before and after, running it again changes nothing, and
 * a full run after a crash catches up what the crash skipped.
 *
 * `cardIds` restricts it to webhooks on those cards (a sync's changed cards); without it every
 * active webhook is evaluated. At most four statements, whatever the number of webhooks.
 */
export async function evaluateAlerts(db: Database, options: { now: Date; cardIds?: readonly number[] }): Promise<AlertEvaluation> {
  const { now, cardIds } = options
  if (cardIds?.length === 0) return { fired: 0, rearmed: 0 }
  return db.transaction(async (tx) => {
    const watched = cardIds && (await watchedAmong(tx, cardIds))
    if (watched?.length === 0) return { fired: 0, rearmed: 0 }
    // Lock waits count against a server's statement timeout, and a concurrent evaluation may hold the rows.
    await liftStatementTimeout(tx)
    const due = await lockDueTransitions(tx, watched)
    if (due.length === 0) return { fired: 0, rearmed: 0 }
    const transitions = due.map((row) => ({
      id: row.id,
      fire: row.armed,
      event_id: row.armed ? newEventId() : null,
      payload: row.armed
        ? priceAlertBody({ card_id: row.cardId, card_name: row.cardName, condition: row.condition, threshold: row.threshold, current_price: row.price! }, now)
        : null,
    }))
    return applyTransitions(tx, transitions, now)
  })
}

export interface AlertHookOptions {
  /** Called after alerts were written: wakes the delivery worker instead of waiting for its next poll. */
  onAlerts?: (fired: number) => void
}

type AlertDeps = { db: Database; clock: Clock; logger: Logger }

/**
 * The sync's alert hook: evaluates the webhooks on the cards whose prices the sync changed. An
 * error propagates to the sync job, which logs it and keeps the synced prices; the hook's next
 * call then evaluates every active webhook, so the crossings the failed call missed still fire
 * (the state is compared with the committed prices, not with the batch).
 */
export function webhookAlertHook(deps: AlertDeps, options: AlertHookOptions = {}): AlertHook {
  let catchUp = false
  return async ({ job, runId, changes }) => {
    const cardIds = catchUp ? undefined : [...new Set(changes.map((change) => change.cardId))]
    try {
      await evaluateAndWake(deps, options, cardIds, { job, runId, after: catchUp ? 'a failed evaluation: every webhook' : 'a sync' })
    } catch (error) {
      catchUp = true
      throw error
    }
    catchUp = false
  }
}

/**
 * Evaluates every active webhook: for a node that starts leading, so the crossings a process that
 * died between a sync's commit and its hook never evaluated fire now. Throws as the hook does.
 */
export function catchUpAlerts(deps: AlertDeps, options: AlertHookOptions = {}): Promise<AlertEvaluation> {
  return evaluateAndWake(deps, options, undefined, { after: 'taking the lead: every webhook' })
}

async function evaluateAndWake(deps: AlertDeps, options: AlertHookOptions, cardIds: number[] | undefined, context: Record<string, unknown>): Promise<AlertEvaluation> {
  const started = deps.clock.monotonic()
  const evaluation = await evaluateAlerts(deps.db, { now: deps.clock.now(), cardIds })
  const { fired, rearmed } = evaluation
  deps.logger.info({ ...context, cards: cardIds?.length, fired, rearmed, ms: Math.round(deps.clock.monotonic() - started) }, 'price alerts evaluated')
  if (fired > 0 && options.onAlerts) {
    try {
      options.onAlerts(fired)
    } catch (error) {
      // The alerts are committed: the worker's next poll sends them.
      deps.logger.warn({ err: error, fired }, 'waking the webhook delivery worker failed')
    }
  }
  return evaluation
}
