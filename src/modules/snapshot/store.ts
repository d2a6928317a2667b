import type Redis from 'ioredis'
import { Packr } from 'msgpackr'
import type { Database } from '../../db/client'
import type { Clock } from '../../shared/clock'
import type { Logger } from '../../shared/logger'
import { loadSnapshotSource, readFingerprint, type SnapshotSource } from './repo'
import { PriceSnapshot } from './snapshot'

/** How often a node compares the database's fingerprint with its snapshot's: the bound on staleness when a change message is lost. */
export const SNAPSHOT_POLL_MS = 30_000

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

/**
 * The layout of SnapshotSource in a copy: raised whenever its fields change, so a node never
 * builds from a copy an older node left (it would lack fields the answers need).
 */
const COPY_LAYOUT = 2
/** Where a node keeps the rows of the snapshot it built from Postgres, for other nodes to start from. */
export const snapshotCopyKey = (fingerprint: string) => `snapshot-source:${COPY_LAYOUT}:${fingerprint}`
/** A copy outlives a day of syncs; older ones are never read again (the fingerprint moved). */
const COPY_TTL_SECONDS = 86_400
// Records mode (key lists sent once per shape): only our own nodes read these copies. A Packr
// keeps its output buffer for the next call, tens of MB on a large catalog: one per copy.
const copyPacker = () => new Packr({ useRecords: true })

export interface SnapshotStatus {
  version: string
  /** Where the last build read its rows: Postgres, or the msgpack copy another node left in Redis. */
  source: 'postgres' | 'redis'
  built_at: string
  age_seconds: number
  build_ms: number
  cards: number
  prices: number
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
  let builtFrom: SnapshotStatus['source'] = 'postgres'
  let building: Promise<PriceSnapshot> | undefined
  let again = false

  /** The rows another node read for this fingerprint, if it left a copy in Redis; undefined otherwise. */
  async function readCopy(fingerprint: string): Promise<SnapshotSource | undefined> {
    if (!deps.redis) return undefined
    try {
      const packed = await deps.redis.getBuffer(snapshotCopyKey(fingerprint))
      if (!packed) return undefined
      const source = copyPacker().unpack(packed) as SnapshotSource
      if (source.fingerprint !== fingerprint || !Array.isArray(source.prices) || !Array.isArray(source.cards)) throw new Error('not a snapshot copy')
      return source
    } catch (error) {
      deps.logger.warn({ err: error }, 'ignored an unreadable snapshot copy in Redis; reading Postgres')
      return undefined
    }
  }

  function writeCopy(source: SnapshotSource) {
    deps.redis
      ?.set(snapshotCopyKey(source.fingerprint), copyPacker().pack(source), 'EX', COPY_TTL_SECONDS)
      .catch((error) => deps.logger.warn({ err: error }, 'could not leave a snapshot copy in Redis'))
  }

  async function build(): Promise<PriceSnapshot> {
    const started = deps.clock.monotonic()
    const fingerprint = await readFingerprint(deps.db)
    if (current && fingerprint === current.fingerprint) return current
    // A node starting (or catching up) after another built this data reads its copy: one Redis
    // read instead of four large Postgres reads.
    const copy = await readCopy(fingerprint)
    const source = copy ?? (await load(deps.db))
    const next = PriceSnapshot.build(source, deps.clock.now())
    buildMs = Math.round(deps.clock.monotonic() - started)
    builtFrom = copy ? 'redis' : 'postgres'
    if (!copy) writeCopy(source)
    if (next.version !== current?.version) {
      deps.logger.info({ version: next.version, cards: next.cardCount, prices: next.priceCount, ms: buildMs, source: builtFrom }, 'price snapshot built')
    }
    current = next
    // The rows read and the snapshot replaced are garbage once this returns, several hundred MB on
    // a large catalog: collect them then (a pause once per sync) rather than let the heap double.
    setImmediate(() => Bun.gc(true))
    return next
  }

  // A change announced during a build may not be in it: run once more after it.
  function refresh(): Promise<PriceSnapshot> {
    if (building) {
      again = true
      return building
    }
    building = build().finally(() => {
      building = undefined
      if (again) {
        again = false
        void refresh().catch(() => {})
      }
    })
    building.catch((error) => deps.logger.error({ err: error }, 'price snapshot build failed; the previous one stays in service'))
    return building
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
        source: builtFrom,
        built_at: current.builtAt.toISOString(),
        age_seconds: Math.max(0, Math.round((deps.clock.now().getTime() - current.builtAt.getTime()) / 1000)),
        build_ms: buildMs,
        cards: current.cardCount,
        prices: current.priceCount,
      }
    },
    close() {
      poll.cancel()
      subscriber?.disconnect()
    },
  }
}
