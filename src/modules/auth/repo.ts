import { and, asc, count, eq, gt, isNull, sql } from 'drizzle-orm'
import type { Database, Executor } from '../../db/client'
import { accounts, apiKeys, dailyUsage, sessions } from '../../db/schema'
import type { Tier } from './tiers'
import type { AccountRow, KeyIdentity } from './types'

const accountColumns = {
  id: accounts.id,
  email: accounts.email,
  tier: accounts.tier,
  subscriptionStatus: accounts.subscriptionStatus,
  createdAt: accounts.createdAt,
}

/** How many accounts exist. */
export async function countAccounts(db: Executor): Promise<number> {
  const [row] = await db.select({ n: count() }).from(accounts)
  return row?.n ?? 0
}

/** Locks the account's row until the transaction ends, so account-wide checks (the key limit) are not raced. */
export async function lockAccount(tx: Executor, accountId: number): Promise<void> {
  await tx.select({ id: accounts.id }).from(accounts).where(eq(accounts.id, accountId)).for('update')
}

/** The new account, or undefined when the email is taken. */
export async function insertAccount(db: Executor, email: string, passwordHash: string, tier: Tier): Promise<AccountRow | undefined> {
  const [row] = await db.insert(accounts).values({ email, passwordHash, tier }).onConflictDoNothing({ target: accounts.email }).returning(accountColumns)
  return row as AccountRow | undefined
}

export async function findAccountByEmail(db: Executor, email: string) {
  const [row] = await db
    .select({ ...accountColumns, passwordHash: accounts.passwordHash })
    .from(accounts)
    .where(eq(accounts.email, email))
  return row as (AccountRow & { passwordHash: string }) | undefined
}

export async function updateAccountTier(db: Executor, email: string, tier: Tier): Promise<AccountRow | undefined> {
  const [row] = await db.update(accounts).set({ tier }).where(eq(accounts.email, email)).returning(accountColumns)
  return row as AccountRow | undefined
}

export async function insertSession(db: Executor, accountId: number, tokenHash: string, expiresAt: Date) {
  await db.insert(sessions).values({ accountId, tokenHash, expiresAt })
}

/** The account behind a live session: not expired, not logged out. */
export async function findSessionAccount(db: Executor, tokenHash: string, now: Date) {
  const [row] = await db
    .select({ sessionId: sessions.id, account: accountColumns })
    .from(sessions)
    .innerJoin(accounts, eq(accounts.id, sessions.accountId))
    .where(and(eq(sessions.tokenHash, tokenHash), isNull(sessions.revokedAt), gt(sessions.expiresAt, now)))
  return row as { sessionId: number; account: AccountRow } | undefined
}

export async function revokeSession(db: Executor, sessionId: number, now: Date) {
  await db.update(sessions).set({ revokedAt: now }).where(eq(sessions.id, sessionId))
}

/** The active key with this hash and its account's tier; undefined when unknown or revoked. */
export async function findActiveKey(db: Executor, keyHash: string): Promise<KeyIdentity | undefined> {
  const [row] = await db
    .select({ keyId: apiKeys.id, accountId: apiKeys.accountId, tier: accounts.tier, subscriptionStatus: accounts.subscriptionStatus })
    .from(apiKeys)
    .innerJoin(accounts, eq(accounts.id, apiKeys.accountId))
    .where(and(eq(apiKeys.keyHash, keyHash), eq(apiKeys.isActive, true)))
  return row as KeyIdentity | undefined
}

export async function countActiveKeys(db: Executor, accountId: number): Promise<number> {
  const [row] = await db
    .select({ n: count() })
    .from(apiKeys)
    .where(and(eq(apiKeys.accountId, accountId), eq(apiKeys.isActive, true)))
  return row?.n ?? 0
}

