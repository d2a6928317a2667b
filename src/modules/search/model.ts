import { type Static, Type } from '@sinclair/typebox'
import { ListTotal, LiteralUnion, PaginationQuery, QueryInt, QueryNumber, QueryParams } from '../../shared/model'
import { PRODUCT_TYPES } from '../catalog/model'
import type { IndexQuery, IndexSort } from '../snapshot/search-index'

export const SEARCH_SORTS = ['relevance', 'price_asc', 'price_desc', 'name'] as const satisfies readonly IndexSort[]

/** `q` is trimmed before its length is checked, so the schema states the lower bound only. */
export const Q_MIN_LENGTH = 2
export const Q_MAX_LENGTH = 200
/** Prices a filter may name: anything above is certainly a typo. */
const MAX_PRICE = 10_000_000

const Price = (description: string) => QueryNumber({ minimum: 0, maximum: MAX_PRICE, description })

export const SearchQuery = QueryParams({
  q: Type.String({
    minLength: Q_MIN_LENGTH,
    description:
      `Card name or part of it, ${Q_MIN_LENGTH} to ${Q_MAX_LENGTH} characters after trimming. Case, accents and punctuation ` +
      'do not matter. Every word of q must start a word of the name ("pika" finds Pikachu); when no card matches that way, ' +
      'names similar to q are returned instead, so small misspellings ("charzard") still find the card.',
    examples: ['charizard'],
  }),
  game: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Game slug; an unknown slug is a 404' })),
  type: Type.Optional(LiteralUnion(PRODUCT_TYPES, { description: 'Cards or sealed products only' })),
  set_id: Type.Optional(QueryInt({ minimum: 1, maximum: 2147483647, description: 'Only this set; an unknown set is a 404' })),
  rarity: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Exact rarity, e.g. `Holo Rare`' })),
  printing: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Only cards that have a price for this printing (exact, e.g. `Holofoil`)' })),
  min_price: Type.Optional(Price('Lowest primary-printing market price, USD (cards without a market price are left out)')),
  max_price: Type.Optional(Price('Highest primary-printing market price, USD; at least min_price')),
  sort: Type.Optional(
    LiteralUnion(SEARCH_SORTS, {
      default: 'relevance',
      description:
        'relevance (default: the exact name, then names starting with q, then other word matches, each by similarity; ' +
        'fuzzy matches by similarity), price_asc or price_desc (primary market price, cards without one last), or name',
    }),
  ),
  ...PaginationQuery.properties,
})
export type SearchQuery = Static<typeof SearchQuery>

/** What a search asks of the index, with the game still a slug (the index takes its id) and no page yet. */
export type SearchFilter = Omit<IndexQuery, 'gameId' | 'offset' | 'limit'> & { game?: string }

/** Names an autocomplete answer holds at most: enough for a type-ahead box's list. */
export const MAX_AUTOCOMPLETE = 20

export const AutocompleteQuery = QueryParams({
  q: Type.String({
    minLength: Q_MIN_LENGTH,
    description:
      `The start of a card name as typed, ${Q_MIN_LENGTH} to ${Q_MAX_LENGTH} characters after trimming. Case, accents and ` +
      'punctuation do not matter; every word of q must start a word of the name.',
    examples: ['chari'],
  }),
  game: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Game slug: names of that game only; an unknown slug is a 404' })),
})
export type AutocompleteQuery = Static<typeof AutocompleteQuery>

export const AutocompleteMeta = Type.Object({ total: ListTotal(`Names in \`data\` (at most ${MAX_AUTOCOMPLETE}; no paging)`) })
