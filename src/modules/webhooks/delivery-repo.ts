import { and, eq, inArray, lt, ne, sql } from 'drizzle-orm'
import { type Database, type Executor, selectRows } from '../../db/client'
import { webhookAttempts, webhookDeliveries, webhooks } from '../../db/schema'
import { type AttemptRecord, recordAttempt } from './attempts-repo'

const PRUNE_BATCH = 5_000

/** A claimed outbox entry with what its attempt needs. */
export interface Claimed {
  id: number
  webhook_id: number
  event_id: string
  event: string
  payload: string
  /** This attempt's number: the entry's `attempts` after the claim. */
  attempts: number
  url: string
  secret_ciphertext: string
  created_ms: number
}

/**
 * Claims up to `slots` entries due at `now` in one statement (`FOR UPDATE SKIP LOCKED`), moving each
 * one's `next_attempt_at` to `claimUntil`; entries in `exclude` (in flight here) are skipped.
 */
export function claimDueDeliveries(db: Database, claim: { now: Date; claimUntil: Date; slots: number; exclude: readonly number[] }): Promise<Claimed[]> {
  const { now, claimUntil, slots, exclude } = claim
  const mine =
    exclude.length > 0
      ? sql`and d.id not in (${sql.join(
          exclude.map((id) => sql`${id}`),
          sql`, `,
        )})`
      : sql``
  return selectRows<Claimed>(
    db,
    sql`with due as (
          select d.id from webhook_deliveries d join webhooks w on w.id = d.webhook_id
          where d.status = 'pending' and d.next_attempt_at <= ${now.toISOString()}::timestamptz and w.is_active ${mine}
          order by d.next_attempt_at, d.id
          limit ${slots}
          for update of d skip locked
        )
        update webhook_deliveries d
        set next_attempt_at = ${claimUntil.toISOString()}::timestamptz, attempts = d.attempts + 1
        from due, webhooks w
        where d.id = due.id and w.id = d.webhook_id
        returning d.id::float8 as id, d.webhook_id, d.event_id, d.event, d.payload, d.attempts, w.url, w.secret_ciphertext,
                  (extract(epoch from d.created_at) * 1000)::float8 as created_ms`,
  )
}

/** The outbox's depth: entries waiting for delivery, and those of them due at `now` (partial index `webhook_deliveries_due_idx`). */
export async function countQueuedDeliveries(db: Database, now: Date): Promise<{ pending: number; due: number }> {
  const [row] = await selectRows<{ pending: number; due: number }>(
    db,
    sql`select count(*)::float8 as pending, (count(*) filter (where next_attempt_at <= ${now.toISOString()}::timestamptz))::float8 as due
        from webhook_deliveries where status = 'pending'`,
  )
  return row ?? { pending: 0, due: 0 }
}

/** The entry's outcome applies only to this attempt: a claim that lapsed and was taken again is not overwritten. */
const thisAttempt = (entry: Claimed) => and(eq(webhookDeliveries.id, entry.id), eq(webhookDeliveries.attempts, entry.attempts), eq(webhookDeliveries.status, 'pending'))

export interface Failure {
  lastStatusCode: number | null
  lastError: string
}

/** A delivered attempt: the entry is done, the webhook's failure count resets, the attempt is recorded; one transaction. */
export async function recordDelivered(db: Database, entry: Claimed, now: Date, statusCode: number | null, attempt: AttemptRecord) {
  await db.transaction(async (tx) => {
    const updated = await tx
      .update(webhookDeliveries)
      .set({ status: 'delivered', deliveredAt: now, lastStatusCode: statusCode, lastError: null })
      .where(thisAttempt(entry))
      .returning({ id: webhookDeliveries.id })
    // Only when there is something to reset: deliveries to one webhook in parallel need not queue on its row.
    if (updated.length > 0) {
      await tx
        .update(webhooks)
        .set({ consecutiveFailures: 0 })
        .where(and(eq(webhooks.id, entry.webhook_id), ne(webhooks.consecutiveFailures, 0)))
    }
    await recordAttempt(tx, attempt)
  })
}

/** A failed attempt tried again at `attempt.nextRetryAt`; one transaction. */
export async function recordRetry(db: Database, entry: Claimed, failure: Failure, attempt: AttemptRecord & { nextRetryAt: Date }) {
  await db.transaction(async (tx) => {
    const updated = await tx
      .update(webhookDeliveries)
      .set({ ...failure, nextAttemptAt: attempt.nextRetryAt })
      .where(thisAttempt(entry))
      .returning({ id: webhookDeliveries.id })
    if (updated.length > 0) await countFailure(tx, entry.webhook_id)
    await recordAttempt(tx, attempt)
  })
}

/**
 * The last attempt failed: the entry is dead, and the webhook is disabled with `reason` and its other
 * pending entries dead too; one transaction. True when this call disabled the webhook.
 */
export async function recordDead(db: Database, entry: Claimed, failure: Failure, now: Date, reason: string, attempt: AttemptRecord): Promise<boolean> {
  return db.transaction(async (tx) => {
    let disabled = false
    const updated = await tx
      .update(webhookDeliveries)
      .set({ ...failure, status: 'dead' })
      .where(thisAttempt(entry))
      .returning({ id: webhookDeliveries.id })
    if (updated.length > 0) {
      await countFailure(tx, entry.webhook_id)
      const [row] = await tx
        .update(webhooks)
        .set({ isActive: false, disabledAt: now, disabledReason: reason })
        .where(and(eq(webhooks.id, entry.webhook_id), eq(webhooks.isActive, true)))
        .returning({ id: webhooks.id })
      await tx
        .update(webhookDeliveries)
        .set({ status: 'dead', lastError: 'not sent: the webhook was disabled after sustained delivery failure' })
        .where(and(eq(webhookDeliveries.webhookId, entry.webhook_id), eq(webhookDeliveries.status, 'pending')))
      disabled = row !== undefined
    }
    await recordAttempt(tx, attempt)
    return disabled
  })
}

async function countFailure(tx: Executor, webhookId: number) {
  await tx
    .update(webhooks)
    .set({ consecutiveFailures: sql`${webhooks.consecutiveFailures} + 1` })
    .where(eq(webhooks.id, webhookId))
}

/** Removes attempts, and delivered or dead outbox entries (their attempts with them), older than `before`; returns how many rows went. */
export async function pruneDeliveryHistory(db: Database, before: Date): Promise<number> {
  let removed = 0
  for (;;) {
    // In batches, so no statement holds many row locks for long.
    const attempts = await db
      .delete(webhookAttempts)
      .where(inArray(webhookAttempts.id, db.select({ id: webhookAttempts.id }).from(webhookAttempts).where(lt(webhookAttempts.attemptedAt, before)).limit(PRUNE_BATCH)))
      .returning({ id: webhookAttempts.id })
    const deliveries = await db
      .delete(webhookDeliveries)
      .where(
        inArray(
          webhookDeliveries.id,
          db
            .select({ id: webhookDeliveries.id })
            .from(webhookDeliveries)
            .where(and(ne(webhookDeliveries.status, 'pending'), lt(webhookDeliveries.createdAt, before)))
            .limit(PRUNE_BATCH),
        ),
      )
      .returning({ id: webhookDeliveries.id })
    removed += attempts.length + deliveries.length
    if (attempts.length < PRUNE_BATCH && deliveries.length < PRUNE_BATCH) return removed
  }
}
