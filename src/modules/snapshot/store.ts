import { edenGC } from 'bun:jsc'
import type Redis from 'ioredis'
import type { Database } from '../../db/client'
import type { Clock } from '../../shared/clock'
import type { Logger } from '../../shared/logger'
import { loadSnapshotSource, readFingerprint } from './repo'
import { PriceSnapshot } from './snapshot'

/** How often a node compares the database's fingerprint with its snapshot's: the bound on staleness when a change message is lost. */
export const SNAPSHOT_POLL_MS = 30_000

const collect = () => Bun.gc(true)
// A young collection: the strings the read decodes and drops at once (see LoadOptions).
const collectYoung = () => void edenGC()

/** The process's resident set size now, in MB (2^20 bytes): what /ready and the build's log report. */
export const rssMb = () => Math.round(process.memoryUsage.rss() / 1_048_576)

export const snapshotChannel = (redis: Redis) => `${redis.options.keyPrefix ?? ''}snapshot-changed`

/** Tells every node that prices changed (after a sync). Best effort: the poll catches a lost message. */
export async function publishSnapshotChanged(redis: Redis | undefined, logger: Logger) {
  if (!redis) return
  try {
    await redis.publish(snapshotChannel(redis), 'changed')
  } catch (error) {
    logger.warn({ err: error }, `could not announce new prices; nodes notice within ${SNAPSHOT_POLL_MS / 1000} s`)
  }
}

export interface SnapshotStatus {
  version: string
  /** Where the last build read its rows: always Postgres (docs/adr/0116-no-copy-of-the-snapshot-in-redis.md). */
  source: 'postgres'
  built_at: string
  age_seconds: number
  /** From the build's start until its prices were in service. */
  build_ms: number
  cards: number
  prices: number
  /** The search index's build, after the prices were in service (docs/adr/0119-prices-first-then-the-search-index.md). */
  search_index_ms: number
  /** The version searches answer from: the previous one while the new snapshot's index is built. */
  search_version: string
  /** The search index's own arrays and strings, and its distinct name words. */
  search_index_bytes: number
  search_index_words: number
}

/** Where a read takes its snapshot from. */
export interface SnapshotReader {
  /** The snapshot in service; waits for the first build only. */
  get(): PriceSnapshot | Promise<PriceSnapshot>
}

export interface SnapshotStore extends SnapshotReader {
  /**
   * The newest snapshot whose search index is built, for search and autocomplete: while a new
   * snapshot's index is built its prices are already in service and searches answer from the one
   * before, whole (docs/adr/0119-prices-first-then-the-search-index.md).
   */
  searching: SnapshotReader
  /** Builds a new snapshot unless the data has not changed, and swaps it in, prices first, then its search index; resolves once both serve. One build at a time. */
  refresh(): Promise<PriceSnapshot>
  status(): SnapshotStatus | null
  close(): void
}

/**
 * Holds the node's price snapshot. The first build starts at once; later ones run when the sync
 * announces new prices (Redis pub/sub `snapshot-changed`) or when the poll sees the database's
 * fingerprint move, off the request path. A failed build keeps the previous snapshot in service.
 */
