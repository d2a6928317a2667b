import type { Database } from '../../db/client'
import { invalidField, invalidQuery, notFound } from '../../shared/errors'
import { type Page, pageMeta } from '../../shared/model'
import { cleanName } from '../../shared/text'
import { toCardWithPrice } from '../catalog/service'
import { Q_MAX_LENGTH, Q_MIN_LENGTH, type SearchFilter, type SearchQuery } from './model'
import * as repo from './repo'

/** The query string as the repo needs it; what the schema cannot check (trimmed length, price order) is refused here. */
export function toSearchFilter(query: SearchQuery): SearchFilter {
  const q = query.q.trim()
  if (q.length < Q_MIN_LENGTH || q.length > Q_MAX_LENGTH) {
    throw invalidField('q', `must be ${Q_MIN_LENGTH} to ${Q_MAX_LENGTH} characters long (after trimming spaces)`)
  }
  const text = cleanName(q)
  if (text.length === 0) {
    throw invalidField('q', 'must contain a letter or a digit')
  }
  const { min_price: minPrice, max_price: maxPrice } = query
  if (minPrice !== undefined && maxPrice !== undefined && minPrice > maxPrice) {
    throw invalidQuery(`'min_price' (${minPrice}) must not exceed 'max_price' (${maxPrice})`, [
      { field: 'min_price', message: `must be at most max_price (${maxPrice})` },
      { field: 'max_price', message: `must be at least min_price (${minPrice})` },
    ])
  }
  return {
    text,
    game: query.game,
    type: query.type,
    setId: query.set_id,
    rarity: query.rarity,
    printing: query.printing,
    minPrice,
    maxPrice,
    sort: query.sort ?? 'relevance',
  }
}

/**
 * A page of cards whose names match `q`, as card-with-price rows. One statement; an empty page may
 * cost a second, which tells an unknown game or set (404) from a search without matches and, past
 * the last page, counts the matches.
 */
export async function searchCards(db: Database, query: SearchQuery, page: Page) {
  const filter = toSearchFilter(query)
  const found = await repo.findSearchPage(db, filter, page)
  let total = found.total
  if (total === undefined) {
    const counted = await repo.countSearch(db, filter, page)
    if (!counted.gameKnown) throw notFound(`Game '${filter.game}'`)
    if (!counted.setKnown) throw notFound(`Set ${filter.setId}`)
    total = counted.total
  }
  return { data: found.rows.map(toCardWithPrice), meta: pageMeta(page, total) }
}
