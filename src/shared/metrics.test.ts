import { describe, expect, test } from 'bun:test'
import { readdirSync } from 'node:fs'
import { collectDefaultMetrics, Registry } from 'prom-client'
import { eventually } from '../../test/helpers/eventually'
import { parseExposition } from '../../test/helpers/metrics'
import { systemClock } from './clock'
import { createMetrics, UNTRUE_ON_BUN } from './metrics'
import type { RequestRecord } from './request-record'

const record = (overrides: Partial<RequestRecord>): RequestRecord => ({
  method: 'GET',
  route: '/v1/cards/:id/prices',
  status: 200,
  durationMs: 1,
  bytes: 10,
  accountId: 1,
  tier: 'pro',
  requestId: 'r1',
  ...overrides,
})

/** Blocks the event loop for `ms` of real time inside a timer callback: what a lag monitor must see. */
const blockLoop = (ms: number) =>
  new Promise<void>((resolve) =>
    systemClock.after(1, () => {
      const until = systemClock.monotonic() + ms
      while (systemClock.monotonic() < until) {}
      resolve()
    }),
  )

describe('request metrics', () => {
  test('counted by method, route template and status, timed into cumulative buckets', async () => {
    const metrics = createMetrics()
    metrics.requestDone(record({ durationMs: 0.3 }))
    metrics.requestDone(record({ durationMs: 7 }))
    metrics.requestDone(record({ status: 304, durationMs: 30_000 }))
    const scraped = parseExposition((await metrics.exposition()).text)
    const route = { method: 'GET', route: '/v1/cards/:id/prices' }
    expect(scraped.value('tcg_http_requests_total', { ...route, status: '200' })).toBe(2)
    expect(scraped.value('tcg_http_requests_total', { ...route, status: '304' })).toBe(1)
    expect(scraped.value('tcg_http_request_duration_seconds_bucket', { ...route, le: '0.0005' })).toBe(1)
    expect(scraped.value('tcg_http_request_duration_seconds_bucket', { ...route, le: '0.005' })).toBe(1)
    expect(scraped.value('tcg_http_request_duration_seconds_bucket', { ...route, le: '0.01' })).toBe(2)
    expect(scraped.value('tcg_http_request_duration_seconds_bucket', { ...route, le: '10' })).toBe(2)
    expect(scraped.value('tcg_http_request_duration_seconds_bucket', { ...route, le: '+Inf' })).toBe(3)
    expect(scraped.value('tcg_http_request_duration_seconds_count', route)).toBe(3)
    expect(scraped.value('tcg_http_request_duration_seconds_sum', route)).toBeCloseTo(30.0073, 6)
  })

  test('a method outside the known ones counts as `other`, so a client cannot mint series', async () => {
    const metrics = createMetrics()
    for (const method of ['BREW', 'PROPFIND', 'X-ANYTHING']) metrics.requestDone(record({ method, route: 'unmatched', status: 404 }))
    const { text } = await metrics.exposition()
    expect(parseExposition(text).value('tcg_http_requests_total', { method: 'other', route: 'unmatched', status: '404' })).toBe(3)
    expect(text).not.toContain('BREW')
  })

  test('two registries never share a count', async () => {
    const [one, two] = [createMetrics(), createMetrics()]
    one.quotaAdmitted.series('pro').inc()
    expect(parseExposition((await two.exposition()).text).value('tcg_quota_admitted_total', { tier: 'pro' })).toBeUndefined()
    expect(parseExposition((await one.exposition()).text).value('tcg_quota_admitted_total', { tier: 'pro' })).toBe(1)
  })

  test('state is read at each scrape, and absent while unknown', async () => {
    const metrics = createMetrics()
    let cards = 10
    expect((await metrics.exposition()).text).not.toMatch(/^tcg_snapshot_cards /m)
    metrics.readState({
      snapshot: () => ({
        version: 'v1',
        built_at: '2026-11-20T12:00:00.000Z',
        age_seconds: 3,
        build_ms: 1500,
        search_index_ms: 400,
        cards,
        prices: 2 * cards,
        search_index_bytes: 99,
        search_index_words: 7,
      }),
      databaseUp: async () => 0,
    })
    cards = 11
    const scraped = parseExposition((await metrics.exposition()).text)
    expect(scraped.value('tcg_snapshot_cards')).toBe(11)
    expect(scraped.value('tcg_snapshot_build_seconds')).toBe(1.5)
    expect(scraped.value('tcg_snapshot_info', { version: 'v1' })).toBe(1)
    expect(scraped.value('tcg_database_up')).toBe(0)
  })
})

