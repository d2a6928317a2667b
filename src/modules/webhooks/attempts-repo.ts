import type { Executor } from '../../db/client'
import { webhookAttempts } from '../../db/schema'
import type { SendResult } from './send'

export interface AttemptRecord {
  webhookId: number
  /** The outbox entry; absent for a test ping. */
  deliveryId?: number
  eventId: string
  event: 'price_alert' | 'ping'
  attempt: number
  at: Date
  result: SendResult
  /** When the event is tried again, if it is. */
  nextRetryAt?: Date
}

/** Writes one attempt for the deliveries list. */
export async function recordAttempt(db: Executor, record: AttemptRecord): Promise<void> {
  await db.insert(webhookAttempts).values({
    webhookId: record.webhookId,
    deliveryId: record.deliveryId ?? null,
    eventId: record.eventId,
    event: record.event,
    attempt: record.attempt,
    attemptedAt: record.at,
    durationMs: record.result.durationMs,
    statusCode: record.result.statusCode,
    outcome: record.result.delivered ? 'delivered' : 'failed',
    error: record.result.error ?? null,
    nextRetryAt: record.nextRetryAt ?? null,
  })
}
