import { afterAll, describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import packageJson from '../../package.json' with { type: 'json' }
import { loadConfig } from '../../src/config'
import { createDeps } from '../../src/deps'
import { runSyncJob } from '../../src/jobs/sync-job'
import type { MarketplaceSource } from '../../src/modules/ingest/source'
import { measuredSource } from '../../src/modules/ingest/sources/measured'
import { MarketplaceError } from '../../src/modules/ingest/sources/request'
import { createDeliveryWorker, retryBackoff } from '../../src/modules/webhooks/delivery'
import { createSecretBox } from '../../src/modules/webhooks/secret-box'
import { systemClock } from '../../src/shared/clock'
import { createMetrics, type Metrics } from '../../src/shared/metrics'
import { serveMetrics } from '../../src/shared/metrics-listener'
import { startWebhookReceiver } from '../fixtures/webhook-receiver'
import { accountWithKey, testRedis } from '../helpers/auth'
import { freshDatabase, selectRows, testClock, testLogger, tinySource } from '../helpers/db'
import { TEST_DATABASE_URL, TEST_REDIS_URL } from '../helpers/env'
import { eventually } from '../helpers/eventually'
import { type Exposition, scrape } from '../helpers/metrics'
import { serverProcesses } from '../helpers/process'
import { startServer } from '../helpers/server'
import { queueDelivery, seedWebhook, TEST_WEBHOOK_KEY, webhookOwner } from '../helpers/webhooks'

// The metrics as Prometheus reads them: over HTTP from their own listener, each moved by the real
// thing it counts (requests over HTTP, syncs, webhook deliveries to a real receiver).

const database = await freshDatabase('seeded')
const { db } = database

/** The app served as index.ts serves it: its metrics fed every request's record, on a listener of their own. */
function servedWithMetrics(redis?: Awaited<ReturnType<typeof testRedis>>) {
  const metrics = createMetrics()
  const server = startServer({ db, redis, logger: testLogger, metrics })
  const listener = serveMetrics(metrics, { hostname: '127.0.0.1', port: 0, logger: testLogger })
  afterAll(() => listener.stop(true), 30_000)
  const base = `http://127.0.0.1:${listener.port}`
  return { metrics, server, base, scrape: () => scrape(base) }
}

const served = servedWithMetrics()
const cardId = (await selectRows<{ id: number }>(db, sql`select min(id)::int as id from cards`))[0]!.id

describe('the metrics listener', () => {
  test('answers GET /metrics in the Prometheus text format, and 404 to anything else', async () => {
    const metrics = await served.scrape()
    expect(metrics.value('tcg_build_info', { version: packageJson.version, bun: Bun.version })).toBe(1)
    for (const [path, method] of [
      ['/', 'GET'],
      ['/metrics/x', 'GET'],
      ['/metrics', 'POST'],
    ] as const) {
      const response = await fetch(served.base + path, { method })
      expect(response.status).toBe(404)
      await response.text()
    }
  })

  test("the API's own port does not serve them", async () => {
    const response = await served.server.get('/metrics')
    expect(response.status).toBe(404)
    expect(await response.text()).not.toContain('tcg_')
  })
})

describe.skipIf(!TEST_DATABASE_URL)('a server process (bun src/index.ts)', async () => {
  const servers = serverProcesses()
  const serverDatabase = await freshDatabase('seeded')
  const env = (metricsPort: number) => ({
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    DATABASE_URL: serverDatabase.url,
    PORT: '0',
    HOST: '127.0.0.1',
    METRICS_PORT: String(metricsPort),
    JOBS_ENABLED: 'false',
    LOG_LEVEL: 'info',
  })

  test('serves its metrics on METRICS_PORT, its own process metrics included, and counts what its API answers', async () => {
    // A port free a moment ago: the server binds it next.
    const free = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response('') })
    const metricsPort = free.port!
    await free.stop(true)
    const node = await servers.start(env(metricsPort))
    expect(node.lines.find((line) => line.msg === 'metrics listening')?.url).toBe(`http://127.0.0.1:${metricsPort}/metrics`)
    const health = await fetch(`${node.url}/health`)
    expect(health.status).toBe(200)
    await health.text()
    const metrics = await eventually(async () => {
      const scraped = await scrape(`http://127.0.0.1:${metricsPort}`)
      return scraped.value('tcg_http_requests_total', { method: 'GET', route: '/health', status: '200' }) === 1 && scraped
    })
    expect(metrics.value('process_cpu_seconds_total')).toBeGreaterThan(0)
    expect(metrics.value('tcg_snapshot_cards')).toBeGreaterThan(0)
    expect(metrics.value('tcg_database_up')).toBe(1)
    expect((await fetch(`${node.url}/metrics`)).status).toBe(404)
  }, 60_000)

  test('METRICS_PORT=0 starts no metrics listener', async () => {
    const node = await servers.start(env(0))
    expect(node.lines.some((line) => typeof line.msg === 'string' && line.msg.includes('metrics'))).toBe(false)
  }, 60_000)
})

