/**
 * `GET /v1/cards/:id/prices/conditions` on the `medium` demo catalog, through the real service with
 * the Redis quota store, in two ways:
 *
 * - live refresh: every measured request names a card whose condition rows are older than 24 hours
 *   or that was never refreshed, so each one asks the marketplace for the card's listings,
 *   aggregates them and replaces the card's rows in one transaction. Each card is asked for once,
 *   so no request joins another's refresh. A live refresh costs one of the account's daily live
 *   refreshes (Business: 1,000), so the requests are spread over fresh Business accounts, 500
 *   each. Run once with the service's built-in demo marketplace (the budget) and once with the
 *   marketplace over HTTP (`test/fixtures/fake-marketplace.ts` in its own process, serving the
 *   same demo catalog; reported).
 * - cached: 500 cards refreshed just before (within 24 hours), answered from the condition
 *   catalog in PostgreSQL.
 *
 * Every answer is checked: a live run counts only `meta.cached === false` answers with
 * `meta.condition_counts` as live, a cached run only `meta.cached === true`, neither stale; any
 * other answer (stale, 429, 503, a transport error) is counted and fails the budget.
 *
 *   BENCH_MEDIUM_DATABASE_URL=postgres://postgres@127.0.0.1:5432/tcg_bench_medium \
 *   BENCH_REDIS_URL=redis://127.0.0.1:6379 bun bench/conditions.bench.ts
 *
 * Seeds the `medium` demo catalog on its first run (a few minutes). Before each live run the
 * chosen cards' refresh dates are set 25 hours back (cards never refreshed stay so), so the run can
 * be repeated. Exits 1 if a budget fails.
 *
 * The client is this process (fetch, one request in flight per connection, latency timed with
 * performance.now() from the request to the last byte of the body, fractional ms), on the same
 * cores as the service, PostgreSQL, Redis and, in the HTTP run, the marketplace. The scheduled
 * jobs are off in the service (`JOBS_ENABLED=false`): the condition re-crawl would otherwise
 * refresh the chosen cards behind the run's back.
 */
import { cpus, loadavg, totalmem } from 'node:os'
import { sql } from 'drizzle-orm'
import { openPostgres } from '../src/db/client'
import { TIER_POLICY } from '../src/modules/auth/tiers'
import { type Listening, spawnUntilListening } from '../test/helpers/process'
import { benchAccounts, machineCpuSeconds, postgresCpuSeconds, prepareBenchDatabase, processCpuSeconds } from './database'
import { type BudgetRow, reportBudgets } from './report'

const DATABASE_URL = process.env.BENCH_MEDIUM_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/tcg_bench_medium'
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'
const SCALE = 'medium'
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50)
/** Live-refresh requests per measured run, each on its own card, after LIVE_WARMUP of the same kind. */
const LIVE_REQUESTS = Number(process.env.BENCH_LIVE_REQUESTS ?? 5_000)
const LIVE_WARMUP = 500
/** Cached requests per measured run over CACHED_CARDS cards, after CACHED_WARMUP. */
const CACHED_REQUESTS = Number(process.env.BENCH_REQUESTS ?? 20_000)
const CACHED_WARMUP = 5_000
const CACHED_CARDS = 500
/** Live refreshes per account: half the Business allowance, so no account runs out. */
const LIVE_PER_ACCOUNT = 500
if (LIVE_PER_ACCOUNT > TIER_POLICY.business.liveRefreshesPerDay) throw new Error('LIVE_PER_ACCOUNT exceeds the business live refresh allowance')
if (CACHED_REQUESTS + CACHED_WARMUP > TIER_POLICY.business.dailyQuota) throw new Error('BENCH_REQUESTS exceeds the business quota')
/** bench/README.md "Budgets". */
const LIVE_P99_MS = 300
const CACHED_P99_MS = 20

/** `BENCH_ONLY=demo`, `http` or `cached` runs only that scenario. */
const ONLY = process.env.BENCH_ONLY

