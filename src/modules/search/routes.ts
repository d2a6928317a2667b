import { type Static, Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import type { HotRoutes } from '../../shared/hot-routes'
import { PageMeta, toPage } from '../../shared/model'
import { models } from '../../shared/models-plugin'
import { authGuard, KEY_GUARD_ERRORS, withRateLimit } from '../auth/guard'
import type { AuthRuntime } from '../auth/runtime'
import { CardWithPrice } from '../catalog/model'
import { keptSnapshotRoute, NOT_MODIFIED } from '../prices/respond'
import type { SnapshotStore } from '../snapshot/store'
import { AutocompleteMeta, AutocompleteQuery, MAX_AUTOCOMPLETE, Q_MAX_LENGTH, Q_MIN_LENGTH, SearchQuery } from './model'
import { autocompleteNames, searchCards } from './service'

/**
 * Card search and name autocomplete, answered from the snapshot's search index
 * (docs/adr/0042-matching-by-words-then-by-corrected-words.md, docs/adr/0112-search-in-memory.md),
 * as kept snapshot answers: the same query string asks for the same answer until the next sync, so
 * a repeat is copied bytes, answered before Elysia like card prices.
 */
export function searchRoutes(auth: AuthRuntime, snapshots: SnapshotStore, hot: HotRoutes) {
  // The newest snapshot whose index is built (docs/adr/0119-prices-first-then-the-search-index.md).
  const searching = snapshots.searching
  const search = keptSnapshotRoute<Record<string, never>, Static<typeof SearchQuery>>(auth, searching, {
    path: '/v1/search',
    rule: { needs: 'catalog' },
    body: ({ query, snapshot }) => searchCards(snapshot, query, toPage(query)),
    hook: {
      query: SearchQuery,
      response: {
        200: withRateLimit(Type.Object({ data: Type.Array(Type.Ref('CardWithPrice')), meta: PageMeta })),
        ...NOT_MODIFIED,
        400: 'Error',
        404: 'Error',
        ...KEY_GUARD_ERRORS,
      },
      detail: {
        tags: ['Search'],
        summary: 'Search cards and sealed products by name',
        description:
          `\`q\` (${Q_MIN_LENGTH} to ${Q_MAX_LENGTH} characters once trimmed) is compared with names regardless of case, accents ` +
          'and punctuation. A card matches when every word of q starts a word of its name ("pika" finds Pikachu, "trainer zoe" ' +
          'finds Pokémon Trainer Zoë); when no card matches that way (under the same filters), each word of q may instead be a ' +
          'close misspelling of a word of the name (a word of some card name spelt much alike), so "charzard" still ' +
          "finds Charizard. Rows are card-with-price rows: the card and its primary printing's price (Normal when it has one). " +
          'Filters: `game` (slug), `type`, `set_id`, ' +
          '`rarity` and `printing` (exact; the card has a price for that printing), `min_price`/`max_price` (inclusive, on the ' +
          'primary market price; cards without one are left out). Relevance order: the exact name, then names starting with q, ' +
          'then other word matches, then misspelt matches by word similarity to q; within each, shorter names first. Every ' +
          'order ends with the id, so pages ' +
          'never repeat or skip a card. An unknown game slug or set id is a 404; min_price above max_price is a 400. ' +
          'Answered from the price snapshot, which every sync renews: send the `ETag` back as `If-None-Match` to get 304 until it changes.',
      },
    },
  })
  // Type-ahead names (docs/adr/0114-name-autocomplete.md).
  const autocomplete = keptSnapshotRoute<Record<string, never>, Static<typeof AutocompleteQuery>>(auth, searching, {
    path: '/v1/cards/autocomplete',
    rule: { needs: 'catalog' },
    body: ({ query, snapshot }) => autocompleteNames(snapshot, query),
    hook: {
      query: AutocompleteQuery,
      response: {
        200: withRateLimit(
          Type.Object({
            data: Type.Array(Type.String(), { maxItems: MAX_AUTOCOMPLETE, description: 'Distinct card names, best first', examples: [['Charizard', 'Charizard ex']] }),
            meta: AutocompleteMeta,
          }),
        ),
        ...NOT_MODIFIED,
        400: 'Error',
        404: 'Error',
        ...KEY_GUARD_ERRORS,
      },
      detail: {
        tags: ['Search'],
        summary: 'Card names for a type-ahead box',
        description:
          `Up to ${MAX_AUTOCOMPLETE} distinct card names for what a user has typed so far (\`q\`, ${Q_MIN_LENGTH} to ${Q_MAX_LENGTH} ` +
          'characters once trimmed; case, accents and punctuation do not matter): first the names that start with q, then ' +
          'the names where every word of q starts a word of the name, each group shorter names first. No misspelling ' +
          'correction: the last word typed is usually unfinished. `game` (slug) keeps to one game; an unknown slug is a 404. ' +
          'Costs one unit like every read. Answered from the price snapshot, which every sync renews; `ETag` and `If-None-Match` as for search.',
      },
    },
  })
  const routes = new Elysia({ name: 'search-routes' }).use(models).use(authGuard(auth)).model({ CardWithPrice })
  return hot.add(hot.add(routes, search), autocomplete)
}
