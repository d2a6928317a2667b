import { date, index, integer, jsonb, pgTable, serial, text } from 'drizzle-orm/pg-core'
import { games } from './catalog'
import { timestamptz } from './columns'

/** One row per game sync: what ran, how it ended, what it wrote. */
export const syncRuns = pgTable(
  'sync_runs',
  {
    id: serial('id').primaryKey(),
    gameId: integer('game_id').references(() => games.id),
    /** The UTC date the prices are for. */
    priceDate: text('price_date').notNull(),
    /** running | succeeded | partial | failed | interrupted */
    status: text('status').notNull(),
    stats: jsonb('stats').$type<Record<string, number>>(),
    error: text('error'),
    startedAt: timestamptz('started_at').notNull(),
    finishedAt: timestamptz('finished_at'),
  },
  (table) => [index('sync_runs_game_idx').on(table.gameId, table.startedAt)],
)

/**
 * One row per run of a scheduled job (or a manual sync): which job, for which scheduled instant,
 * over which games, how it ended and how many rows it changed. The scheduler reads the newest
 * `scheduled_for` per job to find a run missed while no node led.
 */
export const jobRuns = pgTable(
  'job_runs',
  {
    id: serial('id').primaryKey(),
    /** e.g. `sync-tier-3`; `manual-sync` for the CLI. */
    job: text('job').notNull(),
    /** The schedule instant this run stands for (its start when run by hand). */
    scheduledFor: timestamptz('scheduled_for').notNull(),
    /** Slugs of the games the run covered. */
    games: jsonb('games').$type<string[]>().notNull(),
    /** running | succeeded | failed (a run with some failed or partial games is failed) | interrupted */
    outcome: text('outcome').notNull(),
    rowsChanged: integer('rows_changed'),
    /** Source rows refused by validation and skipped (never stored half); null before it was counted. */
    rowsSkipped: integer('rows_skipped'),
    error: text('error'),
    startedAt: timestamptz('started_at').notNull(),
    finishedAt: timestamptz('finished_at'),
  },
  (table) => [index('job_runs_job_idx').on(table.job, table.scheduledFor)],
)

/**
 * Which marketplace source filled the catalog (one row): a start with another source on a filled
 * catalog is refused, so invented and real prices never mix.
 */
export const catalogSource = pgTable('catalog_source', {
  id: integer('id').primaryKey().default(1),
  /** demo | tcgcsv | http */
  source: text('source').notNull(),
  recordedAt: timestamptz('recorded_at').notNull(),
})

/** Requests sent to the marketplace per UTC day, against its daily budget; survives restarts. */
export const marketplaceRequests = pgTable('marketplace_requests', {
  day: date('day', { mode: 'string' }).primaryKey(),
  requests: integer('requests').notNull(),
})
