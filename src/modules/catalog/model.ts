import { type Static, Type } from '@sinclair/typebox'
import { Id, Timestamp } from '../../shared/model'

export const Game = Type.Object(
  {
    id: Id,
    name: Type.String({ examples: ['Pokemon'] }),
    slug: Type.String({ description: 'Used in paths and in the `game` filter', examples: ['pokemon'] }),
    priority: Type.Integer({ minimum: 0, maximum: 3, description: 'Update tier, 0 to 3 (3 = daily at 2 AM EST)' }),
    set_count: Type.Integer({ minimum: 0 }),
    card_count: Type.Integer({ minimum: 0, description: 'Cards and sealed products' }),
    last_synced_at: Type.Union([Timestamp, Type.Null()], { description: 'null until the first sync' }),
  },
)
export type Game = Static<typeof Game>

/** Items of a game's set list. */
export const SetSummary = Type.Object({
  id: Id,
  name: Type.String({ examples: ['Base Set'] }),
  slug: Type.String({ examples: ['base-set'] }),
  abbreviation: Type.String({ examples: ['BS'] }),
  release_date: Type.String({ format: 'date', description: 'YYYY-MM-DD' }),
  card_count: Type.Integer({ minimum: 0 }),
  last_synced_at: Type.Union([Timestamp, Type.Null()]),
})
export type SetSummary = Static<typeof SetSummary>

export const GameSlugParams = Type.Object({
  slug: Type.String({ minLength: 1, maxLength: 100, description: 'Game slug' }),
})
