import { and, asc, count, desc, eq, sql } from 'drizzle-orm'
import type { Executor } from '../../db/client'
import { accounts, cards, games, webhookAttempts, webhooks } from '../../db/schema'
import type { Page } from '../../shared/model'
import { primaryPrice } from '../catalog/queries'
import type { Condition } from './model'

/** Locks the account row for the rest of the transaction: creates of one account take turns at the limit check. */
export async function lockAccount(tx: Executor, accountId: number) {
  await tx.select({ id: accounts.id }).from(accounts).where(eq(accounts.id, accountId)).for('update')
}

export async function countWebhooks(db: Executor, accountId: number): Promise<number> {
  const [row] = await db.select({ n: count() }).from(webhooks).where(eq(webhooks.accountId, accountId))
  return row?.n ?? 0
}

/** The card and its primary printing's market price (null without a price); undefined when there is no such card. */
export async function findCardPrice(db: Executor, cardId: number) {
  const primary = primaryPrice(db)
  const [row] = await db
    .select({ id: cards.id, name: cards.name, marketPrice: primary.marketPrice })
    .from(cards)
    .innerJoin(games, eq(games.id, cards.gameId))
    .leftJoinLateral(primary, sql`true`)
    .where(eq(cards.id, cardId))
  return row
}

export interface NewWebhook {
  accountId: number
  url: string
  cardId: number
  condition: Condition
  threshold: number
  secretCiphertext: string
  armed: boolean
}

export async function insertWebhook(db: Executor, values: NewWebhook) {
  const [row] = await db.insert(webhooks).values(values).returning({ id: webhooks.id, isActive: webhooks.isActive, createdAt: webhooks.createdAt })
  return row!
}

/** The account's webhooks, oldest first, each with its card's name and latest attempt, in one statement. */
export async function listWebhooks(db: Executor, accountId: number) {
  const latest = db
    .select({ outcome: webhookAttempts.outcome, statusCode: webhookAttempts.statusCode, attemptedAt: webhookAttempts.attemptedAt })
    .from(webhookAttempts)
    .where(eq(webhookAttempts.webhookId, webhooks.id))
    .orderBy(desc(webhookAttempts.id))
    .limit(1)
    .as('latest_attempt')
  return db
    .select({
      id: webhooks.id,
      url: webhooks.url,
      cardId: webhooks.cardId,
      cardName: cards.name,
      condition: webhooks.condition,
      threshold: webhooks.threshold,
      isActive: webhooks.isActive,
      createdAt: webhooks.createdAt,
      lastTriggeredAt: webhooks.lastTriggeredAt,
      disabledAt: webhooks.disabledAt,
      disabledReason: webhooks.disabledReason,
      lastOutcome: latest.outcome,
      lastStatusCode: latest.statusCode,
      lastAttemptedAt: latest.attemptedAt,
    })
    .from(webhooks)
    .innerJoin(cards, eq(cards.id, webhooks.cardId))
    .leftJoinLateral(latest, sql`true`)
    .where(eq(webhooks.accountId, accountId))
    .orderBy(asc(webhooks.id))
}

/** The account's webhook with its attempt count; undefined when it has no such webhook (another account's included). */
export async function findOwnedWebhook(db: Executor, accountId: number, webhookId: number) {
  const [row] = await db
    .select({
      id: webhooks.id,
      url: webhooks.url,
      secretCiphertext: webhooks.secretCiphertext,
      // Qualified by hand: drizzle writes a column of the only table in a query without its table.
      attempts: sql<number>`(select count(*) from webhook_attempts a where a.webhook_id = webhooks.id)::int`,
    })
    .from(webhooks)
    .where(and(eq(webhooks.id, webhookId), eq(webhooks.accountId, accountId)))
  return row
}

/** Deletes the account's webhook (its outbox entries and attempts go with it); false when it has no such webhook. */
export async function deleteWebhook(db: Executor, accountId: number, webhookId: number): Promise<boolean> {
  const deleted = await db
    .delete(webhooks)
    .where(and(eq(webhooks.id, webhookId), eq(webhooks.accountId, accountId)))
    .returning({ id: webhooks.id })
  return deleted.length > 0
}

export async function webhookExists(db: Executor, webhookId: number): Promise<boolean> {
  const [row] = await db.select({ id: webhooks.id }).from(webhooks).where(eq(webhooks.id, webhookId))
  return row !== undefined
}

/** A page of the webhook's attempts, newest first (the id breaks ties, so pages never overlap). */
export async function findAttemptsPage(db: Executor, webhookId: number, page: Page) {
  return db
    .select({
      eventId: webhookAttempts.eventId,
      event: webhookAttempts.event,
      attempt: webhookAttempts.attempt,
      attemptedAt: webhookAttempts.attemptedAt,
      outcome: webhookAttempts.outcome,
      statusCode: webhookAttempts.statusCode,
      durationMs: webhookAttempts.durationMs,
      error: webhookAttempts.error,
      nextRetryAt: webhookAttempts.nextRetryAt,
    })
    .from(webhookAttempts)
    .where(eq(webhookAttempts.webhookId, webhookId))
    .orderBy(desc(webhookAttempts.id))
    .limit(page.perPage)
    .offset((page.page - 1) * page.perPage)
}
