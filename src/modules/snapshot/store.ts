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
// A young collection: the strings a build makes and drops at once (see LoadOptions, BuildOptions).
const collectYoung = () => void edenGC()

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
  build_ms: number
  cards: number
  prices: number
  /** The search index's own arrays and strings, and its distinct name words. */
  search_index_bytes: number
  search_index_words: number
}

export interface SnapshotStore {
  /** The snapshot in service; waits for the first build only. */
  get(): PriceSnapshot | Promise<PriceSnapshot>
  /** Builds a new snapshot unless the data has not changed, and swaps it in. One build at a time. */
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
}): SnapshotStore {
  const load = deps.load ?? loadSnapshotSource
  let current: PriceSnapshot | undefined
  let buildMs = 0
  let building: Promise<PriceSnapshot> | undefined
  /** The build that starts when the running one ends, shared by every refresh asked for meanwhile. */
  let queued: Promise<PriceSnapshot> | undefined

  async function build(): Promise<PriceSnapshot> {
    const started = deps.clock.monotonic()
    const fingerprint = await readFingerprint(deps.db)
    if (current && fingerprint === current.fingerprint) return current
    // Under load the heap holds the requests' garbage: collected first, its room takes the new rows.
    collect()
    const source = await load(deps.db, { collectYoung })
    // The garbage of each phase (the rows' text as decoded, the search index's scaffolding) is
    // collected before the next makes more: the heap then grows to the snapshot, not to the
    // snapshot plus every phase's leftovers (a full collection costs tens of ms; a build runs once per sync).
    collect()
    const next = PriceSnapshot.build(source, deps.clock.now(), { betweenPhases: collect, collectYoung })
    buildMs = Math.round(deps.clock.monotonic() - started)
    if (next.version !== current?.version) {
      const memory = { rss_mb: Math.round(process.memoryUsage.rss() / 1_048_576), search_index_bytes: next.search.bytes }
      deps.logger.info({ version: next.version, cards: next.cardCount, prices: next.priceCount, ms: buildMs, source: 'postgres', ...memory }, 'price snapshot built')
    }
    current = next
    // The snapshot replaced is garbage once the requests holding it end: collect it then (a pause
    // once per sync) rather than let the heap grow by it.
    setImmediate(collect)
    return next
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
    // Before the first snapshot (or after a failed first build) requests wait for a build.
    get: () => current ?? building ?? refresh(),
    refresh,
    status() {
      if (!current) return null
      return {
        version: current.version,
        source: 'postgres',
        built_at: current.builtAt.toISOString(),
        age_seconds: Math.max(0, Math.round((deps.clock.now().getTime() - current.builtAt.getTime()) / 1000)),
        build_ms: buildMs,
        cards: current.cardCount,
        prices: current.priceCount,
        search_index_bytes: current.search.bytes,
        search_index_words: current.search.words,
      }
    },
    close() {
      poll.cancel()
      subscriber?.disconnect()
    },
  }
}
