/**
 * The service's Prometheus metrics (docs/adr/0122-prometheus-metrics-on-their-own-listener.md): one
 * registry per service instance, every metric's name, labels and help declared here once. Counts on
 * hot paths are plain numbers a series holds, read into the exposition only when scraped; state
 * (the snapshot, Redis, the database, the webhook queue) is read on scrape from what owns it.
 */
import { collectDefaultMetrics, type Metric, Registry } from 'prom-client'
import packageJson from '../../package.json' with { type: 'json' }
import type { RequestRecord } from './request-record'

/** One labelled series of a counter (or a set gauge): a plain number, so adding to it allocates nothing. */
export class CounterSeries {
  value = 0
  constructor(readonly labels: Readonly<Record<string, string>>) {}
  inc(by = 1) {
    this.value += by
  }
}

/** One labelled series of a histogram: a count per bucket, the sum and the count. */
export class HistogramSeries {
  /** Per bucket, not cumulative; the last is +Inf. */
  readonly counts: Float64Array
  sum = 0
  count = 0
  constructor(
    readonly labels: Readonly<Record<string, string>>,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Float64Array(bounds.length + 1)
  }
  observe(value: number) {
    let bucket = 0
    while (bucket < this.bounds.length && value > this.bounds[bucket]!) bucket++
    this.counts[bucket]!++
    this.sum += value
    this.count++
  }
}

/** One sample of the exposition: a series' labels and value, under the family's name or a suffixed one. */
export interface Sample {
  labels: Readonly<Record<string, string | number>>
  value: number
  metricName?: string
}

/**
 * A metric family this file keeps itself and prom-client's registry writes out: the registry asks
 * a metric only for its name, help, type and samples (`get`), while prom-client's own counters and
 * histograms hash their labels into a new string on every increment, which the hot path avoids.
 */
abstract class Family {
  readonly aggregator = 'sum'
  constructor(
    registry: Registry,
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'gauge' | 'histogram',
  ) {
    // The registry's types name only prom-client's classes; at run time it reads the fields above and get().
    registry.registerMetric(this as unknown as Metric)
  }
  protected abstract samples(): Sample[] | Promise<Sample[]>
  async get() {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: await this.samples() }
  }
}

/** The series of a labelled family, found by their label values in label order (one Map per label). */
class SeriesTree<S> {
  private readonly root = new Map<string, unknown>()
  readonly all: S[] = []
  constructor(
    private readonly labelNames: readonly string[],
    private readonly make: (labels: Record<string, string>) => S,
  ) {}
  get(values: readonly string[]): S {
    let node = this.root
    for (let i = 0; i < values.length - 1; i++) {
      let next = node.get(values[i]!) as Map<string, unknown> | undefined
      if (!next) node.set(values[i]!, (next = new Map()))
      node = next
    }
    const last = values[values.length - 1] ?? ''
    let series = node.get(last) as S | undefined
    if (!series) {
      series = this.make(Object.fromEntries(this.labelNames.map((name, i) => [name, values[i]!])))
      node.set(last, series)
      this.all.push(series)
    }
    return series
  }
}

/** A counter family (or, as `gauge`, values set rather than added): each series a plain number. */
export class CounterFamily extends Family {
  private readonly tree: SeriesTree<CounterSeries>
  constructor(registry: Registry, spec: { name: string; help: string; labelNames: readonly string[]; type?: 'counter' | 'gauge' }) {
    super(registry, spec.name, spec.help, spec.type ?? 'counter')
    this.tree = new SeriesTree(spec.labelNames, (labels) => new CounterSeries(labels))
  }
  /** The series of these label values, in label order: look it up once and keep it on a hot path. */
  series(...values: string[]): CounterSeries {
    return this.tree.get(values)
  }
  protected samples(): Sample[] {
    return this.tree.all.map((series) => ({ labels: series.labels, value: series.value }))
  }
}