export function snapshotStore(deps: {
  db: Database
  redis: Redis | undefined
  logger: Logger
  clock: Clock
  pollMs?: number
  /** How the rows are read (tests wrap it to hold a build midway). */
  load?: typeof loadSnapshotSource
  /** Awaited once the new prices serve, before their search index is built (tests hold a build there). */
  beforeSearchIndex?: () => Promise<void>
}): SnapshotStore {
  const load = deps.load ?? loadSnapshotSource
  /** Prices, movers, the change feed: the newest snapshot. */
  let current: PriceSnapshot | undefined
  /**
   * Search and autocomplete: the newest snapshot whose index is built (current, or the one before
   * while current's is built), as searches read it (`forSearch`: without its bulk rows, movers and changes).
   */
  let searchable: PriceSnapshot | undefined
  let buildMs = 0
  let searchIndexMs = 0
  let building: Promise<PriceSnapshot> | undefined
  /** The build that starts when the running one ends, shared by every refresh asked for meanwhile. */
  let queued: Promise<PriceSnapshot> | undefined

  async function build(): Promise<PriceSnapshot> {
    const started = deps.clock.monotonic()
    const fingerprint = await readFingerprint(deps.db)
    if (current && fingerprint === current.fingerprint) {
      // A build whose index failed left its prices serving: the index is still owed.
      if (searchable?.version !== current.version) await indexFor(current)
      return current
    }
    // Under load the heap holds the requests' garbage: collected first, its room takes the new rows.
    collect()
    const source = await load(deps.db, { collectYoung })
    // The garbage of each phase (the rows' text as decoded, the bulk rows' scaffolding) is
    // collected before the next makes more: the heap then grows to the snapshot, not to the
    // snapshot plus every phase's leftovers (a full collection costs tens of ms; a build runs once per sync).
    collect()
    const next = PriceSnapshot.build(source, deps.clock.now(), { betweenPhases: collect, searchIndex: 'later' })
    buildMs = Math.round(deps.clock.monotonic() - started)
    if (next.version !== current?.version) {
      deps.logger.info({ version: next.version, cards: next.cardCount, prices: next.priceCount, ms: buildMs, source: 'postgres', rss_mb: rssMb() }, 'price snapshot built')
    }
    // The new prices serve from here on; searches keep the previous snapshot until this one's index is built.
    current = next
    await indexFor(next)
    return next
  }

  /** Builds the snapshot's search index and hands searches to it. */
  async function indexFor(snapshot: PriceSnapshot): Promise<void> {
    await deps.beforeSearchIndex?.()
    // A turn of the event loop first: requests waiting on it are answered, with the new prices, before the index holds the thread.
    await new Promise<void>((resolve) => setImmediate(resolve))
    const started = deps.clock.monotonic()
    // The price build's last garbage, or the index's scaffolding would come on top of it (about 20 MB more at the peak on `large`).
    collect()
    snapshot.buildSearchIndex()
    collect() // the index's scaffolding (without it and the collection after the movers, /ready's RSS on `large` was 16 MB higher)
    searchIndexMs = Math.round(deps.clock.monotonic() - started)
    searchable = snapshot.forSearch()
    deps.logger.info(
      { version: snapshot.version, ms: searchIndexMs, search_index_bytes: snapshot.search.bytes, search_index_words: snapshot.search.words, rss_mb: rssMb() },
      'search index built',
    )
    // The snapshot replaced is garbage once the requests holding it end: collect it then (a pause
    // once per sync) rather than let the heap grow by it.
    setImmediate(collect)
  }

  function start(): Promise<PriceSnapshot> {
    building = build().finally(() => {
      building = undefined
    })
    building.catch((error) => deps.logger.error({ err: error }, 'price snapshot build failed; the previous one stays in service'))
    return building
  }

  // The running build may have read the rows before the caller's change: the caller gets the next
  // build instead, one for every refresh asked for while this one runs.
  function refresh(): Promise<PriceSnapshot> {
    if (queued) return queued
    if (!building) return start()
    queued = building
      .catch(() => {})
      .then(() => {
        queued = undefined
        return start()
      })
    return queued
  }

  /** The first build's search twin, once built. A caller may drop the promise (a hot route that does not wait): its failure is the build's, logged by start. */
  function searchableOnceBuilt(): Promise<PriceSnapshot> {
    const built = (building ?? refresh()).then(() => searchable!)
    built.catch(() => {})
    return built
  }

  void refresh().catch(() => {})
  const poll = deps.clock.every(deps.pollMs ?? SNAPSHOT_POLL_MS, () => void refresh().catch(() => {}), { unref: true })

  let subscriber: Redis | undefined
  if (deps.redis) {
    const channel = snapshotChannel(deps.redis)
    subscriber = deps.redis.duplicate({ lazyConnect: true })
    subscriber.on('error', () => {}) // the main connection already reports Redis trouble
    subscriber.on('message', () => void refresh().catch(() => {}))
    // On every (re)connection: messages sent while away are lost, so look for changes.
    subscriber.on('ready', () => {
      subscriber!.subscribe(channel).catch((error) => deps.logger.warn({ err: error }, 'snapshot subscription failed'))
      if (current) void refresh().catch(() => {})
    })
    subscriber.connect().catch(() => {})
  }

  return {
    // Before the first snapshot (or after a failed first build) requests wait for a build: its prices and its index.
    get: () => current ?? building ?? refresh(),
    searching: { get: () => searchable ?? searchableOnceBuilt() },
    refresh,
    status() {
      if (!current || !searchable) return null
      return {
        version: current.version,
        source: 'postgres',
        built_at: current.builtAt.toISOString(),
        age_seconds: Math.max(0, Math.round((deps.clock.now().getTime() - current.builtAt.getTime()) / 1000)),
        build_ms: buildMs,
        cards: current.cardCount,
        prices: current.priceCount,
        search_index_ms: searchIndexMs,
        search_version: searchable.version,
        search_index_bytes: searchable.search.bytes,
        search_index_words: searchable.search.words,
      }
    },
    close() {
      poll.cancel()
      subscriber?.disconnect()
    },
  }
}
