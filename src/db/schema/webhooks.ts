import { sql } from 'drizzle-orm'
import {
  bigserial,
  boolean,
  doublePrecision,
  index,
  integer,
  jsonb,
  pgTable,
  serial,
  text,
  uniqueIndex,
} from 'drizzle-orm/pg-core'
import { createdAt, timestamptz } from './columns'
import { accounts } from './accounts'
import { cards } from './catalog'

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
    /** Fires once per crossing; re-armed when the price crosses back. */
    armed: boolean('armed').notNull().default(true),
    lastPrice: doublePrecision('last_price'),
    isActive: boolean('is_active').notNull().default(true),
    consecutiveFailures: integer('consecutive_failures').notNull().default(0),
    disabledAt: timestamptz('disabled_at'),
    createdAt: createdAt(),
  },
  (table) => [
    index('webhooks_account_idx').on(table.accountId, table.id),
    index('webhooks_card_active_idx').on(table.cardId).where(sql`${table.isActive}`),
  ],
)

/** The delivery outbox: written in the sync transaction, drained by the delivery worker. */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    webhookId: integer('webhook_id')
      .notNull()
      .references(() => webhooks.id, { onDelete: 'cascade' }),
    /** The Standard Webhooks `webhook-id`; stable across retries so receivers can de-duplicate. */
    eventId: text('event_id').notNull(),
    payload: jsonb('payload').$type<Record<string, unknown>>().notNull(),
    /** pending | delivered | dead */
    status: text('status').notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: timestamptz('next_attempt_at').notNull().defaultNow(),
    lastStatusCode: integer('last_status_code'),
    lastError: text('last_error'),
    deliveredAt: timestamptz('delivered_at'),
    createdAt: createdAt(),
  },
  (table) => [
    uniqueIndex('webhook_deliveries_event_idx').on(table.eventId),
    index('webhook_deliveries_due_idx')
      .on(table.nextAttemptAt)
      .where(sql`${table.status} = 'pending'`),
  ],
)