/** A histogram family: each series its bucket counts, sum and count. */
export class HistogramFamily extends Family {
  private readonly tree: SeriesTree<HistogramSeries>
  constructor(
    registry: Registry,
    private readonly spec: { name: string; help: string; labelNames: readonly string[]; buckets: readonly number[] },
  ) {
    super(registry, spec.name, spec.help, 'histogram')
    this.tree = new SeriesTree(spec.labelNames, (labels) => new HistogramSeries(labels, spec.buckets))
  }
  series(...values: string[]): HistogramSeries {
    return this.tree.get(values)
  }
  protected samples(): Sample[] {
    const { name, buckets } = this.spec
    const samples: Sample[] = []
    for (const series of this.tree.all) {
      let cumulative = 0
      buckets.forEach((bound, i) => {
        cumulative += series.counts[i]!
        samples.push({ metricName: `${name}_bucket`, labels: { ...series.labels, le: bound }, value: cumulative })
      })
      samples.push({ metricName: `${name}_bucket`, labels: { ...series.labels, le: '+Inf' }, value: series.count })
      samples.push({ metricName: `${name}_sum`, labels: series.labels, value: series.sum })
      samples.push({ metricName: `${name}_count`, labels: series.labels, value: series.count })
    }
    return samples
  }
}

/** A gauge family read when scraped: `read` answers its samples, none when what it reads is unknown. */
class ScrapedGauge extends Family {
  constructor(
    registry: Registry,
    spec: { name: string; help: string },
    private readonly read: () => Sample[] | Promise<Sample[]>,
  ) {
    super(registry, spec.name, spec.help, 'gauge')
  }
  protected samples() {
    return this.read()
  }
}

/** What the snapshot store's status says, as the snapshot gauges read it (its `SnapshotStatus`). */
export interface SnapshotFigures {
  version: string
  built_at: string
  age_seconds: number
  build_ms: number
  search_index_ms: number
  cards: number
  prices: number
  search_index_bytes: number
  search_index_words: number
}

/** Where a node's state is read on each scrape; each is set by what owns the state, absent until then. */
export interface StateReaders {
  snapshot?: () => SnapshotFigures | null
  quotaMode?: () => 'shared' | 'local' | 'degraded'
  /** 1 when Redis is connected and ready; undefined when no Redis is configured. */
  redisUp?: () => 0 | 1 | undefined
  /** Resolves whether the database answers (bounded in time by the reader). */
  databaseUp?: () => Promise<0 | 1>
  /** The webhook outbox: entries waiting, and those of them due now; undefined when it cannot be read. */
  webhookQueue?: () => Promise<{ pending: number; due: number } | undefined>
  webhookInFlight?: () => number
}

const QUOTA_MODES = ['shared', 'local', 'degraded'] as const

/** Request methods counted by name; any other (a client may send any token) counts as `other`. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])

/** Request latency buckets, seconds: from a hot repeat's fraction of a millisecond to a slow export. */
const REQUEST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
/** Sync run buckets, seconds: a tiny catalog's seconds to a full catalog's hours. */
const SYNC_BUCKETS = [1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200]

/**
 * prom-client's process and runtime metrics that do not give true values on Bun, removed after
 * collectDefaultMetrics (docs/adr/0122-prometheus-metrics-on-their-own-listener.md): active
 * handles, requests and resources always read 0, heap spaces are V8's names over JSC's one heap,
 * the GC histogram is never observed, `process_heap_bytes` is VmData (mostly address space Bun
 * reserves) and `nodejs_version_info` names the Node version Bun imitates.
 */
export const UNTRUE_ON_BUN = [
  'process_heap_bytes',
  'nodejs_active_handles',
  'nodejs_active_handles_total',
  'nodejs_active_requests',
  'nodejs_active_requests_total',
  'nodejs_active_resources',
  'nodejs_active_resources_total',
  'nodejs_heap_space_size_total_bytes',
  'nodejs_heap_space_size_used_bytes',
  'nodejs_heap_space_size_available_bytes',
  'nodejs_version_info',
  'nodejs_gc_duration_seconds',
]

export interface MetricsOptions {
  /** Adds the process and runtime metrics (CPU, memory, file descriptors, event loop lag): a server's, not a test app's. */
  process?: boolean
}

export type Metrics = ReturnType<typeof createMetrics>

