/**
 * Webhook delivery against bench/README.md "Budgets": ≥ 200 deliveries/s to a local receiver with bounded
 * concurrency. N pending outbox entries over many webhooks; the delivery worker (this process,
 * default concurrency) claims, signs, POSTs and records each; the receiver runs as its own process
 * (test/fixtures/webhook-receiver.ts), answering 200, so it does not share the worker's event loop.
 *
 *   BENCH_DELIVERY_DATABASE_URL=postgres://postgres@127.0.0.1:5432/tcg_bench_delivery bun bench/webhook-delivery.bench.ts
 *
 * BENCH_DELIVERIES (default 5,000) and BENCH_WEBHOOKS (default 500) size the run. The database is
 * created and seeded with the tiny catalog on the first run (the webhooks need a card); the run's
 * account, and with it its webhooks and outbox, is removed at the end. The rate is end to end:
 * from the first claim until the last outcome is committed. Exits 1 if the budget fails.
 */
import { cpus, loadavg, totalmem } from 'node:os'
import { eq, sql } from 'drizzle-orm'
import { openPostgres, selectRows } from '../src/db/client'
import { accounts, webhooks } from '../src/db/schema'
import { createDeliveryWorker } from '../src/modules/webhooks/delivery'
import { createSecretBox } from '../src/modules/webhooks/secret-box'
import { newSigningSecret } from '../src/modules/webhooks/signing'
import { systemClock } from '../src/shared/clock'
import { createLogger } from '../src/shared/logger'
import { remoteReceiver } from '../test/fixtures/webhook-receiver'
import { spawnUntilListening } from '../test/helpers/process'
import { TEST_WEBHOOK_KEY } from '../test/helpers/webhooks'
import { machineCpuSeconds, postgresCpuSeconds, prepareBenchDatabase, processCpuSeconds } from './database'
import { type BudgetRow, reportBudgets } from './report'

const DATABASE_URL = process.env.BENCH_DELIVERY_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/tcg_bench_delivery'
const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 5_000)
const WEBHOOKS = Number(process.env.BENCH_WEBHOOKS ?? 500)
const WARM_UP = 200
const BENCH_EMAIL = 'bench-webhook-delivery@example.com'
const BUDGET_PER_SECOND = 200