console.error('preparing the database')
const postgresVersion = await prepareBenchDatabase(DATABASE_URL, SCALE)
console.error('database ready')
const database = await openPostgres(DATABASE_URL, { max: 2 })
const select = async <T>(query: ReturnType<typeof sql>) => (await database.db.execute(query)) as unknown as T[]
const [{ n: cardCount }] = (await select<{ n: number }>(sql`select count(*)::int as n from cards`)) as [{ n: number }]

const runsDemo = !ONLY || ONLY === 'demo'
const runsHttp = !ONLY || ONLY === 'http'
const runsCached = !ONLY || ONLY === 'cached'
const liveCards = LIVE_WARMUP + LIVE_REQUESTS
const wanted = (runsDemo ? liveCards : 0) + (runsHttp ? liveCards : 0) + (runsCached ? CACHED_CARDS : 0)
if (wanted > cardCount) throw new Error(`${wanted} distinct cards wanted, the catalog has ${cardCount}`)
// Distinct cards spread over the whole table, one set per scenario.
const chosen = (await select<{ id: number }>(sql`select id from cards order by random() limit ${wanted}`)).map((r) => r.id)
const take = (count: number) => chosen.splice(0, count)
const demoCards = runsDemo ? take(liveCards) : []
const httpCards = runsHttp ? take(liveCards) : []
const cachedCards = runsCached ? take(CACHED_CARDS) : []

/** Sets the cards' refresh 25 hours back (never-refreshed cards stay so); answers how many had been refreshed. */
async function ageRefreshes(cardIds: number[]): Promise<{ aged: number; never: number }> {
  const ids = `{${cardIds.join(',')}}`
  const aged = await select<{ card_id: number }>(
    sql`update condition_refreshes set refreshed_at = now() - interval '25 hours' where card_id = any(${ids}::int[]) returning card_id`,
  )
  return { aged: aged.length, never: cardIds.length - aged.length }
}

const { freshKey, redisPrefix, cleanup } = benchAccounts(database.db, 'conditions')

/** Keys for `count` live refreshes, LIVE_PER_ACCOUNT per fresh Business account. */
async function liveKeys(count: number): Promise<string[]> {
  const keys: string[] = []
  for (let i = 0; i < Math.ceil(count / LIVE_PER_ACCOUNT); i++) keys.push(await freshKey())
  return Array.from({ length: count }, (_, i) => keys[Math.floor(i / LIVE_PER_ACCOUNT)]!)
}

interface CpuSample {
  service: number
  marketplace: number
  postgres: number
  client: number
  machine: { busy: number; steal: number }
}

function sampleCpu(service: number, marketplace?: number): CpuSample {
  const usage = process.cpuUsage()
  return {
    service: processCpuSeconds(service),
    marketplace: marketplace === undefined ? 0 : processCpuSeconds(marketplace),
    postgres: postgresCpuSeconds(),
    client: (usage.user + usage.system) / 1e6,
    machine: machineCpuSeconds(),
  }
}

// ---------------------------------------------------------------------------------------------
// The client

type Kind = 'live' | 'cached'

interface Counts {
  live: number
  cached: number
  stale: number
  /** Non-2xx answers by status and error code, e.g. `429 LIVE_FETCH_LIMIT`. */
  refused: Map<string, number>
  transport: number
}

interface Measured {
  requests: number
  seconds: number
  rps: number
  p50: number
  p99: number
  max: number
  counts: Counts
  /** Answers not of the expected kind (stale, cached where live was wanted, refused, failed). */
  errors: number
  /** CPU ms per request. */
  cpu: { service: number; marketplace: number; postgres: number; client: number; others: number; steal: number }
}

/**
 * `requests` in order, `connections` at a time (each worker sends its next request when its last
 * answer's body is in), timing each from the call to the last byte of the body.
 */
