import { index, integer, jsonb, pgTable, serial, text } from 'drizzle-orm/pg-core'
import { timestamptz } from './columns'
import { games } from './catalog'

/** One row per game sync: what ran, how it ended, what it wrote. */
export const syncRuns = pgTable(
  'sync_runs',
  {
    id: serial('id').primaryKey(),
    gameId: integer('game_id').references(() => games.id),
    /** The UTC date the prices are for. */
    priceDate: text('price_date').notNull(),
    /** running | succeeded | failed */
    status: text('status').notNull(),
    stats: jsonb('stats').$type<Record<string, number>>(),
    error: text('error'),
    startedAt: timestamptz('started_at').notNull(),
    finishedAt: timestamptz('finished_at'),
  },
  (table) => [index('sync_runs_game_idx').on(table.gameId, table.startedAt)],
)