const postgresVersion = await prepareBenchDatabase(DATABASE_URL, 'tiny')
const database = await openPostgres(DATABASE_URL, { max: 10 })
const { db } = database
const logger = createLogger('warn')
const receiverProcess = await spawnUntilListening(['test/fixtures/webhook-receiver.ts', '--quiet'], { PATH: process.env.PATH ?? '' })
const receiver = remoteReceiver(receiverProcess.url)
let withinBudgets = false
try {
  // A run killed before its clean-up left its account behind: its webhooks and outbox go with it.
  await db.delete(accounts).where(eq(accounts.email, BENCH_EMAIL))
  const box = await createSecretBox(TEST_WEBHOOK_KEY)
  const [owner] = await db.insert(accounts).values({ email: BENCH_EMAIL, passwordHash: 'not a hash', tier: 'pro' }).returning({ id: accounts.id })
  const [card] = await selectRows<{ id: number }>(db, sql`select min(id)::int as id from cards`)
  const rows = []
  for (let n = 0; n < WEBHOOKS; n++) {
    rows.push({
      accountId: owner!.id,
      url: `${receiver.url}/hooks/${n}`,
      cardId: card!.id,
      condition: 'above',
      threshold: 1e6,
      secretCiphertext: await box.seal(newSigningSecret()),
    })
  }
  const hookIds = (await db.insert(webhooks).values(rows).returning({ id: webhooks.id })).map((row) => row.id)

  /** `count` entries due now, spread round-robin over the webhooks, each with its own event id and a realistic body. */
  const queue = (count: number) =>
    db.execute(sql`
      insert into webhook_deliveries (webhook_id, event_id, event, payload, next_attempt_at)
      select (${`{${hookIds.join(',')}}`}::int[])[1 + (n % ${hookIds.length}::int)], 'msg_bench_' || md5(random()::text || n), 'price_alert',
             json_build_object('event', 'price_alert', 'card_id', ${card!.id}::int, 'card_name', 'Bench card ' || n, 'condition', 'above',
                               'threshold', 10.5, 'current_price', 11.25, 'timestamp', now())::text,
             ${new Date().toISOString()}::timestamptz
      from generate_series(1, ${count}::int) n`)

  const worker = createDeliveryWorker({ db, clock: systemClock, logger }, { settings: { secrets: box, targets: { allowPrivateTargets: true } }, isLeader: () => true })
  // Warm-up: JIT, connection pool, the receiver's first requests.
  await queue(WARM_UP)
  await worker.drain()

  await queue(DELIVERIES)
  const loadBefore = loadavg()
  const before = { self: process.cpuUsage(), postgres: postgresCpuSeconds(), receiver: processCpuSeconds(receiverProcess.child.pid), machine: machineCpuSeconds() }
  const started = performance.now()
  await worker.drain()
  const seconds = (performance.now() - started) / 1000
  const selfUsage = process.cpuUsage(before.self)
  const cpu = {
    worker: (selfUsage.user + selfUsage.system) / 1e6,
    postgres: postgresCpuSeconds() - before.postgres,
    receiver: processCpuSeconds(receiverProcess.child.pid) - before.receiver,
    machine: machineCpuSeconds().busy - before.machine.busy,
    steal: machineCpuSeconds().steal - before.machine.steal,
  }
  await worker.stop()

  const [outcome] = await selectRows<{ delivered: number; pending: number; attempts: number; failed: number; p50: number; p99: number }>(
    db,
    sql`select (select count(*)::int from webhook_deliveries where status = 'delivered') as delivered,
               (select count(*)::int from webhook_deliveries where status <> 'delivered') as pending,
               count(*)::int as attempts, count(*) filter (where outcome <> 'delivered')::int as failed,
               percentile_cont(0.5) within group (order by duration_ms)::float8 as p50,
               percentile_cont(0.99) within group (order by duration_ms)::float8 as p99
        from webhook_attempts`,
  )
  const received = await receiver.count()
  const total = DELIVERIES + WARM_UP
  if (outcome!.delivered !== total || outcome!.pending !== 0 || outcome!.failed !== 0 || received !== total) {
    throw new Error(`not every entry was delivered once: ${JSON.stringify({ ...outcome, received, expected: total })}`)
  }
  const rate = DELIVERIES / seconds
  const perDelivery = (cpuSeconds: number) => `${((cpuSeconds / DELIVERIES) * 1e6).toFixed(0)} µs`

  console.log(
    `\n${cpus().length} cores (${cpus()[0]?.model}), ${Math.round(totalmem() / 2 ** 30)} GiB, Bun ${Bun.version}, PostgreSQL ${postgresVersion}, ` +
      `load average ${loadBefore[0]!.toFixed(2)} before / ${loadavg()[0]!.toFixed(2)} after, CPU stolen ${cpu.steal.toFixed(1)} s`,
  )
  console.log(`${DELIVERIES} entries over ${WEBHOOKS} webhooks (after ${WARM_UP} to warm up), default concurrency, receiver in its own process answering 200\n`)
  const budgets: BudgetRow[] = [
    {
      bench: 'webhook-delivery',
      measure: 'deliveries per second, claim → POST → recorded',
      value: `${rate.toFixed(0)} deliveries/s (${seconds.toFixed(2)} s)`,
      budget: `≥ ${BUDGET_PER_SECOND} deliveries/s`,
      pass: rate >= BUDGET_PER_SECOND,
    },
    { bench: 'webhook-delivery', measure: 'attempt duration (POST to status), p50 / p99', value: `${outcome!.p50} ms / ${outcome!.p99} ms`, budget: 'reported' },
    {
      bench: 'webhook-delivery',
      measure: 'CPU per delivery',
      value:
        `worker ${perDelivery(cpu.worker)}, PostgreSQL ${perDelivery(cpu.postgres)}, receiver ${perDelivery(cpu.receiver)}; ` +
        `machine busy ${((cpu.machine / seconds / cpus().length) * 100).toFixed(0)}%`,
      budget: 'reported',
    },
  ]
  withinBudgets = reportBudgets(budgets)
} finally {
  receiverProcess.child.kill('SIGTERM')
  await receiverProcess.child.exited
  await db.delete(accounts).where(eq(accounts.email, BENCH_EMAIL))
  await database.close()
}
process.exit(withinBudgets ? 0 : 1)
