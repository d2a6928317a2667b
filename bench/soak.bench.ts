/**
 * The soak (bench/README.md "Budgets"): two nodes on one PostgreSQL and one Redis behind HAProxy
 * on loopback, every endpoint of the API at a Business rate for SOAK_SECONDS (default 300), a sync
 * at 40% of the run and, at half, the leading node killed with SIGKILL and restarted as an
 * orchestrator would. Judged: no error the kill does not explain, each node's RSS growth after its
 * warm-up, and every account's charges against what it was answered
 * (docs/adr/0124-the-soak-behind-a-real-load-balancer.md).
 *
 *   BENCH_SOAK_DATABASE_URL=postgres://postgres@127.0.0.1:5432/tcg_bench_soak \
 *   BENCH_REDIS_URL=redis://127.0.0.1:6379 bun bench/soak.bench.ts
 *
 * The database is created and seeded with the `small` catalog on the first run. The run's accounts
 * and Redis keys are removed at the end, and every process it started is stopped, also on failure
 * or Ctrl-C. The client (bench/soak-client.ts) runs in its own process. Exits 1 if a budget fails.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import { like, sql } from 'drizzle-orm'
import Redis from 'ioredis'
import { openPostgres, selectRows } from '../src/db/client'
import { accounts } from '../src/db/schema'
import { createAccount } from '../src/modules/auth/accounts'
import { createKey } from '../src/modules/auth/keys'
import { dayKey } from '../src/modules/auth/quota/day'
import { LEASE_FIELD_PREFIX, parseCounters } from '../src/modules/auth/quota/fields'
import { TIER_POLICY } from '../src/modules/auth/tiers'
import { utcDate } from '../src/shared/clock'
import { startWebhookReceiver } from '../test/fixtures/webhook-receiver'
import { eventually } from '../test/helpers/eventually'
import { type Listening, ROOT, stopProcess } from '../test/helpers/process'
import { prepareBenchDatabase, processCpuSeconds, spawnBenchService } from './database'
import { type BudgetRow, reportBudgets } from './report'
import { type BalancedNode, type Balancer, freePort, startBalancer, whenState } from './soak-balancer'
import { COVERED_BY_FLOWS, type SoakKey, type SoakPlan, type SoakRecord, streamOperations } from './soak-client'
import { type AccountCheck, clientCounts, type Kill, p99Between, percentile, quotaVerdict, tallyErrors } from './soak-verdict'

const DATABASE_URL = process.env.BENCH_SOAK_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/tcg_bench_soak'
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'
const SECONDS = Number(process.env.SOAK_SECONDS ?? 300)
/** The main stream's rate: see BUSINESS_ACCOUNTS for why a Business customer base may send it. */
const RATE = Number(process.env.SOAK_RATE ?? 150)
const MAX_REQUESTS = Number(process.env.SOAK_REQUESTS ?? Math.ceil(RATE * SECONDS))
/**
 * Six Business accounts share the stream, one of them hot (40%) so its nodes lease its quota
 * (docs/adr/0024-quota-leases.md); the busiest sends 0.4 × 150 × 300 = 18,000 requests in 5 min,
 * within its 50,000 a day: each account stays inside what its tier sells.
 */
const BUSINESS_WEIGHTS = [40, 12, 12, 12, 12, 12]
const FREE_RATE = 2
const SESSION_CYCLE_SECONDS = 20
/** Share of the run before a node's RSS counts as warm, and before the sync and the kill. */
const WARM_UP = 0.2
const SYNC_AT = 0.4
const KILL_AT = 0.5
/** docs/adr/0124: a node's RSS may grow by at most this much from the end of its warm-up to its end. */
const RSS_GROWTH_MB = 64
const RSS_GROWTH_SHARE = 0.25
/** The client kept up when 99% of its requests went out within this long of their planned time. */
const CLIENT_LAG_MS = 50
const NUDGED_PRINTINGS = 300
/** SOAK_KEEP=1 keeps the plan, the client's records, the day hashes, each node's log (one file per life) and HAProxy's request log (in a temporary folder it names). */
const KEEP = process.env.SOAK_KEEP === '1'
const CONDITION_CARDS = 300