describe('requests and the quota', () => {
  const route = { method: 'GET', route: '/v1/cards/:id/prices' }
  const requests = (metrics: Exposition, status: number) => metrics.value('tcg_http_requests_total', { ...route, status: String(status) }) ?? 0

  test('a keyed request moves the counter and the latency histogram of its route template, and the quota admits it by tier', async () => {
    const { key } = await accountWithKey(db, 'pro')
    const before = await served.scrape()
    // The first is answered by Elysia, the repeat early: both are counted the same way.
    for (let i = 0; i < 2; i++) {
      const response = await served.server.get(`/v1/cards/${cardId}/prices`, { headers: { 'x-api-key': key } })
      expect(response.status).toBe(200)
      await response.arrayBuffer()
    }
    const after = await eventually(async () => {
      const metrics = await served.scrape()
      return requests(metrics, 200) - requests(before, 200) === 2 && metrics
    })
    const count = (metrics: Exposition) => metrics.value('tcg_http_request_duration_seconds_count', route) ?? 0
    expect(count(after) - count(before)).toBe(2)
    expect(after.value('tcg_http_request_duration_seconds_bucket', { ...route, le: '+Inf' })).toBe(count(after))
    expect(after.value('tcg_http_request_duration_seconds_sum', route)).toBeGreaterThan(0)
    const admitted = (metrics: Exposition, tier: string) => metrics.value('tcg_quota_admitted_total', { tier }) ?? 0
    expect(admitted(after, 'pro') - admitted(before, 'pro')).toBe(2)
    // The first read the key from the database; the repeat found it in the cache.
    const lookups = (metrics: Exposition, result: string) => metrics.value('tcg_key_cache_lookups_total', { result }) ?? 0
    expect(lookups(after, 'miss') - lookups(before, 'miss')).toBe(1)
    expect(lookups(after, 'hit') - lookups(before, 'hit')).toBe(1)
    // Every tier's series exists from the start, at 0 until used.
    expect(after.value('tcg_quota_rejected_total', { tier: 'business' })).toBe(0)
  })

  test('a 429 over the daily quota moves the rejections of its tier, not the admissions', async () => {
    const { key } = await accountWithKey(db, 'free') // 100 a day
    const before = await served.scrape()
    for (let i = 0; i < 100; i++) {
      const response = await served.server.get(`/v1/cards/${cardId}/prices`, { headers: { 'x-api-key': key } })
      expect(response.status).toBe(200)
      await response.arrayBuffer()
    }
    const refused = await served.server.json(`/v1/cards/${cardId}/prices`, key)
    expect(refused.status).toBe(429)
    const after = await eventually(async () => {
      const metrics = await served.scrape()
      return requests(metrics, 429) - requests(before, 429) === 1 && metrics
    })
    const delta = (name: string) => (after.value(name, { tier: 'free' }) ?? 0) - (before.value(name, { tier: 'free' }) ?? 0)
    expect(delta('tcg_quota_admitted_total')).toBe(100)
    expect(delta('tcg_quota_rejected_total')).toBe(1)
  })

  test('an unknown path counts under one `unmatched` template, never its raw path', async () => {
    const response = await served.server.get('/no/such/path/12345')
    expect(response.status).toBe(404)
    await response.text()
    const metrics = await eventually(async () => {
      const scraped = await served.scrape()
      return (scraped.value('tcg_http_requests_total', { method: 'GET', route: 'unmatched', status: '404' }) ?? 0) > 0 && scraped
    })
    expect(metrics.text).not.toContain('12345')
  })
})

