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
  const { rows, total } = await repo.findGamesPage(db, page)
  return { data: rows.map(toGame), meta: pageMeta(page, total) }
}

export async function getGame(db: Database, slug: string) {
  const game = await repo.findGameBySlug(db, slug)
  if (!game) throw notFound(`Game '${slug}'`)
  return { data: toGame(game) }
}

export async function listGameSets(db: Database, slug: string, page: Page) {
  const found = await repo.findSetsPageByGameSlug(db, slug, page)
  if (!found) throw notFound(`Game '${slug}'`)
  return { data: found.rows.map(toSetSummary), meta: pageMeta(page, found.total) }
}
