import type { Database } from '../../db/client'
import { notFound } from '../../shared/errors'
import { type Page, pageMeta } from '../../shared/model'
import type { Game, SetSummary } from './model'
import * as repo from './repo'

const iso = (instant: Date | null) => instant?.toISOString() ?? null

function toGame(row: repo.GameRecord): Game {
  return {
    id: row.id,
    name: row.name,
    slug: row.slug,
    priority: row.priority,
    set_count: row.setCount,
    card_count: row.cardCount,
    last_synced_at: iso(row.lastSyncedAt),
  }
}

function toSetSummary(row: repo.SetRecord): SetSummary {
  return {
    id: row.id,
    name: row.name,
    slug: row.slug,
    abbreviation: row.abbreviation,
    release_date: row.releaseDate,
    card_count: row.cardCount,
    last_synced_at: iso(row.lastSyncedAt),
  }
}

export async function listGames(db: Database, page: Page) {
  const [total, rows] = await Promise.all([repo.countGames(db), repo.findGamesPage(db, page)])
  return { data: rows.map(toGame), meta: pageMeta(page, total) }
}

async function requireGame(db: Database, slug: string): Promise<repo.GameRecord> {
  const game = await repo.findGameBySlug(db, slug)
  if (!game) throw notFound(`Game '${slug}'`)
  return game
}

export async function getGame(db: Database, slug: string) {
  return { data: toGame(await requireGame(db, slug)) }
}

/** The game's set_count (kept by the sync in the same transaction as its sets) is the list total. */
export async function listGameSets(db: Database, slug: string, page: Page) {
  const game = await requireGame(db, slug)
  const rows = await repo.findSetsPageByGame(db, game.id, page)
  return { data: rows.map(toSetSummary), meta: pageMeta(page, game.setCount) }
}
