import { and, asc, eq, inArray, isNotNull, type SQL, sql } from 'drizzle-orm'
import { selectRows, type Transaction } from '../../db/client'
import { cards, games, webhooks } from '../../db/schema'
import { primaryPrice } from '../catalog/queries'

export interface AlertEvaluation {
  /** Alerts written to the outbox. */
  fired: number
  /** Webhooks armed again because the price went back to the far side of the threshold. */
  rearmed: number
}

/**
 * The cards among `cardIds` that active webhooks watch. A day's sync changes 160k cards of the
 * large catalog; handed a list that long, PostgreSQL cannot estimate how many distinct ids it
 * holds and drives the join from it (160k index probes, over a second); the few watched cards
 * are known at once from the webhooks' own index.
 */
export async function watchedAmong(tx: Transaction, cardIds: readonly number[]): Promise<number[]> {
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
export function lockDueTransitions(tx: Transaction, cardIds: readonly number[] | undefined) {
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

export interface Transition {
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
export async function applyTransitions(tx: Transaction, transitions: Transition[], now: Date): Promise<AlertEvaluation> {
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