async function drive(
  base: string,
  requests: { path: string; key: string }[],
  connections: number,
  expected: Kind,
  pids: { service: number; marketplace?: number },
): Promise<Measured> {
  const latencies = new Float64Array(requests.length)
  const counts: Counts = { live: 0, cached: 0, stale: 0, refused: new Map(), transport: 0 }
  let next = 0
  let lastAt = 0
  const before = sampleCpu(pids.service, pids.marketplace)
  const startedAt = performance.now()
  const worker = async () => {
    for (let i = next++; i < requests.length; i = next++) {
      const { path, key } = requests[i]!
      const sentAt = performance.now()
      let status = 0
      let text = ''
      try {
        const response = await fetch(base + path, { headers: { 'x-api-key': key } })
        status = response.status
        text = await response.text()
      } catch {
        status = -1
      }
      lastAt = performance.now()
      latencies[i] = lastAt - sentAt
      if (status === -1) {
        counts.transport++
        continue
      }
      if (status !== 200) {
        let code = ''
        try {
          code = (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? ''
        } catch {}
        const label = `${status}${code ? ` ${code}` : ''}`
        counts.refused.set(label, (counts.refused.get(label) ?? 0) + 1)
        continue
      }
      const { meta } = JSON.parse(text) as { meta: { cached: boolean; stale: boolean; condition_counts?: Record<string, number> } }
      if (meta.stale) counts.stale++
      else if (meta.cached === false && typeof meta.condition_counts === 'object') counts.live++
      else if (meta.cached === true) counts.cached++
      else counts.refused.set('200 unexpected meta', (counts.refused.get('200 unexpected meta') ?? 0) + 1)
    }
  }
  await Promise.all(Array.from({ length: Math.min(connections, requests.length) }, worker))
  const after = sampleCpu(pids.service, pids.marketplace)
  const n = requests.length
  const sorted = latencies.toSorted()
  const seconds = (lastAt - startedAt) / 1000
  const refused = [...counts.refused.values()].reduce((sum, count) => sum + count, 0)
  const errors = n - (expected === 'live' ? counts.live : counts.cached)
  const perRequest = (seconds: number) => (seconds * 1000) / n
  const service = perRequest(after.service - before.service)
  const marketplace = perRequest(after.marketplace - before.marketplace)
  const postgres = perRequest(after.postgres - before.postgres)
  const client = perRequest(after.client - before.client)
  const busy = perRequest(after.machine.busy - before.machine.busy)
  if (refused + counts.transport + counts.stale > 0 || errors > 0) {
    console.error(`  ${errors} of ${n} answers not ${expected}: ${describeCounts(counts)}`)
  }
  return {
    requests: n,
    seconds,
    rps: n / seconds,
    p50: sorted[Math.floor(n * 0.5)]!,
    p99: sorted[Math.floor(n * 0.99)]!,
    max: sorted[n - 1]!,
    counts,
    errors,
    cpu: {
      service,
      marketplace,
      postgres,
      client,
      others: busy - service - marketplace - postgres - client,
      steal: perRequest(after.machine.steal - before.machine.steal),
    },
  }
}

function describeCounts(counts: Counts): string {
  const parts = [`${counts.live} live`, `${counts.cached} cached`]
  if (counts.stale > 0) parts.push(`${counts.stale} stale`)
  for (const [label, count] of counts.refused) parts.push(`${count} × ${label}`)
  if (counts.transport > 0) parts.push(`${counts.transport} transport errors`)
  return parts.join(', ')
}

// ---------------------------------------------------------------------------------------------
// Servers

/** The service on a free port: the `medium` demo marketplace built in, or the one at `marketplaceUrl`; no scheduled jobs. */
function spawnService(marketplaceUrl?: string): Promise<Listening> {
  return spawnUntilListening(['src/index.ts'], {
    ...process.env,
    DATABASE_URL,
    REDIS_URL,
    REDIS_KEY_PREFIX: redisPrefix,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    DEMO_SCALE: SCALE,
    MARKETPLACE_URL: marketplaceUrl ?? '',
    JOBS_ENABLED: 'false',
  })
}

async function stop(server: Listening) {
  server.child.kill()
  await server.child.exited
}

const conditionsPath = (cardId: number) => `/v1/cards/${cardId}/prices/conditions`

/** Requests the fake marketplace has answered so far (its control endpoint). */
async function marketplaceRequests(url: string): Promise<number> {
  return ((await (await fetch(`${url}/_requests`)).json()) as { count: number }).count
}

interface Row {
  scenario: string
  marketplace: string
  cards: string
  accounts: number
  measured: Measured
}
const rows: Row[] = []
const budgets: BudgetRow[] = []
const ms = (n: number) => n.toFixed(1)

/** A live-refresh scenario: LIVE_WARMUP then LIVE_REQUESTS requests, each on its own card, all due for a refresh. */
async function liveScenario(name: string, marketplace: string, cardIds: number[], judged: boolean, marketplaceUrl?: string, marketplacePid?: number) {
  console.error(`${name}: preparing ${cardIds.length} cards and ${Math.ceil(cardIds.length / LIVE_PER_ACCOUNT)} accounts`)
  const { aged, never } = await ageRefreshes(cardIds)
  const keys = await liveKeys(cardIds.length)
  const requests = cardIds.map((id, i) => ({ path: conditionsPath(id), key: keys[i]! }))
  const app = await spawnService(marketplaceUrl)
  try {
    console.error(`${name}: ${LIVE_WARMUP} warm-up requests`)
    await drive(app.url, requests.slice(0, LIVE_WARMUP), CONNECTIONS, 'live', { service: app.child.pid, marketplace: marketplacePid })
    console.error(`${name}: ${LIVE_REQUESTS} measured requests`)
    const measuredCards = cardIds.slice(LIVE_WARMUP)
    const marketplaceBefore = marketplaceUrl === undefined ? 0 : await marketplaceRequests(marketplaceUrl)
    const startedAt = new Date()
    const measured = await drive(app.url, requests.slice(LIVE_WARMUP), CONNECTIONS, 'live', { service: app.child.pid, marketplace: marketplacePid })
    // The refreshes really happened: each measured card's refresh is dated within the run (and, over HTTP, the marketplace was asked once per card).
    const [{ n: stored }] = (await select<{ n: number }>(
      sql`select count(*)::int as n from condition_refreshes where card_id = any(${`{${measuredCards.join(',')}}`}::int[]) and refreshed_at >= ${startedAt.toISOString()}::timestamptz`,
    )) as [{ n: number }]
    const asked = marketplaceUrl === undefined ? undefined : (await marketplaceRequests(marketplaceUrl)) - marketplaceBefore
    const pass = measured.errors === 0 && measured.p99 <= LIVE_P99_MS && stored === LIVE_REQUESTS && (asked === undefined || asked === LIVE_REQUESTS)
    const scenario = `${name}, ${CONNECTIONS} connections`
    rows.push({
      scenario,
      marketplace,
      cards: `${LIVE_REQUESTS} distinct (of the ${cardIds.length} with the warm-up: ${aged} refreshed > 24 h before, ${never} never); ${stored} refreshes stored${asked === undefined ? '' : `, ${asked} marketplace listings requests`}`,
      accounts: new Set(keys.slice(LIVE_WARMUP)).size,
      measured,
    })
    const budget = `≤ ${LIVE_P99_MS} ms p99, every answer live, every refresh stored`
    budgets.push({
      bench: 'conditions',
      measure: `${scenario}: latency and answers`,
      value:
        `${ms(measured.p99)} ms p99, ${measured.requests - measured.errors} of ${measured.requests} answers live, ${stored} refreshes stored` +
        (asked === undefined ? '' : `, ${asked} marketplace listings requests`),
      budget: judged ? budget : `reported (${pass ? 'within' : 'over'} the demo budget, ${budget})`,
      pass: judged ? pass : undefined,
    })
  } finally {
    await stop(app)
  }
}

console.error('starting')
const loadBefore = loadavg()
try {
  if (runsDemo) await liveScenario('live refresh', 'built-in demo (`medium`), in the service', demoCards, true)

  if (runsCached) {
    console.error(`cached: refreshing ${CACHED_CARDS} cards first`)
    const app = await spawnService()
    try {
      const prepKeys = await liveKeys(CACHED_CARDS)
      const prep = await drive(
        app.url,
        cachedCards.map((id, i) => ({ path: conditionsPath(id), key: prepKeys[i]! })),
        10,
        'live',
        { service: app.child.pid },
      )
      if (prep.counts.live + prep.counts.cached !== CACHED_CARDS) throw new Error(`cached: the cards could not all be refreshed: ${describeCounts(prep.counts)}`)
      const key = await freshKey()
      const paths = Array.from({ length: CACHED_WARMUP + CACHED_REQUESTS }, (_, i) => ({ path: conditionsPath(cachedCards[i % CACHED_CARDS]!), key }))
      console.error(`cached: ${CACHED_WARMUP} warm-up requests`)
      await drive(app.url, paths.slice(0, CACHED_WARMUP), CONNECTIONS, 'cached', { service: app.child.pid })
      console.error(`cached: ${CACHED_REQUESTS} measured requests`)
      const measured = await drive(app.url, paths.slice(CACHED_WARMUP), CONNECTIONS, 'cached', { service: app.child.pid })
      const scenario = `cached (refreshed within 24 h), ${CONNECTIONS} connections`
      rows.push({ scenario, marketplace: '(not asked)', cards: `${CACHED_CARDS}, cycled`, accounts: 1, measured })
      budgets.push({
        bench: 'conditions',
        measure: `${scenario}: latency and answers`,
        value: `${ms(measured.p99)} ms p99, ${measured.requests - measured.errors} of ${measured.requests} answers cached`,
        budget: `≤ ${CACHED_P99_MS} ms p99, every answer cached`,
        pass: measured.errors === 0 && measured.p99 <= CACHED_P99_MS,
      })
    } finally {
      await stop(app)
    }
  }

  if (runsHttp) {
    const market = await spawnUntilListening(['test/fixtures/fake-marketplace.ts', '--port', '0', '--scale', SCALE, '--now', new Date().toISOString()], process.env)
    try {
      await liveScenario(
        'live refresh, marketplace over HTTP',
        '`test/fixtures/fake-marketplace.ts` (`medium`), own process, `MARKETPLACE_URL`',
        httpCards,
        false,
        market.url,
        market.child.pid,
      )
    } finally {
      await stop(market)
    }
  }
} finally {
  await cleanup(REDIS_URL)
  await database.close()
}

const load1 = (l: number[]) => l.map((n) => n.toFixed(2)).join(' ')
console.log(
  `\n${cpus().length} cores (${cpus()[0]?.model}), ${Math.round(totalmem() / 2 ** 30)} GiB, Bun ${Bun.version}, PostgreSQL ${postgresVersion}, ` +
    `${SCALE} demo catalog (${cardCount} cards), Redis quota store, scheduled jobs off, load average ${load1(loadBefore)} before / ${load1(loadavg())} after, ` +
    `live runs ${LIVE_REQUESTS} requests after ${LIVE_WARMUP} warm-up (${LIVE_PER_ACCOUNT} per Business account), cached ${CACHED_REQUESTS} after ${CACHED_WARMUP}, ` +
    `latency in ms per request (fetch from this process, performance.now(), to the last byte of the body)\n`,
)
console.log('| scenario | marketplace | cards | accounts | requests | p50 | p99 | max | req/s | answers | errors |')
console.log('|---|---|---|---|---|---|---|---|---|---|---|')
for (const row of rows) {
  const m = row.measured
  console.log(
    `| ${row.scenario} | ${row.marketplace} | ${row.cards} | ${row.accounts} | ${m.requests} | ${ms(m.p50)} | ${ms(m.p99)} | ${ms(m.max)} | ${Math.round(m.rps)} | ` +
      `${describeCounts(m.counts)} | ${m.errors} |`,
  )
}
console.log('\nCPU µs per measured request (from /proc, in 10 ms ticks; "others" is the rest of the machine\'s busy time: Redis, the kernel, other processes):\n')
console.log('| scenario | service | marketplace process | PostgreSQL | client (this process) | others | steal |')
console.log('|---|---|---|---|---|---|---|')
const us = (ms: number) => String(Math.round(ms * 1000))
for (const row of rows) {
  const c = row.measured.cpu
  console.log(`| ${row.scenario} | ${us(c.service)} | ${c.marketplace ? us(c.marketplace) : '-'} | ${us(c.postgres)} | ${us(c.client)} | ${us(c.others)} | ${us(c.steal)} |`)
}
console.log('')
process.exit(reportBudgets(budgets) ? 0 : 1)
