import { asc, count, desc, eq } from 'drizzle-orm'
import type { Executor } from '../../db/client'
import { games, sets } from '../../db/schema'
import type { Page } from '../../shared/model'

export type GameRecord = typeof games.$inferSelect
export type SetRecord = typeof sets.$inferSelect

export async function countGames(db: Executor): Promise<number> {
  const [row] = await db.select({ n: count() }).from(games)
  return row?.n ?? 0
}

/** Major (higher-priority) games first, then by name; the id breaks ties so pages never overlap. */
export function findGamesPage(db: Executor, page: Page): Promise<GameRecord[]> {
  return db
    .select()
    .from(games)
    .orderBy(desc(games.priority), asc(games.name), asc(games.id))
    .limit(page.perPage)
    .offset((page.page - 1) * page.perPage)
}

export async function findGameBySlug(db: Executor, slug: string): Promise<GameRecord | undefined> {
  const [row] = await db.select().from(games).where(eq(games.slug, slug)).limit(1)
  return row
}

/** Newest release first; the id breaks ties. */
export function findSetsPageByGame(db: Executor, gameId: number, page: Page): Promise<SetRecord[]> {
  return db
    .select()
    .from(sets)
    .where(eq(sets.gameId, gameId))
    .orderBy(desc(sets.releaseDate), asc(sets.id))
    .limit(page.perPage)
    .offset((page.page - 1) * page.perPage)
}