for (const [i, weight] of BUSINESS_WEIGHTS.entries()) {
  const share = (MAX_REQUESTS * weight) / BUSINESS_WEIGHTS.reduce((sum, w) => sum + w, 0)
  if (share > TIER_POLICY.business.dailyQuota) throw new Error(`Business account ${i} would send ${share} requests, over its daily quota`)
}

const emailPrefix = `bench-soak-${process.pid}-`
const redisPrefix = `tcg:bench:soak:${process.pid}:`
const workDir = mkdtempSync(join(tmpdir(), 'tcg-soak-'))
const rows: BudgetRow[] = []
const mb = (n: number) => `${n.toFixed(0)} MB`
const now = () => performance.timeOrigin + performance.now()

console.error('preparing the database')
await prepareBenchDatabase(DATABASE_URL, 'small')
const database = await openPostgres(DATABASE_URL, { max: 4 })
const { db } = database
const select = <T>(query: ReturnType<typeof sql>) => selectRows<T>(db, query)
const redis = new Redis(REDIS_URL, { keyPrefix: redisPrefix })

// ---------------------------------------------------------------------------------------------
// Everything started is stopped at the end, on failure and on Ctrl-C.

const nodes: { name: string; port: number; life: number; process?: Listening }[] = []
let balancer: Balancer | undefined
let client: ReturnType<typeof Bun.spawn> | undefined
let sync: ReturnType<typeof Bun.spawn> | undefined
const receiver = await startWebhookReceiver({ quiet: false })
let cleaned = false
async function cleanUp() {
  if (cleaned) return
  cleaned = true
  client?.kill('SIGKILL')
  sync?.kill('SIGKILL')
  await balancer?.stop().catch(() => {})
  await Promise.all(nodes.map((node) => (node.process ? stopProcess(node.process.child) : undefined)))
  await Promise.all(nodeLogs)
  await receiver.stop()
  await db.delete(accounts).where(like(accounts.email, `${emailPrefix}%`))
  const keys = await redis.keys(`${redisPrefix}*`)
  // keys() answers full names; del() adds the prefix again.
  if (keys.length > 0) await redis.del(...keys.map((key) => key.slice(redisPrefix.length)))
  redis.disconnect()
  await database.close()
  if (KEEP) console.error(`kept the plan, the records and the day hashes in ${workDir}`)
  else rmSync(workDir, { recursive: true, force: true })
}
process.on('SIGINT', () => {
  console.error('interrupted: stopping everything the soak started')
  void cleanUp().finally(() => process.exit(130))
})

// ---------------------------------------------------------------------------------------------
// Accounts, the data the mix draws from, and stale rows the run will refresh.

async function account(name: string, tier: 'business' | 'free', keyCount: number, password = 'soak password 1') {
  const made = await createAccount(db, { email: `${emailPrefix}${name}@example.com`, password, tier })
  const keys: SoakKey[] = []
  for (let i = 0; i < keyCount; i++) {
    const key = await createKey(db, made, `soak ${i}`)
    keys.push({ raw: key.key, id: key.id })
  }
  return { accountId: made.id, email: made.email, password, keys }
}

const nodeEnv = {
  WEBHOOK_SECRET_KEY: Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64'),
  WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  JOBS_ENABLED: 'true',
}

/** With SOAK_KEEP, each node life's log, written once it ends. */
const nodeLogs: Promise<void>[] = []
const startNode = async (node: (typeof nodes)[number]) => {
  const life = ++node.life
  const started = await spawnBenchService(DATABASE_URL, REDIS_URL, redisPrefix, { ...nodeEnv, PORT: String(node.port) }, { keepRest: KEEP })
  node.process = started
  if (KEEP) {
    const head = [...started.text, ...started.lines.map((line) => JSON.stringify(line))].join('\n')
    nodeLogs.push(started.rest.then((rest) => writeFileSync(join(workDir, `${node.name}-${life}.log`), `${head}\n${rest}`)))
  }
  return started
}

