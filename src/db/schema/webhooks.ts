import { sql } from 'drizzle-orm'
import { bigint, bigserial, boolean, doublePrecision, index, integer, pgTable, serial, text, uniqueIndex } from 'drizzle-orm/pg-core'
import { accounts } from './accounts'
import { cards } from './catalog'
import { createdAt, timestamptz } from './columns'

export const webhooks = pgTable(
  'webhooks',
  {
    id: serial('id').primaryKey(),
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    url: text('url').notNull(),
    cardId: integer('card_id')
      .notNull()
      .references(() => cards.id),
    /** above | below */
    condition: text('condition').notNull(),
    threshold: doublePrecision('threshold').notNull(),
    /**
     * The signing secret, encrypted with the server's key: signing needs the secret itself,
     * so it cannot be stored as a one-way hash like keys and sessions.
     */
    secretCiphertext: text('secret_ciphertext').notNull(),
    /**
     * Fires once per crossing: armed while the price is on the far side of the threshold (below
     * it for `above`), disarmed when the alert is written, re-armed when the price crosses back.
     */
    armed: boolean('armed').notNull().default(true),
    /** False once disabled after sustained delivery failure; `disabled_reason` says why. */
    isActive: boolean('is_active').notNull().default(true),
    /** Failed delivery attempts since the last success. */
    consecutiveFailures: integer('consecutive_failures').notNull().default(0),
    disabledAt: timestamptz('disabled_at'),
    disabledReason: text('disabled_reason'),
    /** When the last price alert was written to the outbox. */
    lastTriggeredAt: timestamptz('last_triggered_at'),
    createdAt: createdAt(),
  },
  (table) => [index('webhooks_account_idx').on(table.accountId, table.id), index('webhooks_card_active_idx').on(table.cardId).where(sql`${table.isActive}`)],
)

/**
 * The delivery outbox: written in the same transaction as the webhook's armed state, drained by
 * the delivery worker on the leader.
 */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    webhookId: integer('webhook_id')
      .notNull()
      .references(() => webhooks.id, { onDelete: 'cascade' }),
    /** The Standard Webhooks `webhook-id`; stable across retries so receivers can de-duplicate. */
    eventId: text('event_id').notNull(),
    /** The event type: `price_alert`. */
    event: text('event').notNull(),
    /** The exact request body, as text so every retry sends the same bytes (jsonb would reorder keys). */
    payload: text('payload').notNull(),
    /** pending | delivered | dead */
    status: text('status').notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    /**
     * When the entry is next due. A worker claims an entry by moving this past its attempt's
     * timeout, so an attempt whose worker died is retried once the claim lapses.
     */
    nextAttemptAt: timestamptz('next_attempt_at').notNull().defaultNow(),
    lastStatusCode: integer('last_status_code'),
    lastError: text('last_error'),
    deliveredAt: timestamptz('delivered_at'),
    createdAt: createdAt(),
  },
  (table) => [uniqueIndex('webhook_deliveries_event_idx').on(table.eventId), index('webhook_deliveries_due_idx').on(table.nextAttemptAt).where(sql`${table.status} = 'pending'`)],
)

/**
 * Every delivery attempt, the outbox's and the test pings': what the deliveries list shows.
 * Kept for a bounded time by the delivery worker.
 */
export const webhookAttempts = pgTable(
  'webhook_attempts',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    webhookId: integer('webhook_id')
      .notNull()
      .references(() => webhooks.id, { onDelete: 'cascade' }),
    /** The outbox entry; null for a test ping, which is sent once and never queued. */
    deliveryId: bigint('delivery_id', { mode: 'number' }).references(() => webhookDeliveries.id, { onDelete: 'cascade' }),
    eventId: text('event_id').notNull(),
    /** `price_alert` or `ping`. */
    event: text('event').notNull(),
    /** 1 for the first attempt of an event. */
    attempt: integer('attempt').notNull(),
    attemptedAt: timestamptz('attempted_at').notNull(),
    durationMs: integer('duration_ms').notNull(),
    /** The receiver's status code; null when no response came (refused target, timeout, connection error). */
    statusCode: integer('status_code'),
    /** delivered | failed */
    outcome: text('outcome').notNull(),
    error: text('error'),
    /** When the event is tried again; null when delivered, for a ping, or when retries are exhausted. */
    nextRetryAt: timestamptz('next_retry_at'),
  },
  (table) => [index('webhook_attempts_webhook_idx').on(table.webhookId, table.id)],
)
