/**
 * Price-alert evaluation after the daily sync of the `large` demo catalog, on PostgreSQL, against
 * bench/README.md "Budgets": 10,000 active webhooks evaluated and every alert written to the outbox in ≤ 5 s.
 *
 *   bun bench/webhook-alerts.bench.ts
 *   BENCH_WEBHOOK_DATABASE_URL=postgres://postgres@127.0.0.1:5432/tcg_bench_large bun bench/webhook-alerts.bench.ts
 *
 * Without BENCH_WEBHOOK_DATABASE_URL the run creates `tcg_bench_webhooks`, seeds `large` into it
 * with the CLI (about two minutes) and drops it at the end (BENCH_KEEP=1 keeps it). With it, the
 * named database is used (seeded first if empty) and kept. Each run syncs the day after the
 * catalog's last prices, so a kept database can be run against again.
 *
 * Before the sync, 10,000 webhooks on random priced cards get thresholds from the demo
 * marketplace's next-day prices: about 30% between today's and tomorrow's primary price in the
 * direction of the move (they fire), about 5% just past tomorrow's price on the other side of a
 * move (disarmed at creation, they re-arm), the rest far away. The sync job then runs with the
 * real alert hook, and the hook call alone is timed. Exits 1 if over budget or if the hook's
 * counts differ from the ones the thresholds were placed for.
 */
import { cpus, loadavg } from 'node:os'
import { eq, isNotNull, like, sql } from 'drizzle-orm'
import postgres from 'postgres'
import { openPostgres, selectRows } from '../src/db/client'
import { accounts, cards, games, sets } from '../src/db/schema'
import { runSyncJob } from '../src/jobs/sync-job'
import { primaryPrice } from '../src/modules/catalog/queries'
import { createDemoSource } from '../src/modules/ingest/sources/demo'
import type { AlertHook } from '../src/modules/webhooks/alerts'
import { evaluateAlerts, webhookAlertHook } from '../src/modules/webhooks/alerts'
import { clockWithWall, utcDate } from '../src/shared/clock'
import { createLogger } from '../src/shared/logger'
import { postgresCpuSeconds, prepareBenchDatabase } from './database'
import { type BudgetRow, reportBudgets } from './report'

const OWN_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/tcg_bench_webhooks'
const DATABASE_URL = process.env.BENCH_WEBHOOK_DATABASE_URL ?? OWN_DATABASE_URL
const dropAfter = process.env.BENCH_WEBHOOK_DATABASE_URL === undefined && process.env.BENCH_KEEP !== '1'
const SCALE = 'large'
const WEBHOOKS = 10_000
/** At most 25 webhooks per account (docs/webhooks.md; MAX_WEBHOOKS in src/modules/webhooks/service.ts). */
const PER_ACCOUNT = 25
const BUDGET_S = 5
/** Of the webhooks: the share whose threshold tomorrow's move crosses, and the share it re-arms. */
const FIRING_SHARE = 0.3
const REARMING_SHARE = 0.05
const EMAIL_PREFIX = 'bench-webhook-alerts-'

