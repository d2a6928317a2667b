import { and, asc, eq, inArray, isNotNull, type SQL, sql } from 'drizzle-orm'
import { type Database, liftStatementTimeout, selectRows, type Transaction } from '../../db/client'
import { cards, games, webhooks } from '../../db/schema'
import type { AlertHook } from '../../jobs/alerts'
import type { Clock } from '../../shared/clock'
import type { Logger } from '../../shared/logger'
import { primaryPrice } from '../catalog/repo'
import { newEventId } from './signing'

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

export interface AlertEvaluation {
  /** Alerts written to the outbox. */
  fired: number
  /** Webhooks armed again because the price went back to the far side of the threshold. */
  rearmed: number
}

/**
 * Brings every active webhook's armed state in line with its card's current primary market price
 * (docs/decisions.md "When an alert fires"): an armed webhook whose price reached its threshold (`above`: at or above,
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

/**
 * The cards among `cardIds` that active webhooks watch. A day's sync changes 160k cards of the
 * large catalog; handed a list that long, PostgreSQL cannot estimate how many distinct ids it
 * holds and drives the join from it (160k index probes, over a second); the few watched cards
 * are known at once from the webhooks' own index.
 */
async function watchedAmong(tx: Transaction, cardIds: readonly number[]): Promise<number[]> {
  const changed = new Set(cardIds)
  const watched = await tx.selectDistinct({ cardId: webhooks.cardId }).from(webhooks).where(sql`${webhooks.isActive}`)
  return watched.map((row) => row.cardId).filter((cardId) => changed.has(cardId))
}

/**
 * The active webhooks whose state disagrees with their card's primary market price, locked in id
 * order (so two evaluations never deadlock). A concurrent evaluation holding a row makes this
 * wait; PostgreSQL then re-checks the row as that one committed it, so a crossing the other
 * already fired is no longer due here.
 */
function lockDueTransitions(tx: Transaction, cardIds: readonly number[] | undefined) {
  const primary = primaryPrice(tx)
  const reached = sql<boolean>`case ${webhooks.condition} when 'above' then ${primary.marketPrice} >= ${webhooks.threshold}
    else ${primary.marketPrice} <= ${webhooks.threshold} end`
  const conditions: SQL[] = [
    sql`${webhooks.isActive}`,
    inArray(webhooks.condition, ['above', 'below']),
    isNotNull(primary.marketPrice),
    // Armed and reached: fire. Disarmed and not reached (back on the far side): re-arm.
    sql`${webhooks.armed} = ${reached}`,
  ]
  // One array parameter: there may be more cards than the 65,535 parameters a statement takes.
  if (cardIds) conditions.push(sql`${webhooks.cardId} in (select unnest(${`{${cardIds.join(',')}}`}::int[]))`)
  return tx
    .select({
      id: webhooks.id,
      cardId: webhooks.cardId,
      cardName: cards.name,
      condition: webhooks.condition,
      threshold: webhooks.threshold,
      armed: webhooks.armed,
      price: primary.marketPrice,
    })
    .from(webhooks)
    .innerJoin(cards, eq(cards.id, webhooks.cardId))
    .innerJoin(games, eq(games.id, cards.gameId))
    .innerJoinLateral(primary, sql`true`)
    .where(and(...conditions))
    .orderBy(asc(webhooks.id))
    .for('update', { of: webhooks })
}

interface Transition {
  id: number
  /** True: the webhook fires (it was armed); false: it re-arms. */
  fire: boolean
  event_id: string | null
  payload: string | null
}

/**
 * Flips the webhooks' armed state and writes the fired alerts to the outbox, in one statement
 * with the transitions as one JSON parameter. The update re-checks `armed`, and only a row it
 * changed gets an outbox entry, so even without the lock no crossing could be written twice.
 */
async function applyTransitions(tx: Transaction, transitions: Transition[], now: Date): Promise<AlertEvaluation> {
  const at = now.toISOString()
  const [counts] = await selectRows<AlertEvaluation>(
    tx,
    sql`with transition as (
          select * from json_to_recordset(${JSON.stringify(transitions)}::json)
            as t(id int, fire boolean, event_id text, payload text)
        ), changed as (
          update webhooks w
          set armed = not t.fire,
              last_triggered_at = case when t.fire then ${at}::timestamptz else w.last_triggered_at end
          from transition t
          where w.id = t.id and w.armed = t.fire
          returning t.id, t.fire, t.event_id, t.payload
        ), queued as (
          insert into webhook_deliveries (webhook_id, event_id, event, payload, status, next_attempt_at)
          select id, event_id, 'price_alert', payload, 'pending', ${at}::timestamptz from changed where fire
          returning 1
        )
        select (select count(*)::int from queued) as fired, (select count(*)::int from changed where not fire) as rearmed`,
  )
  return counts!
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

async function evaluateAndWake(
  deps: AlertDeps,
  options: AlertHookOptions,
  cardIds: number[] | undefined,
  context: Record<string, unknown>,
): Promise<AlertEvaluation> {
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