describe('process metrics on Bun', () => {
  test('those kept give true values: CPU, resident memory, file descriptors, heap, event loop lag', async () => {
    const metrics = createMetrics({ process: true })
    const cpu = () => {
      const usage = process.cpuUsage()
      return (usage.user + usage.system) / 1e6
    }
    // The lag monitor's histogram starts over at each scrape; CPU counts from the registry's creation,
    // so the CPU between two scrapes is compared with process.cpuUsage read around each of them.
    // Bun's lag monitor starts sampling a turn of the loop after it is enabled: a block before that goes unseen.
    await eventually(async () => parseExposition((await metrics.exposition()).text).value('nodejs_eventloop_lag_mean_seconds')! > 0, {
      what: 'the event loop lag monitor sampling',
    })
    const cpuStart = cpu()
    const first = parseExposition((await metrics.exposition()).text)
    const cpuBefore = cpu()
    await blockLoop(200)
    const cpuMid = cpu()
    const scraped = parseExposition((await metrics.exposition()).text)
    const cpuAfter = cpu()
    const rss = process.memoryUsage.rss()
    const spent = scraped.value('process_cpu_seconds_total')! - first.value('process_cpu_seconds_total')!
    expect(cpuMid - cpuBefore).toBeGreaterThan(0)
    expect(spent).toBeGreaterThanOrEqual(cpuMid - cpuBefore - 1e-6)
    expect(spent).toBeLessThanOrEqual(cpuAfter - cpuStart + 1e-6)
    const resident = scraped.value('process_resident_memory_bytes')!
    expect(resident).toBeGreaterThan(rss / 2)
    expect(resident).toBeLessThan(rss * 2)
    expect(scraped.value('process_open_fds')).toBeGreaterThan(0)
    expect(Math.abs(scraped.value('process_open_fds')! - readdirSync('/proc/self/fd').length)).toBeLessThan(20)
    expect(scraped.value('process_max_fds')).toBeGreaterThan(0)
    expect(scraped.value('process_start_time_seconds')).toBeLessThanOrEqual(systemClock.now().getTime() / 1000)
    expect(scraped.value('nodejs_heap_size_used_bytes')).toBeGreaterThan(0)
    // The monitor records the block when its own timer fires late, on a later turn of the loop.
    await eventually(async () => parseExposition((await metrics.exposition()).text).value('nodejs_eventloop_lag_max_seconds')! > 0.1, {
      what: 'the 200 ms block in the event loop lag',
    })
    for (const name of UNTRUE_ON_BUN) expect(scraped.names().has(name) || scraped.names().has(`${name}_count`)).toBe(false)
  })

  test('those removed are untrue on Bun: handles read 0 with a server open, and a full collection is never observed', async () => {
    const registry = new Registry()
    collectDefaultMetrics({ register: registry })
    const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('') })
    try {
      Bun.gc(true)
      const scraped = parseExposition(await registry.metrics())
      expect(scraped.value('nodejs_active_handles_total')).toBe(0)
      expect(scraped.value('nodejs_gc_duration_seconds_count', { kind: 'major' })).toBeUndefined()
      expect(scraped.value('nodejs_heap_space_size_used_bytes', { space: 'new' })).toBe(0)
    } finally {
      await server.stop(true)
    }
  })
})