const ready = async (node: (typeof nodes)[number]) => {
  const response = await fetch(`http://127.0.0.1:${node.port}/ready`)
  return { status: response.status, body: (await response.json()) as any }
}

interface RssSample {
  node: string
  life: number
  at: number
  mb: number
}

function rssMb(pid: number): number | undefined {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return match ? Number(match[1]) / 1024 : undefined
  } catch {
    return undefined
  }
}

let exitCode = 1
try {
  const business = await Promise.all(BUSINESS_WEIGHTS.map((weight, i) => account(`business-${i}`, 'business', 2).then((made) => ({ ...made, weight }))))
  const free = await account('free', 'free', 1)
  const sessionAccount = business.at(-1)!
  const cardIds = (await select<{ id: number }>(sql`select card_id as id from card_prices group by card_id order by random() limit 500`)).map((row) => row.id)
  const setIds = (await select<{ id: number }>(sql`select id from sets`)).map((row) => row.id)
  const marketplaceIds = (await select<{ id: number }>(sql`select marketplace_id as id from cards order by random() limit 500`)).map((row) => row.id)
  const gameSlugs = (await select<{ slug: string }>(sql`select g.slug from games g where exists (select 1 from cards c where c.game_id = g.id)`)).map((row) => row.slug)
  const names = (await select<{ name: string }>(sql`select name from cards order by random() limit 300`)).map((row) => row.name)
  const conditionCardIds = (await select<{ id: number }>(sql`select id from cards order by random() limit ${CONDITION_CARDS}`)).map((row) => row.id)
  // Rows older than 24 hours are refreshed live when asked for (docs/api.md), so every run refreshes some.
  await db.execute(sql`update condition_refreshes set refreshed_at = now() - interval '25 hours' where card_id = any(${`{${conditionCardIds.join(',')}}`}::int[])`)

  // ---------------------------------------------------------------------------------------------
  // Two nodes and the balancer.

  for (const name of ['node-a', 'node-b']) nodes.push({ name, port: freePort(), life: 0 })
  console.error('starting two nodes')
  for (const node of nodes) await startNode(node)
  await eventually(async () => (await Promise.all(nodes.map(ready))).every((answer) => answer.status === 200), { timeout: 60_000, what: 'both nodes ready' })
  balancer = await startBalancer(
    nodes.map(({ name, port }): BalancedNode => ({ name, port })),
    KEEP ? join(workDir, 'haproxy.log') : undefined,
  )
  console.error(`HAProxy at ${balancer.url} in front of ${nodes.map((node) => `${node.name} (:${node.port})`).join(', ')}`)

  const openapi = (await (await fetch(`${balancer.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> }
  const documented = Object.entries(openapi.paths).flatMap(([path, operations]) => Object.keys(operations).map((method) => `${method.toUpperCase()} ${path}`))

  const plan: SoakPlan = {
    url: balancer.url,
    seconds: SECONDS,
    rate: RATE,
    maxRequests: MAX_REQUESTS,
    business: business.map(({ accountId, keys, weight }) => ({ accountId, keys, weight })),
    free: { accountId: free.accountId, key: free.keys[0]!, rate: FREE_RATE },
    session: {
      accountId: sessionAccount.accountId,
      email: sessionAccount.email,
      password: sessionAccount.password,
      cycleSeconds: SESSION_CYCLE_SECONDS,
      // At most 5 sign-ups an hour from one address (src/modules/auth/login-throttle.ts); the run's Redis prefix is fresh.
      signups: 3,
      signupEmailPrefix: `${emailPrefix}signup-`,
    },
    webhookUrl: `${receiver.url}/hooks/soak`,
    data: { cardIds, setIds, marketplaceIds, gameSlugs, names, conditionCardIds },
    output: join(workDir, 'records.jsonl'),
    seed: Number(process.env.SOAK_SEED ?? 1),
  }
  const covered = new Set([...streamOperations(plan), ...COVERED_BY_FLOWS])
  const missing = documented.filter((operation) => !covered.has(operation))
  if (missing.length > 0) throw new Error(`the mix leaves out documented operations: ${missing.join(', ')}`)
  const planFile = join(workDir, 'plan.json')
  writeFileSync(planFile, JSON.stringify(plan))

  // ---------------------------------------------------------------------------------------------
  // The run: RSS sampled every second, the sync, the kill and the restart.

  const rss: RssSample[] = []
  let clientCpu = 0
  const sampler = setInterval(() => {
    const at = now()
    for (const node of nodes) {
      const value = node.process && node.process.child.exitCode === null && node.process.child.signalCode === null ? rssMb(node.process.child.pid) : undefined
      if (value !== undefined) rss.push({ node: node.name, life: node.life, at, mb: value })
    }
    if (client) {
      const cpu = processCpuSeconds(client.pid)
      if (!Number.isNaN(cpu)) clientCpu = cpu
    }
  }, 1_000)

  // Whether a node counted quotas on its own (Redis failed for it): /ready's `checks.quota`. A
  // hand-over of such counts leaves its batch marker (src/modules/auth/quota/redis-store.ts): when it
  // first shows is when it was written, to a second (its TTL runs to a fixed instant, so it cannot tell).
  const quotaStates = new Map<string, number>()
  const handOverSeen = new Map<string, number>()
  const readiness = setInterval(() => {
    void redis
      .keys(`${redisPrefix}quota-batch:*`)
      .then((keys) => {
        for (const key of keys) if (!handOverSeen.has(key)) handOverSeen.set(key, now())
      })
      .catch(() => {})
    for (const node of nodes) {
      if (!node.process || node.process.child.exitCode !== null || node.process.child.signalCode !== null) continue
      void ready(node)
        .then(({ body }) => quotaStates.set(`${node.name}: ${body.checks.quota}`, (quotaStates.get(`${node.name}: ${body.checks.quota}`) ?? 0) + 1))
        .catch(() => {})
    }
  }, 1_000)

  const leaderAtStart = (await Promise.all(nodes.map(ready))).map((answer, i) => (answer.body.jobs.leader ? nodes[i]!.name : undefined)).find(Boolean)
  console.error(`${SECONDS} s at ${RATE} requests/s (${MAX_REQUESTS} at most), plus the Free account and the session flows; ${leaderAtStart ?? 'no node'} leads`)
  const runStart = now()
  client = Bun.spawn([process.execPath, 'bench/soak-client.ts', planFile], { cwd: ROOT, stdout: 'inherit', stderr: 'inherit' })
  const clientExited = client.exited

  const at = (share: number) => Bun.sleep(Math.max(0, runStart + share * SECONDS * 1000 - now()))

  // The sync: prices of some printings moved at the marketplace since the last sync (stored ones
  // moved off the source's), then `cli sync` as an operator's cron runs it.
  await at(SYNC_AT)
  const versionsBefore = (await Promise.all(nodes.map(ready))).map((answer) => answer.body.snapshot.version)
  await db.execute(sql`update card_prices set market_price = round((market_price * 0.8)::numeric, 2)::float8
    where (card_id, printing) in (select card_id, printing from card_prices where market_price > 1 order by random() limit ${NUDGED_PRINTINGS})`)
  const syncStart = now()
  const syncing = Bun.spawn([process.execPath, 'src/cli.ts', 'sync'], {
    cwd: ROOT,
    env: { ...process.env, ...nodeEnv, DATABASE_URL, REDIS_URL, REDIS_KEY_PREFIX: redisPrefix, LOG_LEVEL: 'warn' },
    stdout: 'ignore',
    stderr: 'pipe',
  })
  sync = syncing
  const [syncCode, syncStderr] = await Promise.all([syncing.exited, new Response(syncing.stderr).text()])
  const syncSeconds = (now() - syncStart) / 1000
  if (syncCode !== 0) throw new Error(`cli sync exited with ${syncCode}: ${syncStderr}`)
  const rebuilt = await eventually(
    async () => {
      const versions = (await Promise.all(nodes.map(ready))).map((answer) => answer.body.snapshot.version)
      return versions.every((version, i) => version !== versionsBefore[i]) && now()
    },
    { timeout: 60_000, interval: 100, what: 'both nodes rebuilding their snapshot after the sync' },
  )
  console.error(`sync: ${syncSeconds.toFixed(1)} s; both nodes serve a new snapshot ${((rebuilt - syncStart) / 1000).toFixed(1)} s after it started`)

  // The kill: the node that leads now, SIGKILL, restarted once the balancer has taken it out.
  await at(KILL_AT)
  const answers = await Promise.all(nodes.map(ready))
  const leaderIndex = answers.findIndex((answer) => answer.body.jobs.leader)
  if (leaderIndex < 0) throw new Error('no node leads the scheduled jobs')
  const victim = nodes[leaderIndex]!
  const survivor = nodes[1 - leaderIndex]!
  const killAt = now()
  victim.process!.child.kill('SIGKILL')
  await victim.process!.child.exited
  const downAt = await whenState(balancer, victim.name, 'DOWN')
  const leaderMovedAt = await eventually(async () => (await ready(survivor)).body.jobs.leader === true && now(), {
    timeout: 60_000,
    interval: 100,
    what: `${survivor.name} taking the lead`,
  })
  const restartAt = now()
  await startNode(victim)
  const listeningAt = now()
  const upAt = await whenState(balancer, victim.name, 'UP')
  const kill: Kill = { server: victim.name, at: killAt, downAt }
  console.error(
    `killed ${victim.name} (the leader); HAProxy took it out after ${((downAt - killAt) / 1000).toFixed(2)} s, ${survivor.name} led after ${((leaderMovedAt - killAt) / 1000).toFixed(1)} s; restarted, listening after ${((listeningAt - restartAt) / 1000).toFixed(1)} s, back in the balancer ${((upAt - killAt) / 1000).toFixed(1)} s after the kill`,
  )

  const clientCode = await clientExited
  clearInterval(sampler)
  clearInterval(readiness)
  const balancerStats = await balancer.stats()
  const runEnd = now()
  if (clientCode !== 0) throw new Error(`the client exited with ${clientCode}`)
  const records = readFileSync(plan.output, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as SoakRecord)

  // ---------------------------------------------------------------------------------------------
  // Quotas: once every live lease is handed back, Redis's day hashes; then, with both nodes
  // stopped (they write out their usage), PostgreSQL's daily rows.

  const day = utcDate(new Date(runStart))
  if (utcDate(new Date()) !== day) throw new Error('the run crossed 00:00 UTC: the quota day changed under it, run it again')
  const accountIds = [...business.map((made) => made.accountId), free.accountId]
  const hashes = await eventually(
    async () => {
      const [seconds, micros] = await redis.time()
      const redisNow = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
      const read = await Promise.all(accountIds.map((id) => redis.hgetall(dayKey(id, day))))
      const live = read.some((hash) => Object.entries(hash).some(([field, deadline]) => field.startsWith(LEASE_FIELD_PREFIX) && Number(deadline) > redisNow))
      return !live && read
    },
    { timeout: 10_000, interval: 100, what: 'every live quota lease handed back' },
  )
  const handOverKeys = await redis.keys(`${redisPrefix}quota-batch:*`)
  const handOvers = handOverKeys.length
  const handOverTimes = handOverKeys.map((key) => handOverSeen.get(key)).map((at) => (at === undefined ? 'after the run' : `${((at - runStart) / 1000).toFixed(0)} s`))
  if (KEEP) writeFileSync(join(workDir, 'hashes.json'), JSON.stringify(Object.fromEntries(accountIds.map((id, i) => [id, hashes[i]]))))
  for (const node of nodes) await stopProcess(node.process!.child)
  const stored = await select<{ account_id: number; requests: number; rejected: number; live_refreshes: number }>(
    sql`select account_id, requests, rejected, live_refreshes from daily_usage where day = ${day}::date and account_id = any(${`{${accountIds.join(',')}}`}::int[])`,
  )

  // ---------------------------------------------------------------------------------------------
  // The verdict.

  const counts = clientCounts(records, kill)
  const checks = accountIds.map((accountId, i): AccountCheck & { stored?: (typeof stored)[number]; liveSeen: number; live: number } => {
    const hash = hashes[i]!
    const counters = parseCounters(hash)
    const seen = counts.get(accountId) ?? { admitted: 0, refused: 0, lostUnits: 0, lastSecondOnKilled: 0 }
    return {
      accountId,
      ...seen,
      used: counters.used,
      rejected: counters.rejected,
      perKey: [...counters.byKey.values()].reduce((sum, n) => sum + n, 0),
      danglingLeases: Object.keys(hash).filter((field) => field.startsWith(LEASE_FIELD_PREFIX)).length,
      stored: stored.find((row) => row.account_id === accountId),
      live: counters.liveRefreshes,
      liveSeen: records.filter((record) => record.account === accountId && record.live).length,
    }
  })
  const stream = records.filter((record) => record.at >= runStart)
  const errors = tallyErrors(records, kill)
  const explainedCount = [...errors.explained.values()].reduce((sum, n) => sum + n, 0)
  const unexplainedCount = [...errors.unexplained.values()].reduce((sum, n) => sum + n, 0)
  const first = p99Between(stream, runStart, runStart + 60_000)
  const last = p99Between(stream, runEnd - 60_000, runEnd)
  const lagP99 = percentile(
    records.map((record) => record.lag),
    0.99,
  )
  const byServer = new Map<string, number>()
  for (const record of records) if (record.server) byServer.set(record.server, (byServer.get(record.server) ?? 0) + 1)
  const victimAnsweredWhileOut = records.filter((record) => record.server === victim.name && record.status !== 0 && record.at > downAt && record.at < listeningAt).length
  const hooks = receiver.received()
  const events = new Map<string, number>()
  for (const hook of hooks) {
    const event = (JSON.parse(hook.body) as { event?: string; type?: string }).event ?? 'other'
    events.set(event, (events.get(event) ?? 0) + 1)
  }

  console.log(`\n## Soak: ${SECONDS} s, ${records.length} requests, two nodes behind HAProxy\n`)
  console.log(
    `${cpus().length} × ${cpus()[0]?.model.trim()}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, load average ${loadavg()
      .map((n) => n.toFixed(2))
      .join(' / ')} at the end; the client used ${((clientCpu / (SECONDS || 1)) * 100).toFixed(0)}% of a core, p99 send lag ${lagP99.toFixed(1)} ms\n`,
  )
  console.log('| operation | requests | p50 ms | p99 ms | statuses |')
  console.log('|---|---|---|---|---|')
  const kinds = [...new Set(records.map((record) => record.kind))].sort()
  for (const kind of kinds) {
    const of = records.filter((record) => record.kind === kind)
    const statuses = new Map<number, number>()
    for (const record of of) statuses.set(record.status, (statuses.get(record.status) ?? 0) + 1)
    const answered = of.filter((record) => record.status !== 0).map((record) => record.ms)
    console.log(
      `| ${kind} | ${of.length} | ${percentile(answered, 0.5).toFixed(1)} | ${percentile(answered, 0.99).toFixed(1)} | ${[...statuses]
        .sort(([a], [b]) => a - b)
        .map(([status, n]) => `${status || 'none'}: ${n}`)
        .join(', ')} |`,
    )
  }
  console.log(
    `\n/ready's quota check, sampled every second: ${[...quotaStates].map(([state, n]) => `${state} ${n}`).join(', ')}; hand-overs of counts taken alone: ${handOvers}${handOvers > 0 ? ` (first seen ${handOverTimes.join(', ')} into the run; the sync started at ${((syncStart - runStart) / 1000).toFixed(0)} s)` : ''}`,
  )
  console.log(
    `HAProxy per node, retries / redispatches / response errors / aborts by the node: ${[...balancerStats].map(([name, row]) => `${name} ${row.wretr} / ${row.wredis} / ${row.eresp} / ${row.srv_abrt}`).join(', ')}`,
  )
  console.log(
    `answers by node: ${[...byServer].map(([name, n]) => `${name} ${n}`).join(', ')}; webhook receiver: ${[...events].map(([event, n]) => `${event} ${n}`).join(', ') || 'nothing'}`,
  )
  console.log(
    `kill: ${victim.name} (the leader) at ${((killAt - runStart) / 1000).toFixed(1)} s; out of HAProxy after ${((downAt - killAt) / 1000).toFixed(2)} s; ${survivor.name} led after ${((leaderMovedAt - killAt) / 1000).toFixed(1)} s; back in HAProxy ${((upAt - killAt) / 1000).toFixed(1)} s after the kill; answers from ${victim.name} while it was out: ${victimAnsweredWhileOut}`,
  )
  console.log('\n| error | count | explained by the kill |')
  console.log('|---|---|---|')
  for (const [label, n] of errors.explained) console.log(`| ${label} | ${n} | yes |`)
  for (const [label, n] of errors.unexplained) console.log(`| ${label} | ${n} | **no** |`)
  for (const example of errors.examples) console.log(`unexplained: ${JSON.stringify(example)}`)

  console.log('\n| node, life | RSS start | after warm-up | peak | end | growth after warm-up |')
  console.log('|---|---|---|---|---|---|')
  const lives = [...new Set(rss.map((sample) => `${sample.node}|${sample.life}`))].map((id) => {
    const samples = rss.filter((sample) => `${sample.node}|${sample.life}` === id)
    const warmAt = samples[0]!.at + WARM_UP * SECONDS * 1000
    const warm = samples.find((sample) => sample.at >= warmAt) ?? samples.at(-1)!
    const end = samples.at(-1)!
    const peak = Math.max(...samples.map((sample) => sample.mb))
    const growth = end.mb - warm.mb
    const bound = Math.max(RSS_GROWTH_MB, warm.mb * RSS_GROWTH_SHARE)
    const [node, life] = id.split('|')
    const label = `${node}, ${life === '1' ? 'first life' : 'after the restart'}`
    console.log(`| ${label} | ${mb(samples[0]!.mb)} | ${mb(warm.mb)} | ${mb(peak)} | ${mb(end.mb)} | ${growth >= 0 ? '+' : ''}${mb(growth)} (bound ${mb(bound)}) |`)
    return { label, growth, bound, warm: warm.mb, end: end.mb, seconds: (end.at - warm.at) / 1000 }
  })

  console.log(
    '\n| account | admitted units | 429 | lost to the kill | Redis used | per-key | rejected | dead leases | PostgreSQL requests / rejected | live refreshes (Redis / seen) | verdict |',
  )
  console.log('|---|---|---|---|---|---|---|---|---|---|---|')
  const verdicts = checks.map((check) => ({ check, verdict: quotaVerdict(check) }))
  for (const { check, verdict } of verdicts) {
    console.log(
      `| ${check.accountId === free.accountId ? 'Free' : check.accountId === business[0]!.accountId ? 'Business (hot)' : 'Business'} ${check.accountId} | ${check.admitted} | ${check.refused} | ${check.lostUnits} | ${check.used} | ${check.perKey} | ${check.rejected} | ${check.danglingLeases} | ${check.stored?.requests ?? 0} / ${check.stored?.rejected ?? 0} | ${check.live} / ${check.liveSeen} | ${verdict.why} |`,
    )
  }
  const freeCheck = checks.find((check) => check.accountId === free.accountId)!

  // ---------------------------------------------------------------------------------------------
  // Budget rows.

  const conditions = `${SECONDS} s, ${RATE} req/s, ${records.length} requests, HAProxy round robin over 2 nodes, 1 sync, 1 leader kill`
  rows.push({
    bench: 'soak',
    measure: `errors, ${conditions}`,
    value: `${unexplainedCount} unexplained; ${explainedCount} explained by the kill (in flight on the killed node)`,
    budget: '0 unexplained',
    pass: unexplainedCount === 0,
  })
  rows.push({
    bench: 'soak',
    measure: 'the kill: balancer and leadership',
    value: `out of HAProxy in ${((downAt - killAt) / 1000).toFixed(2)} s, lead moved in ${((leaderMovedAt - killAt) / 1000).toFixed(1)} s, ${victimAnsweredWhileOut} answers from the dead node while out`,
    budget: 'lead moves; no answer from the dead node while it is out',
    pass: victimAnsweredWhileOut === 0,
  })
  rows.push({ bench: 'soak', measure: 'p99 latency, first and last minute (every operation)', value: `${first.p99.toFixed(1)} ms / ${last.p99.toFixed(1)} ms`, budget: 'reported' })
  for (const life of lives) {
    rows.push({
      bench: 'soak',
      measure: `RSS growth after warm-up, ${life.label} (${life.seconds.toFixed(0)} s)`,
      value: `${mb(life.warm)} → ${mb(life.end)}`,
      budget: `≤ +${mb(life.bound)} (the larger of ${mb(RSS_GROWTH_MB)} and ${RSS_GROWTH_SHARE * 100}%)`,
      pass: life.growth <= life.bound,
    })
  }
  const failedQuotas = verdicts.filter(({ verdict }) => !verdict.pass)
  const exactCount = verdicts.filter(({ verdict }) => verdict.exact).length
  rows.push({
    bench: 'soak',
    measure: `quotas at the end, ${checks.length} accounts (Redis day hashes against the answers)`,
    value: `${exactCount} exact, ${checks.length - exactCount - failedQuotas.length} within the kill's share, ${failedQuotas.length} wrong; ${handOvers} hand-over(s) of counts a node took alone`,
    budget: 'admitted = charged (exact unless the kill explains it)',
    pass: failedQuotas.length === 0,
  })
  rows.push({
    bench: 'soak',
    measure: `Free account at ${FREE_RATE} req/s past its quota of ${TIER_POLICY.free.dailyQuota}`,
    value: `${freeCheck.admitted} admitted, ${freeCheck.refused} refused`,
    budget: `exactly ${TIER_POLICY.free.dailyQuota} admitted`,
    pass: freeCheck.admitted === TIER_POLICY.free.dailyQuota,
  })
  rows.push({
    bench: 'soak',
    measure: 'the client',
    value: `p99 send lag ${lagP99.toFixed(1)} ms, ${((clientCpu / (SECONDS || 1)) * 100).toFixed(0)}% of a core`,
    budget: `p99 send lag ≤ ${CLIENT_LAG_MS} ms (it kept up)`,
    pass: lagP99 <= CLIENT_LAG_MS,
  })
  exitCode = reportBudgets(rows) ? 0 : 1
} catch (error) {
  console.error(error)
  rows.push({ bench: 'soak', measure: 'the run', value: `failed: ${error instanceof Error ? error.message : error}`, budget: 'completes', pass: false })
  reportBudgets(rows)
} finally {
  await cleanUp()
}
process.exit(exitCode)
