import type { default as Redis, RedisOptions } from 'ioredis'
import type { Config } from './config'
import { type Database, type DatabaseHandle, openDatabase } from './db/client'
import type { MarketplaceSource } from './modules/ingest/source'
import { createDemoSource } from './modules/ingest/sources/demo'
import { createHttpSource } from './modules/ingest/sources/http'
import { measuredSource } from './modules/ingest/sources/measured'
import { createTcgcsvSource } from './modules/ingest/sources/tcgcsv'
import { TCGCSV_URL } from './modules/ingest/sources/tcgcsv-url'
import { type Clock, systemClock } from './shared/clock'
import { createLogger, type Logger } from './shared/logger'
import { createMetrics, type Metrics } from './shared/metrics'

/** Everything the app and the jobs use, built once from the config and passed down. */
export interface Deps {
  config: Readonly<Config>
  db: Database
  database: DatabaseHandle
  /** Absent when REDIS_URL is unset: in-process stores stand in (single node only). */
  redis: Redis | undefined
  source: MarketplaceSource
  clock: Clock
  logger: Logger
  /** The node's metrics (docs/adr/0122-prometheus-metrics-on-their-own-listener.md); the source is counted in them. */
  metrics: Metrics
  close(): Promise<void>
}

/**
 * Requests never wait for Redis: while it is disconnected commands fail at once (no offline queue)
 * and a hung server fails them after `commandTimeout`, so quota checks fall back to local counters
 * instead of stalling. ioredis keeps reconnecting in the background.
 */
export function redisOptions(keyPrefix: string): RedisOptions {
  return {
    keyPrefix,
    enableAutoPipelining: true,
    enableOfflineQueue: false,
    commandTimeout: 500,
    maxRetriesPerRequest: 1,
    lazyConnect: true,
  }
}

export interface DepsOptions {
  /**
   * Whether each statement is held to DATABASE_STATEMENT_TIMEOUT_SECONDS (default true). The CLI
   * sets false: its seeds and syncs are jobs an operator waits for, not requests.
   */
  statementTimeout?: boolean
}

export async function createDeps(
  config: Readonly<Config>,
  overrides: Partial<Pick<Deps, 'clock' | 'source' | 'logger' | 'metrics'>> = {},
  options: DepsOptions = {},
): Promise<Deps> {
  const logger = overrides.logger ?? createLogger(config.logLevel)
  const metrics = overrides.metrics ?? createMetrics()
  const clock = overrides.clock ?? systemClock
  const database = await openDatabase({
    ...config,
    databaseStatementTimeoutSeconds: (options.statementTimeout ?? true) ? config.databaseStatementTimeoutSeconds : undefined,
  })
  let redis: Redis | undefined
  if (config.redisUrl) {
    const { default: IORedis } = await import('ioredis')
    redis = new IORedis(config.redisUrl, redisOptions(config.redisKeyPrefix))
    redis.on('error', (error) => logger.warn({ err: error }, 'redis error'))
    await redis.connect().catch((error) => logger.warn({ err: error }, 'redis unreachable at start'))
  } else {
    logger.info('REDIS_URL is not set: counters live in this process (single node only)')
  }
  logger.info({ driver: database.driver }, database.driver === 'pglite' ? `embedded database in ${config.dataDir}` : 'using PostgreSQL')
  if (!overrides.source) logger.info(sourceDescription(config))
  return {
    config,
    db: database.db,
    database,
    redis,
    source: measuredSource(overrides.source ?? marketplaceSource(config, { db: database.db, clock, logger }), metrics),
    clock,
    logger,
    metrics,
    async close() {
      redis?.disconnect()
      await database.close()
    },
  }
}

/** What the start log says of the source. A URL other than the public mirror's is not logged: it may carry credentials. */
function sourceDescription(config: Readonly<Config>): string {
  if (config.marketplaceSource === 'demo') return `marketplace: built-in demo (${config.demoScale}), generated data`
  if (config.marketplaceSource === 'http') return 'marketplace: MARKETPLACE_URL over the http protocol'
  const where = config.marketplaceUrl === TCGCSV_URL ? TCGCSV_URL : 'the mirror at MARKETPLACE_URL'
  const categories = config.marketplaceCategories ? `categories ${config.marketplaceCategories.join(', ')}` : 'every supported category'
  return `marketplace: tcgcsv from ${where}, ${categories}`
}

/** The configured marketplace source (MARKETPLACE_SOURCE) on the service's clock; tcgcsv counts its requests in the database. */
export function marketplaceSource(config: Readonly<Config>, deps: Pick<Deps, 'db' | 'clock' | 'logger'>): MarketplaceSource {
  const { clock } = deps
  switch (config.marketplaceSource) {
    case 'demo':
      return createDemoSource({ scale: config.demoScale, now: () => clock.now() })
    case 'http':
      return createHttpSource({ url: config.marketplaceUrl!, timeoutMs: config.marketplaceTimeoutMs, clock })
    case 'tcgcsv':
      return createTcgcsvSource({
        url: config.marketplaceUrl!,
        categories: config.marketplaceCategories,
        timeoutMs: config.marketplaceTimeoutMs,
        pacingMs: config.marketplacePacingMs,
        dailyRequests: config.marketplaceDailyRequests,
        userAgent: config.marketplaceUserAgent,
        ...deps,
      })
  }
}
