import { Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { PageMeta, toPage } from '../../shared/model'
import { models } from '../../shared/models-plugin'
import { authGuard, KEY_GUARD_ERRORS, withRateLimit } from '../auth/guard'
import type { AuthRuntime } from '../auth/runtime'
import { CardWithPrice } from '../catalog/model'
import { Q_MAX_LENGTH, Q_MIN_LENGTH, SearchQuery } from './model'
import { searchCards } from './service'

/** Card search by name (docs/adr/0042-matching-by-words-then-by-corrected-words.md): full text plus trigram similarity, with filters. */
export function searchRoutes(auth: AuthRuntime) {
  return new Elysia({ name: 'search-routes' })
    .use(models)
    .use(authGuard(auth))
    .model({ CardWithPrice })
    .get('/v1/search', ({ query }) => searchCards(auth.db, query, toPage(query)), {
      apiKey: { needs: 'catalog' },
      query: SearchQuery,
      response: {
        200: withRateLimit(Type.Object({ data: Type.Array(Type.Ref('CardWithPrice')), meta: PageMeta })),
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
          'close misspelling of a word of the name (trigram similarity to the words of all card names), so "charzard" still ' +
          "finds Charizard. Rows are card-with-price rows: the card and its primary printing's price (Normal when it has one). " +
          'Filters: `game` (slug), `type`, `set_id`, ' +
          '`rarity` and `printing` (exact; the card has a price for that printing), `min_price`/`max_price` (inclusive, on the ' +
          'primary market price; cards without one are left out). Relevance order: the exact name, then names starting with q, ' +
          'then other word matches, then misspelt matches by word similarity to q; within each, shorter names first. Every ' +
          'order ends with the id, so pages ' +
          'never repeat or skip a card. An unknown game slug or set id is a 404; min_price above max_price is a 400.',
      },
    })
}
