import { sql } from 'drizzle-orm'
import { bigint, boolean, date, index, integer, pgTable, primaryKey, serial, text, uniqueIndex } from 'drizzle-orm/pg-core'
import { createdAt, timestamptz } from './columns'

export const accounts = pgTable(
  'accounts',
  {
    id: serial('id').primaryKey(),
    /** Stored lowercased; unique. */
    email: text('email').notNull(),
    /** argon2id via Bun.password. */
    passwordHash: text('password_hash').notNull(),
    /** free | hobby | starter | pro | business */
    tier: text('tier').notNull().default('free'),
    subscriptionStatus: text('subscription_status').notNull().default('active'),
    createdAt: createdAt(),
  },
  (table) => [uniqueIndex('accounts_email_idx').on(table.email)],
)

export const sessions = pgTable(
  'sessions',
  {
    id: serial('id').primaryKey(),
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    /** SHA-256 (hex) of the cookie value; the raw token is never stored. */
    tokenHash: text('token_hash').notNull(),
    expiresAt: timestamptz('expires_at').notNull(),
    revokedAt: timestamptz('revoked_at'),
    createdAt: createdAt(),
  },
  (table) => [uniqueIndex('sessions_token_hash_idx').on(table.tokenHash), index('sessions_account_idx').on(table.accountId)],
)

export const apiKeys = pgTable(
  'api_keys',
  {
    id: serial('id').primaryKey(),
    /** The id clients see (`key_` and 32 hex digits): opaque, so it tells nothing of how many keys exist. */
    publicId: text('public_id').notNull(),
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    /** SHA-256 (hex) of the raw key; the raw key is shown once and never stored. */
    keyHash: text('key_hash').notNull(),
    /** The first characters of the key, for people to tell their keys apart. */
    keyPrefix: text('key_prefix').notNull(),
    isActive: boolean('is_active').notNull().default(true),
    totalRequests: bigint('total_requests', { mode: 'number' }).notNull().default(0),
    lastUsedAt: timestamptz('last_used_at'),
    revokedAt: timestamptz('revoked_at'),
    createdAt: createdAt(),
  },
  (table) => [
    uniqueIndex('api_keys_hash_idx').on(table.keyHash),
    uniqueIndex('api_keys_public_id_idx').on(table.publicId),
    index('api_keys_account_idx').on(table.accountId, table.id),
    index('api_keys_active_idx').on(table.accountId).where(sql`${table.isActive}`),
  ],
)

/** Per-account daily counters, flushed in batches from the quota store. */
export const dailyUsage = pgTable(
  'daily_usage',
  {
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    day: date('day', { mode: 'string' }).notNull(),
    requests: integer('requests').notNull().default(0),
    rejected: integer('rejected').notNull().default(0),
    liveRefreshes: integer('live_refreshes').notNull().default(0),
  },
  (table) => [primaryKey({ columns: [table.accountId, table.day] })],
)