describe('the node state read on scrape', () => {
  test('the snapshot gauges say what /ready says', async () => {
    await served.server.ready()
    const ready = await served.server.json('/ready')
    const metrics = await served.scrape()
    const { snapshot } = ready.body
    expect(metrics.value('tcg_snapshot_info', { version: snapshot.version })).toBe(1)
    expect(metrics.value('tcg_snapshot_cards')).toBe(snapshot.cards)
    expect(metrics.value('tcg_snapshot_prices')).toBe(snapshot.prices)
    expect(metrics.value('tcg_snapshot_search_index_bytes')).toBe(snapshot.search_index_bytes)
    expect(metrics.value('tcg_snapshot_search_index_words')).toBe(snapshot.search_index_words)
    expect(metrics.value('tcg_snapshot_build_seconds')).toBe(snapshot.build_ms / 1000)
    expect(metrics.value('tcg_snapshot_search_index_build_seconds')).toBe(snapshot.search_index_ms / 1000)
    expect(metrics.value('tcg_snapshot_built_timestamp_seconds')).toBe(Date.parse(snapshot.built_at) / 1000)
    // The test clock stands still, so the age is the same at both reads.
    expect(metrics.value('tcg_snapshot_age_seconds')).toBe(snapshot.age_seconds)
    expect(metrics.value('tcg_database_up')).toBe(1)
    expect(ready.body.checks.quota).toBe('local')
    expect(metrics.value('tcg_quota_mode', { mode: 'local' })).toBe(1)
    expect(metrics.value('tcg_quota_mode', { mode: 'shared' })).toBe(0)
    // No Redis configured: no Redis gauge at all, rather than a 0 that would alert.
    expect(metrics.names().has('tcg_redis_up')).toBe(false)
  })

  test.skipIf(!TEST_REDIS_URL)('with Redis, its connection and the shared quota', async () => {
    const withRedis = servedWithMetrics(await testRedis())
    await withRedis.server.ready()
    const metrics = await eventually(async () => {
      const scraped = await withRedis.scrape()
      return scraped.value('tcg_quota_mode', { mode: 'shared' }) === 1 && scraped
    })
    expect(metrics.value('tcg_redis_up')).toBe(1)
  })
})

describe('syncs and the marketplace source', async () => {
  const syncDatabase = await freshDatabase('seeded')
  const [game] = await tinySource().listGames()
  const metrics = createMetrics()
  const sync = (source: MarketplaceSource) =>
    runSyncJob(
      { db: syncDatabase.db, source: measuredSource(source, metrics), clock: testClock, logger: testLogger, redis: undefined, alertHook: async () => {}, metrics },
      { job: 'manual-sync', scheduledFor: testClock.now(), gameSlugs: [game!.slug] },
    )
  const read = async () => {
    const listener = serveMetrics(metrics, { hostname: '127.0.0.1', port: 0, logger: testLogger })
    try {
      return await scrape(`http://127.0.0.1:${listener.port}`)
    } finally {
      await listener.stop(true)
    }
  }

  test('a sync run counts by job and outcome with its duration, and every call to the source', async () => {
    await sync(tinySource())
    const after = await read()
    expect(after.value('tcg_sync_runs_total', { job: 'manual-sync', outcome: 'succeeded' })).toBe(1)
    expect(after.value('tcg_sync_run_duration_seconds_count', { job: 'manual-sync' })).toBe(1)
    expect(after.value('tcg_sync_last_success_timestamp_seconds', { job: 'manual-sync' })).toBe(testClock.now().getTime() / 1000)
    expect(after.value('tcg_source_requests_total', { source: 'demo', operation: 'list_games' })).toBe(1)
    expect(after.value('tcg_source_requests_total', { source: 'demo', operation: 'list_sets' })).toBe(1)
    expect(after.value('tcg_source_requests_total', { source: 'demo', operation: 'list_prices' })).toBeGreaterThan(0)
  })

  test('a failing source moves its failure counter by kind, and the run counts as failed', async () => {
    const demo = tinySource()
    const failing: MarketplaceSource = {
      ...demo,
      name: demo.name,
      capabilities: demo.capabilities,
      listGames: () => demo.listGames(),
      listSets: () => Promise.reject(new MarketplaceError('timeout', '/sets', 'no answer within 2000 ms')),
      listProducts: (groupId) => demo.listProducts(groupId),
      listPrices: (groupId, date) => demo.listPrices(groupId, date),
      listSales: (groupId, date) => demo.listSales(groupId, date),
      listListings: (productId) => demo.listListings(productId),
    }
    await sync(failing)
    const after = await read()
    expect(after.value('tcg_source_failures_total', { source: 'demo', operation: 'list_sets', kind: 'timeout' })).toBe(1)
    expect(after.value('tcg_sync_runs_total', { job: 'manual-sync', outcome: 'failed' })).toBe(1)
  })

  test('a run that fails outright counts as `error`', async () => {
    const broken = { ...tinySource(), name: 'demo' as const, capabilities: tinySource().capabilities, listGames: () => Promise.reject(new Error('boom')) }
    await expect(sync(broken as MarketplaceSource)).rejects.toThrow('boom')
    const after = await read()
    expect(after.value('tcg_sync_runs_total', { job: 'manual-sync', outcome: 'error' })).toBe(1)
    expect(after.value('tcg_source_failures_total', { source: 'demo', operation: 'list_games', kind: 'error' })).toBe(1)
  })

  test.skipIf(!syncDatabase.url)("createDeps counts the node's source in the node's metrics", async () => {
    const deps = await createDeps(loadConfig({ DATABASE_URL: syncDatabase.url, LOG_LEVEL: 'silent' }), { source: tinySource(), logger: testLogger })
    afterAll(() => deps.close(), 30_000)
    await deps.source.listGames()
    const { text } = await deps.metrics.exposition()
    expect(text).toContain('tcg_source_requests_total{source="demo",operation="list_games"} 1')
  })
})

