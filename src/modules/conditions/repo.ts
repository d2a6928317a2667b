import { asc, eq, inArray, sql } from 'drizzle-orm'
import type { Database, Executor } from '../../db/client'
import { preparedQuery } from '../../db/prepared'
import { cardPrices, cards, conditionPrices, conditionRefreshes, games } from '../../db/schema'
import type { ConditionAggregate } from './aggregate'

export interface RefreshRecord {
  refreshedAt: Date
  conditionCounts: Record<string, number>
}

/** What a condition read needs of a card: its marketplace id, its game kind (printing order) and printings. */
export interface ConditionCard {
  id: number
  name: string
  marketplaceId: number
  kind: string
  /** The card's printings (its card_prices rows), in byte order. */
  printings: string[]
  /** When its condition rows were last refreshed; undefined when never. */
  refresh: RefreshRecord | undefined
}

// The cached read is two prepared statements (the card with its refresh, then its rows): unprepared,
// each costs postgres.js two round trips and PostgreSQL a parse and a plan (see db/prepared.ts).
const conditionCard = preparedQuery((db) =>
  db
    .select({
      id: cards.id,
      name: cards.name,
      marketplaceId: cards.marketplaceId,
      kind: games.kind,
      printings: sql<string[]>`coalesce((
        select array_agg(${cardPrices.printing} order by ${cardPrices.printing} collate "C")
        from ${cardPrices} where ${cardPrices.cardId} = ${cards.id}
      ), '{}')`,
      refreshedAt: conditionRefreshes.refreshedAt,
      conditionCounts: conditionRefreshes.conditionCounts,
    })
    .from(cards)
    .innerJoin(games, eq(games.id, cards.gameId))
    .leftJoin(conditionRefreshes, eq(conditionRefreshes.cardId, cards.id))
    .where(eq(cards.id, sql.placeholder('cardId')))
    .prepare('condition_card'),
)

export async function findConditionCard(db: Database, cardId: number): Promise<ConditionCard | undefined> {
  const [row] = await conditionCard(db).execute({ cardId })
  if (!row) return undefined
  const { refreshedAt, conditionCounts, ...card } = row
  return { ...card, refresh: refreshedAt && conditionCounts ? { refreshedAt, conditionCounts } : undefined }
}

const refreshOfCard = preparedQuery((db) =>
  db
    .select({ refreshedAt: conditionRefreshes.refreshedAt, conditionCounts: conditionRefreshes.conditionCounts })
    .from(conditionRefreshes)
    .where(eq(conditionRefreshes.cardId, sql.placeholder('cardId')))
    .prepare('condition_refresh_of_card'),
)

/** When the card's condition rows were last refreshed; undefined when never. */
export async function findRefresh(db: Database, cardId: number): Promise<RefreshRecord | undefined> {
  const [row] = await refreshOfCard(db).execute({ cardId })
  return row
}

export type ConditionRecord = typeof conditionPrices.$inferSelect

const rowsOfCard = preparedQuery((db) =>
  db
    .select()
    .from(conditionPrices)
    .where(eq(conditionPrices.cardId, sql.placeholder('cardId')))
    .prepare('condition_rows_of_card'),
)

/** One card's cached rows (unordered: the service orders them by the card's printings). */
export async function findCardConditionRows(db: Database, cardId: number): Promise<ConditionRecord[]> {
  return rowsOfCard(db).execute({ cardId })
}

/** The cached rows of some cards (unordered). */
export async function findConditionRows(db: Executor, cardIds: number[]): Promise<ConditionRecord[]> {
  if (cardIds.length === 0) return []
  return db.select().from(conditionPrices).where(inArray(conditionPrices.cardId, cardIds))
}

/** Cards by id with their game kind, for bulk reads (order and names). */
export async function findCardsOfIds(db: Executor, cardIds: number[]) {
  return db
    .select({ id: cards.id, name: cards.name, marketplaceId: cards.marketplaceId, kind: games.kind })
    .from(cards)
    .innerJoin(games, eq(games.id, cards.gameId))
    .where(inArray(cards.id, cardIds))
}

/**
 * Replaces all of a card's condition rows and dates the refresh, in one transaction: readers see
 * the old rows or the new ones, never a mix. The refresh row is written first, so its row lock
 * makes concurrent writers of one card take turns. A refresh older than the stored one (a slow
 * writer overtaken by a newer refresh) changes nothing.
 */
export async function replaceConditionRows(
  db: Database,
  refresh: { cardId: number; at: Date; rows: ConditionAggregate[]; conditionCounts: Record<string, number> },
): Promise<boolean> {
  return db.transaction(async (tx) => {
    const written = await tx
      .insert(conditionRefreshes)
      .values({ cardId: refresh.cardId, refreshedAt: refresh.at, conditionCounts: refresh.conditionCounts })
      .onConflictDoUpdate({
        target: conditionRefreshes.cardId,
        set: { refreshedAt: refresh.at, conditionCounts: refresh.conditionCounts },
        setWhere: sql`${conditionRefreshes.refreshedAt} <= ${refresh.at.toISOString()}::timestamptz`,
      })
      .returning({ cardId: conditionRefreshes.cardId })
    if (written.length === 0) return false
    await tx.delete(conditionPrices).where(eq(conditionPrices.cardId, refresh.cardId))
    if (refresh.rows.length > 0) {
      await tx.insert(conditionPrices).values(
        refresh.rows.map((row) => ({
          cardId: refresh.cardId,
          printing: row.printing,
          condition: row.condition,
          language: row.language,
          lowPrice: row.lowPrice,
          lowestWithShipping: row.lowestWithShipping,
          medianWithShipping: row.medianWithShipping,
          sampleCount: row.sampleCount,
          lastUpdatedAt: refresh.at,
        })),
      )
    }
    return true
  })
}

export interface RecrawlCandidate {
  id: number
  marketplaceId: number
}

/**
 * The cards the re-crawl refreshes next: never refreshed, or refreshed before `before`; oldest
 * first, where a game's priority tier makes its cards count `priorityBonusMs` older per tier, so
 * popular games come first without starving the others (a tier 0 card refreshed long enough ago
 * still comes before a tier 3 card refreshed recently). Ties go by card id.
 */
export async function findRecrawlCandidates(db: Executor, options: { limit: number; before: Date; priorityBonusMs: number }): Promise<RecrawlCandidate[]> {
  const bonusSeconds = options.priorityBonusMs / 1000
  const refreshedSeconds = sql`coalesce(extract(epoch from ${conditionRefreshes.refreshedAt}), 0)`
  return db
    .select({ id: cards.id, marketplaceId: cards.marketplaceId })
    .from(cards)
    .innerJoin(games, eq(games.id, cards.gameId))
    .leftJoin(conditionRefreshes, eq(conditionRefreshes.cardId, cards.id))
    .where(sql`(${conditionRefreshes.refreshedAt} is null or ${conditionRefreshes.refreshedAt} < ${options.before.toISOString()}::timestamptz)`)
    .orderBy(sql`${refreshedSeconds} - ${games.priority} * ${bonusSeconds}::double precision`, asc(cards.id))
    .limit(options.limit)
}
