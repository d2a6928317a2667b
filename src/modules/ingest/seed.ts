import { createProgress } from '../../shared/progress'
import { claimCatalog } from './catalog-source'
import { DEFAULT_BACKFILL } from './normalize'
import { isCatalogEmpty, type SyncDeps, type SyncSummary, syncGames } from './service'
import type { MarketplaceSource } from './source'

/** RSS growth past which a seed collects garbage before its next call to the source. */
const SEED_GC_HEADROOM_BYTES = 192 * 2 ** 20

/**
 * The source as a seed reads it: before each call, a full garbage collection when the process's
 * RSS grew by more than `headroomBytes` since the last one. JavaScriptCore sizes its heap from the
 * live data, PGlite's WebAssembly memory included, so a seed's multi-row statements piled up to
 * 700 MB of garbage between its own collections (a first start peaked at 1.1 GB); a timer cannot
 * do this, as PGlite's calls never yield to one. The seed calls the source a few times per set and date
 * (docs/adr/0117-the-embedded-database-is-created-in-a-child-process.md).
 */
function collectingGarbage(source: MarketplaceSource, headroomBytes: number): MarketplaceSource {
  let limit = process.memoryUsage.rss() + headroomBytes
  return new Proxy(source, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver)
      if (typeof value !== 'function') return value
      return (...args: unknown[]) => {
        if (process.memoryUsage.rss() > limit) {
          Bun.gc(true)
          limit = process.memoryUsage.rss() + headroomBytes
        }
        return value.apply(target, args)
      }
    },
  })
}

/**
 * Fills an empty catalog from the source, game by game with progress, and records the source as
 * the catalog's (refusing one another source filled). A source with past prices first fills history
 * from 2025-03-02 (weekly, then daily for the last 60 days); one without starts history today, as
 * a regular sync would, rather than date today's prices back. The same source and date always
 * yield the same data.
 */
export async function seedCatalog(deps: SyncDeps, options: { gameSlugs?: string[] } = {}): Promise<SyncSummary> {
  await claimCatalog(deps.db, deps.source.name, deps.clock.now())
  const progress = createProgress(deps.logger, deps.clock, 'seed')
  const summary = await syncGames(
    { ...deps, source: collectingGarbage(deps.source, SEED_GC_HEADROOM_BYTES) },
    {
      gameSlugs: options.gameSlugs,
      backfill: deps.source.capabilities.pastPrices ? DEFAULT_BACKFILL : undefined,
      onProgress: ({ game, done, total }) => progress.update(done, total, game),
    },
  )
  // What the seed left is garbage: a server starts serving without it.
  Bun.gc(true)
  progress.done(`seeded ${summary.games.length - summary.failed} games for ${summary.date} (${summary.failed} failed)`)
  return summary
}

/**
 * A regular sync of today's prices, with progress; `tiers` limits it to games of those priority
 * tiers. Refused on a catalog another source filled; the first sync of an empty one records its source.
 */
export async function syncCatalog(deps: SyncDeps, options: { gameSlugs?: string[]; tiers?: number[] } = {}): Promise<SyncSummary> {
  await claimCatalog(deps.db, deps.source.name, deps.clock.now())
  const progress = createProgress(deps.logger, deps.clock, 'sync')
  const summary = await syncGames(deps, {
    gameSlugs: options.gameSlugs,
    tiers: options.tiers,
    onProgress: ({ game, done, total }) => progress.update(done, total, game),
  })
  progress.done(`synced ${summary.games.length - summary.failed} games for ${summary.date} (${summary.failed} failed)`)
  return summary
}

/** What a server start found: a catalog to serve, one it just filled, or an empty one it left alone. */
export type CatalogAtStart = 'filled' | 'seeded' | 'left-empty'

/**
 * The catalog as a server start needs it (docs/adr/0099-the-catalog-keeps-its-source.md): a
 * filled one must be the configured source's; an empty one is filled through the source before the
 * server listens, except with the demo source when `demoData` is off (the default with DATABASE_URL),
 * which leaves it empty and logs how to fill it: invented prices never land in such a database unasked.
 */
export async function prepareCatalog(deps: SyncDeps, options: { demoData: boolean }): Promise<CatalogAtStart> {
  const { source, logger } = deps
  if (!(await isCatalogEmpty(deps.db))) {
    await claimCatalog(deps.db, source.name, deps.clock.now())
    return 'filled'
  }
  if (source.name === 'demo' && !options.demoData) {
    logger.warn(
      'empty catalog, and the demo source does not fill a DATABASE_URL database unasked: set MARKETPLACE_SOURCE=tcgcsv for real ' +
        'prices, or run `bun src/cli.ts seed` (or start with DEMO_DATA=true) for generated demo data. Scheduled syncs stay off ' +
        'until a start finds the catalog filled',
    )
    return 'left-empty'
  }
  if (source.name === 'demo') logger.info('empty catalog: seeding generated demo data (not real market data)')
  else logger.info({ source: source.name }, `empty catalog: loading it from the ${source.name} source`)
  await seedCatalog(deps)
  return 'seeded'
}