describe('webhook deliveries', async () => {
  const box = await createSecretBox(TEST_WEBHOOK_KEY)
  const receiver = await startWebhookReceiver()
  afterAll(() => receiver.stop(), 30_000)
  const owner = await webhookOwner(db)
  const metrics: Metrics = createMetrics()
  const worker = (backoff: (failed: number) => number | null) =>
    createDeliveryWorker(
      { db, clock: systemClock, logger: testLogger, metrics },
      { settings: { secrets: box, targets: { allowPrivateTargets: true } }, isLeader: () => true, backoff },
    )
  const read = async () => {
    const listener = serveMetrics(metrics, { hostname: '127.0.0.1', port: 0, logger: testLogger })
    try {
      return await scrape(`http://127.0.0.1:${listener.port}`)
    } finally {
      await listener.stop(true)
    }
  }
  const outcome = (metrics: Exposition, outcome: string) => metrics.value('tcg_webhook_deliveries_total', { outcome })

  test('each attempt counts by outcome, and the outbox depth is read on scrape', async () => {
    const start = await read()
    expect([outcome(start, 'delivered'), outcome(start, 'retrying'), outcome(start, 'gave_up')]).toEqual([0, 0, 0])

    const delivered = await seedWebhook(db, box, { accountId: owner, url: `${receiver.url}/hooks/ok` })
    await queueDelivery(db, delivered.id)
    await worker(retryBackoff([60_000], 0)).drain()
    expect(outcome(await read(), 'delivered')).toBe(1)

    // A failure with a retry left waits a minute: the entry stays queued, not yet due.
    const retried = await seedWebhook(db, box, { accountId: owner, url: `${receiver.url}/hooks/retried` })
    await queueDelivery(db, retried.id)
    receiver.script([{ kind: 'status', status: 500 }])
    await worker(retryBackoff([60_000], 0)).drain()
    const afterRetry = await read()
    expect(outcome(afterRetry, 'retrying')).toBe(1)
    expect(afterRetry.value('tcg_webhook_queue_entries', { state: 'waiting' })).toBe(1)
    expect(afterRetry.value('tcg_webhook_queue_entries', { state: 'due' })).toBe(0)

    // A failure with no retry left gives up (the webhook is disabled).
    const dead = await seedWebhook(db, box, { accountId: owner, url: `${receiver.url}/hooks/dead` })
    await queueDelivery(db, dead.id)
    receiver.script([{ kind: 'status', status: 500 }])
    await worker(() => null).drain()
    const afterDead = await read()
    expect(outcome(afterDead, 'gave_up')).toBe(1)
    expect(outcome(afterDead, 'delivered')).toBe(1)

    // Queued with no worker running: due now.
    await queueDelivery(db, delivered.id)
    const queued = await read()
    expect(queued.value('tcg_webhook_queue_entries', { state: 'due' })).toBe(1)
    expect(queued.value('tcg_webhook_deliveries_in_flight')).toBe(0)
  })
})

describe('live refreshes of condition prices', () => {
  test('a request that refreshes a card counts as a `request` refresh by outcome', async () => {
    const { key } = await accountWithKey(db, 'pro')
    const before = await served.scrape()
    const answer = await served.server.json(`/v1/cards/${cardId}/prices/conditions`, key)
    expect(answer.status).toBe(200)
    const after = await served.scrape()
    const refreshed = (metrics: Exposition) => metrics.value('tcg_condition_refreshes_total', { trigger: 'request', outcome: 'refreshed' }) ?? 0
    expect(refreshed(after) - refreshed(before)).toBe(1)
  })
})