/** A fixed-seed generator (mulberry32), so every run places the same share of thresholds. */
function random(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

interface PlannedWebhook {
  card_id: number
  condition: 'above' | 'below'
  threshold: number
  armed: boolean
}

const loadBefore = loadavg()
const postgresVersion = await prepareBenchDatabase(DATABASE_URL, SCALE)
const database = await openPostgres(DATABASE_URL, { max: 4 })
const { db } = database
let withinBudgets = false
try {
  await db.delete(accounts).where(like(accounts.email, `${EMAIL_PREFIX}%`))
  const [last] = await selectRows<{ at: Date | string }>(db, sql`select max(last_updated_at) as at from card_prices`)
  const syncInstant = new Date(new Date(last!.at).getTime() + 86_400_000)
  const syncDate = utcDate(syncInstant)
  const source = createDemoSource({ scale: SCALE, now: () => syncInstant })

  // Random priced cards, their primary printing and price now (the catalog's own primary-printing choice).
  const primary = primaryPrice(db)
  // Three times as many candidates as webhooks: enough cards that move to place the firing share on.
  const candidates = await db
    .select({ cardId: cards.id, product: cards.marketplaceId, groupId: sets.marketplaceGroupId, printing: primary.printing, price: primary.marketPrice })
    .from(cards)
    .innerJoin(sets, eq(sets.id, cards.setId))
    .innerJoin(games, eq(games.id, cards.gameId))
    .innerJoinLateral(primary, sql`true`)
    .where(isNotNull(primary.marketPrice))
    .orderBy(sql`md5(${cards.id}::text || ${syncDate})`)
    .limit(3 * WEBHOOKS)

  // Tomorrow's market price as the sync will store it: the reported one, else the last one kept.
  console.error(`reading the demo marketplace's prices for ${syncDate}…`)
  const reported = new Map<string, number | null>()
  for (const groupId of new Set(candidates.map((card) => card.groupId))) {
    for (const price of await source.listPrices(groupId, syncDate)) reported.set(`${price.productId} ${price.printing}`, price.marketPrice)
  }
  const next = random(20_261_120)
  const plan: PlannedWebhook[] = []
  const firing = Math.round(WEBHOOKS * FIRING_SHARE)
  const rearming = Math.round(WEBHOOKS * REARMING_SHARE)
  const quiet = WEBHOOKS - firing - rearming
  let [expectedFired, expectedRearmed, placedQuiet] = [0, 0, 0]
  for (const card of candidates) {
    const before = card.price!
    const after = reported.get(`${card.product} ${card.printing}`) ?? before
    const rising = after > before
    const moved = Math.abs(after - before) >= 0.02
    if (moved && expectedFired < firing) {
      plan.push({ card_id: card.cardId, condition: rising ? 'above' : 'below', threshold: (before + after) / 2, armed: true })
      expectedFired++
    } else if (moved && expectedRearmed < rearming) {
      // Watching the other way, already reached today: disarmed now, the move takes it back to the far side.
      plan.push({ card_id: card.cardId, condition: rising ? 'below' : 'above', threshold: (before + after) / 2, armed: false })
      expectedRearmed++
    } else if (placedQuiet < quiet) {
      const above = next() < 0.5
      const factor = 1.5 + next() * 3
      const threshold = above ? Math.max(before, after) * factor : Math.min(before, after) / factor
      plan.push({ card_id: card.cardId, condition: above ? 'above' : 'below', threshold, armed: true })
      placedQuiet++
    }
  }
  if (plan.length !== WEBHOOKS) throw new Error(`only ${plan.length} webhooks could be placed: too few cards move on ${syncDate}`)

  const accountIds = (
    await selectRows<{ id: number }>(
      db,
      sql`insert into accounts (email, password_hash, tier)
          select ${EMAIL_PREFIX} || ${process.pid} || '-' || n || '@example.com', 'not a hash', 'pro'
          from generate_series(1, ${Math.ceil(plan.length / PER_ACCOUNT)}) n returning id`,
    )
  ).map((row) => row.id)
  const rows = plan.map((webhook, i) => ({ ...webhook, account_id: accountIds[Math.floor(i / PER_ACCOUNT)]! }))
  await db.execute(sql`insert into webhooks (account_id, url, card_id, condition, threshold, secret_ciphertext, armed)
                       select account_id, 'https://hooks.example.com/price', card_id, condition, threshold, 'bench: no secret', armed
                       from json_to_recordset(${JSON.stringify(rows)}::json)
                         as w(account_id int, card_id int, condition text, threshold float8, armed boolean)`)
  await db.execute(sql`analyze webhooks`)

  // The daily sync through the sync job, its alert hook timed alone.
  const logger = createLogger('warn')
  const clock = clockWithWall(() => syncInstant)
  // The hook's own report of what it did, from its log line.
  let reportedByHook = { fired: Number.NaN, rearmed: Number.NaN }
  const hookLogger = createLogger('info', {
    write: (line: string) => {
      const entry = JSON.parse(line)
      if (entry.msg === 'price alerts evaluated') reportedByHook = { fired: entry.fired, rearmed: entry.rearmed }
    },
  })
  const hook = webhookAlertHook({ db, clock, logger: hookLogger })
  let hookTime = { seconds: Number.NaN, postgresCpu: Number.NaN, selfCpu: Number.NaN, cards: 0 }
  const timedHook: AlertHook = async (batch) => {
    const postgresBefore = postgresCpuSeconds()
    const selfBefore = process.cpuUsage()
    const started = performance.now()
    await hook(batch)
    const self = process.cpuUsage(selfBefore)
    hookTime = {
      seconds: (performance.now() - started) / 1000,
      postgresCpu: postgresCpuSeconds() - postgresBefore,
      selfCpu: (self.user + self.system) / 1e6,
      cards: new Set(batch.changes.map((change) => change.cardId)).size,
    }
  }
  console.error(`syncing ${syncDate} with ${plan.length} webhooks…`)
  const syncStarted = performance.now()
  const { changes, summary } = await runSyncJob({ db, source, clock, logger, redis: undefined, alertHook: timedHook }, { job: 'bench-sync', scheduledFor: syncInstant })
  const syncSeconds = (performance.now() - syncStarted) / 1000 - hookTime.seconds
  if (summary.failed > 0) throw new Error(`${summary.failed} games failed to sync`)

  const [written] = await selectRows<{ entries: number }>(
    db,
    sql`select count(*)::int as entries from webhook_deliveries d join webhooks w on w.id = d.webhook_id
        join accounts a on a.id = w.account_id where a.email like ${`${EMAIL_PREFIX}%`}`,
  )
  // The catch-up a new leader runs: every active webhook, with nothing left to do.
  const catchUpStarted = performance.now()
  const catchUp = await evaluateAlerts(db, { now: syncInstant })
  const catchUpSeconds = (performance.now() - catchUpStarted) / 1000

  console.log(
    `\n${cpus().length} cores (${cpus()[0]?.model}), Bun ${Bun.version}, PostgreSQL ${postgresVersion}, ` +
      `load average ${loadBefore[0]!.toFixed(2)} before / ${loadavg()[0]!.toFixed(2)} after`,
  )
  console.log(
    `sync of ${syncDate}: ${changes.length} price changes on ${hookTime.cards} cards, ${syncSeconds.toFixed(1)} s; ` +
      `hook CPU: PostgreSQL ${hookTime.postgresCpu.toFixed(2)} s, this process ${hookTime.selfCpu.toFixed(2)} s\n`,
  )
  const budgets: BudgetRow[] = [
    { bench: 'webhook-alerts', measure: 'active webhooks', value: `${plan.length} (${PER_ACCOUNT} per account)`, budget: `${WEBHOOKS}` },
    {
      bench: 'webhook-alerts',
      measure: 'fired: reported by the hook / outbox entries (placed to fire)',
      value: `${reportedByHook.fired} / ${written!.entries} (${expectedFired}, ${((100 * expectedFired) / plan.length).toFixed(0)}%)`,
      budget: 'equal',
      pass: reportedByHook.fired === expectedFired && written!.entries === expectedFired,
    },
    {
      bench: 'webhook-alerts',
      measure: 're-armed: reported by the hook (placed to re-arm)',
      value: `${reportedByHook.rearmed} (${expectedRearmed})`,
      budget: 'equal',
      pass: reportedByHook.rearmed === expectedRearmed,
    },
    {
      bench: 'webhook-alerts',
      measure: 'evaluation after the sync (hook call)',
      value: `${hookTime.seconds.toFixed(2)} s`,
      budget: `≤ ${BUDGET_S} s`,
      pass: hookTime.seconds <= BUDGET_S,
    },
    {
      bench: 'webhook-alerts',
      measure: "full evaluation, nothing due (a new leader's catch-up)",
      value: `${catchUpSeconds.toFixed(2)} s, ${catchUp.fired} fired, ${catchUp.rearmed} re-armed`,
      budget: 'none fired or re-armed',
      pass: catchUp.fired + catchUp.rearmed === 0,
    },
  ]
  withinBudgets = reportBudgets(budgets)
} finally {
  await db.delete(accounts).where(like(accounts.email, `${EMAIL_PREFIX}%`))
  await database.close()
  if (dropAfter) {
    const url = new URL(DATABASE_URL)
    const name = url.pathname.slice(1)
    url.pathname = '/postgres'
    const admin = postgres(url.toString(), { max: 1, onnotice: () => {} })
    await admin.unsafe(`drop database if exists ${name}`)
    await admin.end()
  }
}
process.exit(withinBudgets ? 0 : 1)