/** A registry and every metric of the service; one per service instance, so apps in one process never share counts. */
export function createMetrics(options: MetricsOptions = {}) {
  const registry = new Registry()
  if (options.process) {
    collectDefaultMetrics({ register: registry })
    for (const name of UNTRUE_ON_BUN) registry.removeSingleMetric(name)
  }
  const readers: StateReaders = {}
  const gauge = (name: string, help: string, read: () => Sample[] | Promise<Sample[]>) => new ScrapedGauge(registry, { name, help }, read)
  /** One unlabelled sample, or none when the value is unknown. */
  const one = (value: number | undefined): Sample[] => (value === undefined ? [] : [{ labels: {}, value }])

  const build = { version: packageJson.version, bun: Bun.version }
  gauge('tcg_build_info', 'The service version and the Bun version running it; always 1', () => [{ labels: build, value: 1 }])

  // Requests, from the record every request leaves (docs/adr/0121-request-ids-and-the-access-log.md).
  const requests = new CounterFamily(registry, {
    name: 'tcg_http_requests_total',
    help: 'Requests answered, by method, route template (`unmatched` when no route matched) and status',
    labelNames: ['method', 'route', 'status'],
  })
  const requestSeconds = new HistogramFamily(registry, {
    name: 'tcg_http_request_duration_seconds',
    help: 'Time from a request arriving to its answer being ready (not fully sent), by method and route template',
    labelNames: ['method', 'route'],
    buckets: REQUEST_BUCKETS,
  })
  /** Per route and method: the latency series and the counter series per status, found without allocating. */
  const routes = new Map<string, Map<string, { seconds: HistogramSeries; statuses: Map<number, CounterSeries> }>>()
  function requestDone(record: RequestRecord) {
    const method = METHODS.has(record.method) ? record.method : 'other'
    let byMethod = routes.get(record.route)
    if (!byMethod) routes.set(record.route, (byMethod = new Map()))
    let route = byMethod.get(method)
    if (!route) byMethod.set(method, (route = { seconds: requestSeconds.series(method, record.route), statuses: new Map() }))
    let status = route.statuses.get(record.status)
    if (!status) route.statuses.set(record.status, (status = requests.series(method, record.route, String(record.status))))
    status.inc()
    route.seconds.observe(record.durationMs / 1000)
  }

  const quotaAdmitted = new CounterFamily(registry, {
    name: 'tcg_quota_admitted_total',
    help: 'Key-guarded requests the daily quota admitted and charged, by tier',
    labelNames: ['tier'],
  })
  const quotaRejected = new CounterFamily(registry, {
    name: 'tcg_quota_rejected_total',
    help: 'Key-guarded requests refused with 429 RATE_LIMIT_EXCEEDED because the daily quota was used up, by tier',
    labelNames: ['tier'],
  })
  const keyCache = new CounterFamily(registry, {
    name: 'tcg_key_cache_lookups_total',
    help: "API key lookups in this node's key cache: `hit` answered from it, `miss` read from the database",
    labelNames: ['result'],
  })

  const syncRuns = new CounterFamily(registry, {
    name: 'tcg_sync_runs_total',
    help: 'Sync runs this node finished, by job and outcome (`succeeded`; `failed`: a game failed or synced in part; `error`: the run itself failed)',
    labelNames: ['job', 'outcome'],
  })
  const syncSeconds = new HistogramFamily(registry, {
    name: 'tcg_sync_run_duration_seconds',
    help: 'How long the sync runs this node finished took, by job',
    labelNames: ['job'],
    buckets: SYNC_BUCKETS,
  })
  const syncSucceeded = new CounterFamily(registry, {
    name: 'tcg_sync_last_success_timestamp_seconds',
    help: 'When the last sync run of each job that succeeded on this node ended, Unix seconds',
    labelNames: ['job'],
    type: 'gauge',
  })

  const sourceRequests = new CounterFamily(registry, {
    name: 'tcg_source_requests_total',
    help: 'Calls to the marketplace source, by source and operation (retries inside one call count once)',
    labelNames: ['source', 'operation'],
  })
  const sourceFailures = new CounterFamily(registry, {
    name: 'tcg_source_failures_total',
    help: 'Calls to the marketplace source that failed, by source, operation and kind (timeout, unavailable, status, malformed, refused, budget, error)',
    labelNames: ['source', 'operation', 'kind'],
  })
  const sourceRowsSkipped = new CounterFamily(registry, {
    name: 'tcg_source_rows_skipped_total',
    help: 'Rows the marketplace source answered but refused as invalid, by source and kind',
    labelNames: ['source', 'kind'],
  })

  const webhookDeliveries = new CounterFamily(registry, {
    name: 'tcg_webhook_deliveries_total',
    help: 'Webhook delivery attempts by outcome: `delivered`; `retrying`: failed, tried again later; `gave_up`: failed, the last attempt (the webhook is disabled)',
    labelNames: ['outcome'],
  })
  // Every outcome shown from the start, at 0 until it happens.
  for (const outcome of ['delivered', 'retrying', 'gave_up']) webhookDeliveries.series(outcome)
  const conditionRefreshes = new CounterFamily(registry, {
    name: 'tcg_condition_refreshes_total',
    help: "Live refreshes of a card's condition prices, by trigger (`request`, `recrawl`) and outcome (`refreshed`, `fresh`, `over_allowance`, `failed`, `busy`)",
    labelNames: ['trigger', 'outcome'],
  })

  // Read on scrape.
  const snapshot = (name: string, help: string, value: (figures: SnapshotFigures) => number) =>
    gauge(name, help, () => {
      const figures = readers.snapshot?.()
      return figures ? [{ labels: {}, value: value(figures) }] : []
    })
  gauge('tcg_snapshot_info', 'The price snapshot in service, its version as a label; always 1', () => {
    const figures = readers.snapshot?.()
    return figures ? [{ labels: { version: figures.version }, value: 1 }] : []
  })
  snapshot('tcg_snapshot_built_timestamp_seconds', 'When the price snapshot in service was built, Unix seconds', (s) => Date.parse(s.built_at) / 1000)
  snapshot('tcg_snapshot_age_seconds', 'How old the price snapshot in service is, seconds', (s) => s.age_seconds)
  snapshot('tcg_snapshot_build_seconds', 'How long the price snapshot in service took to build until its prices served, seconds', (s) => s.build_ms / 1000)
  snapshot(
    'tcg_snapshot_search_index_build_seconds',
    'How long the search index of the newest snapshot took to build, after its prices served, seconds',
    (s) => s.search_index_ms / 1000,
  )
  snapshot('tcg_snapshot_cards', 'Cards in the price snapshot in service', (s) => s.cards)
  snapshot('tcg_snapshot_prices', 'Price rows in the price snapshot in service', (s) => s.prices)
  snapshot('tcg_snapshot_search_index_bytes', "The search index's size in memory (its arrays and strings, estimated), bytes", (s) => s.search_index_bytes)
  snapshot('tcg_snapshot_search_index_words', 'Distinct words of card names in the search index', (s) => s.search_index_words)

  gauge('tcg_quota_mode', 'Where quotas are counted, 1 for the mode in force: `shared` on Redis, `local` without Redis, `degraded` while Redis fails', () => {
    const mode = readers.quotaMode?.()
    return mode ? QUOTA_MODES.map((each) => ({ labels: { mode: each }, value: each === mode ? 1 : 0 })) : []
  })
  gauge('tcg_redis_up', 'Whether the Redis connection is ready (1) or not (0); absent without Redis', () => one(readers.redisUp?.()))
  gauge('tcg_database_up', 'Whether the database answered a ping at this scrape within 2 s (1) or not (0)', async () => one(await readers.databaseUp?.()))
  gauge(
    'tcg_webhook_queue_entries',
    'Webhook outbox entries waiting for delivery, shared by every node: `due` now (the backlog) or `waiting` for a later retry; absent when the database does not answer',
    async () => {
      const depth = await readers.webhookQueue?.().catch(() => undefined)
      if (!depth) return []
      return [
        { labels: { state: 'due' }, value: depth.due },
        { labels: { state: 'waiting' }, value: depth.pending - depth.due },
      ]
    },
  )
  gauge('tcg_webhook_deliveries_in_flight', 'Webhook delivery attempts this node has under way', () => one(readers.webhookInFlight?.()))

  return {
    registry,
    /** The consumer of every request's record (createApp hands it each one). */
    requestDone,
    quotaAdmitted,
    quotaRejected,
    keyCache,
    conditionRefreshes,
    webhookDeliveries,
    sourceRequests,
    sourceFailures,
    sourceRowsSkipped,
    /** Counts a finished sync run and its duration; a success also stamps its end. */
    syncRun(job: string, outcome: 'succeeded' | 'failed' | 'error', seconds: number, endedAt: Date) {
      syncRuns.series(job, outcome).inc()
      syncSeconds.series(job).observe(seconds)
      if (outcome === 'succeeded') syncSucceeded.series(job).value = endedAt.getTime() / 1000
    },
    /** Sets where scrape-time state is read; a later call for the same state replaces the earlier. */
    readState(state: StateReaders) {
      Object.assign(readers, state)
    },
    /** The exposition text and its content type. */
    async exposition(): Promise<{ text: string; contentType: string }> {
      return { text: await registry.metrics(), contentType: registry.contentType }
    },
  }
}
