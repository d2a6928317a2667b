import { asc, count, desc, eq, getTableColumns, sql } from 'drizzle-orm'
import type { Executor } from '../../db/client'
import { games, sets } from '../../db/schema'
import type { Page } from '../../shared/model'

export type GameRecord = typeof games.$inferSelect
export type SetRecord = typeof sets.$inferSelect

// List queries are one statement each: the page and, through a window count, its total. Only a
// page past the end (no rows, so no total) costs a second, cheap count.

const totalOver = sql<number>`(count(*) over ())::int`
const offsetOf = (page: Page) => (page.page - 1) * page.perPage

/** Major (higher-priority) games first, then by name; the id breaks ties so pages never overlap. */
export async function findGamesPage(db: Executor, page: Page): Promise<{ rows: GameRecord[]; total: number }> {
  const rows = await db
    .select({ ...getTableColumns(games), total: totalOver })
    .from(games)
    .orderBy(desc(games.priority), asc(games.name), asc(games.id))
    .limit(page.perPage)
    .offset(offsetOf(page))
  if (rows.length > 0) return { rows, total: rows[0]!.total }
  const [row] = await db.select({ n: count() }).from(games)
  return { rows: [], total: row?.n ?? 0 }
}

export async function findGameBySlug(db: Executor, slug: string): Promise<GameRecord | undefined> {
  const [row] = await db.select().from(games).where(eq(games.slug, slug)).limit(1)
  return row
}

/**
 * A page of the game's sets, newest release first (id breaks ties), with the game's set_count as
 * the total (the sync keeps it in the same transaction as the sets). `undefined` when no game has
 * the slug.
 */
export async function findSetsPageByGameSlug(
  db: Executor,
  slug: string,
  page: Page,
): Promise<{ rows: SetRecord[]; total: number } | undefined> {
  const rows = await db
    .select({ ...getTableColumns(sets), total: games.setCount })
    .from(sets)
    .innerJoin(games, eq(games.id, sets.gameId))
    .where(eq(games.slug, slug))
    .orderBy(desc(sets.releaseDate), asc(sets.id))
    .limit(page.perPage)
    .offset(offsetOf(page))
  if (rows.length > 0) return { rows, total: rows[0]!.total }
  const game = await findGameBySlug(db, slug)
  return game && { rows: [], total: game.setCount }
}