export async function insertKey(db: Executor, values: { publicId: string; accountId: number; name: string; keyHash: string; keyPrefix: string }) {
  const [row] = await db.insert(apiKeys).values(values).returning({ id: apiKeys.id, createdAt: apiKeys.createdAt })
  return row!
}

export async function listKeys(db: Executor, accountId: number) {
  return db
    .select({
      id: apiKeys.id,
      publicId: apiKeys.publicId,
      keyPrefix: apiKeys.keyPrefix,
      name: apiKeys.name,
      isActive: apiKeys.isActive,
      totalRequests: apiKeys.totalRequests,
      lastUsedAt: apiKeys.lastUsedAt,
      createdAt: apiKeys.createdAt,
    })
    .from(apiKeys)
    .where(eq(apiKeys.accountId, accountId))
    .orderBy(asc(apiKeys.id))
}

/** Deactivates the account's key by its public id; returns its hash (to evict it everywhere), or undefined if not found. */
export async function deactivateKey(db: Executor, accountId: number, publicId: string, now: Date) {
  const [row] = await db
    .update(apiKeys)
    .set({ isActive: false, revokedAt: sql`coalesce(${apiKeys.revokedAt}, ${now.toISOString()}::timestamptz)` })
    .where(and(eq(apiKeys.publicId, publicId), eq(apiKeys.accountId, accountId)))
    .returning({ keyHash: apiKeys.keyHash })
  return row?.keyHash
}

export interface KeyUsageDelta {
  keyId: number
  requests: number
  lastUsedAt: Date
}

export interface AccountDayDelta {
  accountId: number
  day: string
  requests: number
  rejected: number
  /** Live refreshes of condition prices that happened. */
  liveRefreshes: number
}

/**
 * One statement per table for a whole batch of counters, in one transaction: adds requests to
 * each key's lifetime total and to each account's daily row (other nodes add theirs alongside).
 */
export async function addUsage(db: Database, keys: KeyUsageDelta[], days: AccountDayDelta[]) {
  await db.transaction(async (tx) => {
    if (keys.length > 0) {
      const rows = sql.join(
        keys.map((k) => sql`(${k.keyId}::int, ${k.requests}::bigint, ${k.lastUsedAt.toISOString()}::timestamptz)`),
        sql`, `,
      )
      await tx.execute(sql`
        update api_keys set
          total_requests = api_keys.total_requests + delta.requests,
          last_used_at = greatest(api_keys.last_used_at, delta.last_used_at)
        from (values ${rows}) as delta(id, requests, last_used_at)
        where api_keys.id = delta.id`)
    }
    if (days.length > 0) {
      const rows = sql.join(
        days.map((d) => sql`(${d.accountId}::int, ${d.day}::date, ${d.requests}::int, ${d.rejected}::int, ${d.liveRefreshes}::int)`),
        sql`, `,
      )
      await tx.execute(sql`
        insert into daily_usage (account_id, day, requests, rejected, live_refreshes)
        select account_id, day, requests, rejected, live_refreshes
        from (values ${rows}) as delta(account_id, day, requests, rejected, live_refreshes)
        where exists (select 1 from accounts where accounts.id = delta.account_id)
        on conflict (account_id, day) do update set
          requests = daily_usage.requests + excluded.requests,
          rejected = daily_usage.rejected + excluded.rejected,
          live_refreshes = daily_usage.live_refreshes + excluded.live_refreshes`)
    }
  })
}

/** What PostgreSQL holds of an account's day: the daily_usage row, or zeros before its first flush. */
export async function findDailyUsage(db: Executor, accountId: number, day: string) {
  const [row] = await db
    .select({ requests: dailyUsage.requests, rejected: dailyUsage.rejected, liveRefreshes: dailyUsage.liveRefreshes })
    .from(dailyUsage)
    .where(and(eq(dailyUsage.accountId, accountId), eq(dailyUsage.day, day)))
  return row ?? { requests: 0, rejected: 0, liveRefreshes: 0 }
}
