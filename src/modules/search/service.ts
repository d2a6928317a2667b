import { invalidField, invalidQuery, notFound } from '../../shared/errors'
import { type Page, pageMeta } from '../../shared/model'
import { cleanName } from '../../shared/text'
import type { PriceSnapshot } from '../snapshot/snapshot'
import { type AutocompleteQuery, MAX_AUTOCOMPLETE, Q_MAX_LENGTH, Q_MIN_LENGTH, type SearchFilter, type SearchQuery } from './model'

/** `q` as names are matched: cleaned like a stored clean name. What the schema cannot check (its trimmed length, a letter or digit) is refused here. */
function searchText(q: string): string {
  const trimmed = q.trim()
  if (trimmed.length < Q_MIN_LENGTH || trimmed.length > Q_MAX_LENGTH) {
    throw invalidField('q', `must be ${Q_MIN_LENGTH} to ${Q_MAX_LENGTH} characters long (after trimming spaces)`)
  }
  const text = cleanName(trimmed)
  if (text.length === 0) {
    throw invalidField('q', 'must contain a letter or a digit')
  }
  return text
}

/** The query string as the index needs it; what the schema cannot check (q's trimmed length, price order) is refused here. */
export function toSearchFilter(query: SearchQuery): SearchFilter {
  const text = searchText(query.q)
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

/** The game a `game` filter names (undefined: no filter); an unknown slug is a 404. */
function gameIdOf(snapshot: PriceSnapshot, slug: string | undefined): number | undefined {
  if (slug === undefined) return undefined
  const gameId = snapshot.gameId(slug)
  if (gameId === undefined) throw notFound(`Game '${slug}'`)
  return gameId
}

/**
 * A page of cards whose names match `q`, as card-with-price rows, answered from the snapshot's
 * search index (docs/adr/0112-search-in-memory.md): no database round trip. `snapshot` is one whose
 * index is built (the store's `searching`, docs/adr/0119-prices-first-then-the-search-index.md).
 */
export function searchCards(snapshot: PriceSnapshot, query: SearchQuery, page: Page) {
  const filter = toSearchFilter(query)
  const gameId = gameIdOf(snapshot, filter.game)
  if (filter.setId !== undefined && !snapshot.hasSet(filter.setId)) throw notFound(`Set ${filter.setId}`)
  const { game, ...indexed } = filter
  const { ids, total } = snapshot.search.search({ ...indexed, gameId, offset: (page.page - 1) * page.perPage, limit: page.perPage })
  return { data: ids.map((id) => snapshot.cardWithPrice(id)!), meta: pageMeta(page, total) }
}

/** Up to MAX_AUTOCOMPLETE distinct card names for what a user has typed so far, names starting with it first. */
export function autocompleteNames(snapshot: PriceSnapshot, query: AutocompleteQuery) {
  const text = searchText(query.q)
  const data = snapshot.search.autocomplete(text, gameIdOf(snapshot, query.game), MAX_AUTOCOMPLETE)
  return { data, meta: { total: data.length } }
}
