import { afterEach, describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import fc from 'fast-check'
import { freshDatabase, PRIMARY_PRINTING_FIRST, selectRows, testClock, testLogger } from '../../../test/helpers/db'
import { TEST_DATABASE_URL, TEST_NOW } from '../../../test/helpers/env'
import { eventually } from '../../../test/helpers/eventually'
import { type Database, openPostgres } from '../../db/client'
import { runSyncJob } from '../../jobs/sync-job'
import { createDemoSource } from '../../modules/ingest/sources/demo'
import { clockWithWall, utcDate } from '../../shared/clock'
import { createLogger } from '../../shared/logger'
import { catchUpAlerts, evaluateAlerts, webhookAlertHook } from './alerts'

// Prices are set by hand on the seeded tiny catalog (as a sync would commit them), except in the
// end-to-end test, where the demo marketplace's next day moves them through the real sync job.

const LATER = new Date(TEST_NOW.getTime() + 3_600_000)
const SPEC_KEYS = ['event', 'card_id', 'card_name', 'condition', 'threshold', 'current_price', 'timestamp']
const SEALED_SECRET = 'sealed-secret-never-logged'
const byNumber = (a: number, b: number) => a - b

/** The oracle: an alert for every observed price that reached the threshold when the previous observed one had not. */
function crossings(condition: 'above' | 'below', threshold: number, start: number | null, walk: (number | null)[]): number[] {
  const reached = (price: number) => (condition === 'above' ? price >= threshold : price <= threshold)
  const alerts: number[] = []
  let previous = start
  for (const price of walk) {
    if (price === null) continue
    if ((previous === null || !reached(previous)) && reached(price)) alerts.push(price)
    previous = price
  }
  return alerts
}

interface CardFixture {
  id: number
  name: string
  /** Primary first, by the test's own ordering (PRIMARY_PRINTING_FIRST). */
  printings: string[]
}

interface Entry {
  webhook_id: number
  event_id: string
  event: string
  payload: string
  status: string
  next_attempt_ms: number
}

/** Cards, webhooks and outbox reads on one test database, written apart from the code under test. */
async function alertFixture(db: Database) {
  const catalog = await selectRows<CardFixture>(
    db,
    sql`select c.id, c.name, array_agg(cp.printing order by ${PRIMARY_PRINTING_FIRST}, cp.printing) as printings
        from cards c join games g on g.id = c.game_id join card_prices cp on cp.card_id = c.id
        group by c.id, c.name order by c.id`,
  )
  const [account] = await selectRows<{ id: number }>(db, sql`insert into accounts (email, password_hash, tier) values ('alerts@example.com', 'not a hash', 'pro') returning id`)
  const used = new Set<number>()
  const primaryOf = (card: CardFixture) => card.printings[0]!
  const marketPrice = async (card: CardFixture, printing = primaryOf(card)) => {
    const [row] = await selectRows<{ price: number | null }>(db, sql`select market_price as price from card_prices where card_id = ${card.id} and printing = ${printing}`)
    return row!.price
  }
  return {
    catalog,
    primaryOf,
    marketPrice,
    /** A card no other test of this database has used; with at least `printings` printings. */
    freshCard(printings = 1): CardFixture {
      const card = catalog.find((c) => !used.has(c.id) && c.printings.length >= printings)
      if (!card) throw new Error(`no unused card with ${printings} printings left`)
      used.add(card.id)
      return card
    },
    async setPrice(card: CardFixture, price: number | null, printing = primaryOf(card)) {
      await db.execute(sql`update card_prices set market_price = ${price} where card_id = ${card.id} and printing = ${printing}`)
    },
    /** Armed as the decided creation rule says: no price yet, or the price on the far side of the threshold. */
    async addWebhook(card: CardFixture, condition: 'above' | 'below', threshold: number, options: { active?: boolean } = {}) {
      const price = await marketPrice(card)
      const armed = price === null || (condition === 'above' ? price < threshold : price > threshold)
      const [row] = await selectRows<{ id: number }>(
        db,
        sql`insert into webhooks (account_id, url, card_id, condition, threshold, secret_ciphertext, armed, is_active)
            values (${account!.id}, 'https://hooks.example.com/alerts', ${card.id}, ${condition}, ${threshold}, ${SEALED_SECRET},
                    ${armed}, ${options.active ?? true})
            returning id`,
      )
      return row!.id
    },
    async state(webhookId: number) {
      const [row] = await selectRows<{ armed: boolean; triggered_ms: number | null }>(
        db,
        sql`select armed, (extract(epoch from last_triggered_at) * 1000)::float8 as triggered_ms from webhooks where id = ${webhookId}`,
      )
      return row!
    },
    entries(webhookId?: number) {
      return selectRows<Entry>(
        db,
        sql`select webhook_id, event_id, event, payload, status, (extract(epoch from next_attempt_at) * 1000)::float8 as next_attempt_ms
            from webhook_deliveries ${webhookId === undefined ? sql`` : sql`where webhook_id = ${webhookId}`} order by id`,
      )
    },
    async clearWebhooks() {
      await db.execute(sql`delete from webhooks`)
    },
  }
}

const database = await freshDatabase('seeded')
const { db } = database
const fixture = await alertFixture(db)
const { freshCard, setPrice, addWebhook, state, entries } = fixture
const evaluate = (cardIds: number[] | undefined, now = TEST_NOW) => evaluateAlerts(db, { now, cardIds })

// A full evaluation sees every webhook in the database: each test starts with none.
afterEach(fixture.clearWebhooks, 30_000)

describe('an `above` webhook', () => {
  test('fires once when the price reaches exactly the threshold, stays quiet above it, re-arms below it and fires again', async () => {
    const card = freshCard()
    await setPrice(card, 10)
    const webhook = await addWebhook(card, 'above', 12.5)
    expect(await evaluate([card.id])).toEqual({ fired: 0, rearmed: 0 })

    await setPrice(card, 12.5)
    expect(await evaluate([card.id])).toEqual({ fired: 1, rearmed: 0 })
    expect(await entries(webhook)).toHaveLength(1)
    expect(await state(webhook)).toEqual({ armed: false, triggered_ms: TEST_NOW.getTime() })

    // The same prices evaluated again (a second hook call, a catch-up), then a later sync still above.
    expect(await evaluate([card.id])).toEqual({ fired: 0, rearmed: 0 })
    expect(await evaluate(undefined)).toEqual({ fired: 0, rearmed: 0 })
    await setPrice(card, 40)
    expect(await evaluate([card.id])).toEqual({ fired: 0, rearmed: 0 })
    expect(await entries(webhook)).toHaveLength(1)

    await setPrice(card, 12.49)
    expect(await evaluate([card.id])).toEqual({ fired: 0, rearmed: 1 })
    expect(await entries(webhook)).toHaveLength(1)
    expect(await state(webhook)).toEqual({ armed: true, triggered_ms: TEST_NOW.getTime() })

    await setPrice(card, 13)
    expect(await evaluate([card.id], LATER)).toEqual({ fired: 1, rearmed: 0 })
    const written = await entries(webhook)
    expect(written.map((entry) => JSON.parse(entry.payload).current_price)).toEqual([12.5, 13])
    expect(await state(webhook)).toEqual({ armed: false, triggered_ms: LATER.getTime() })
  })

  test('created while the price is already above: no alert until it has gone below and come back', async () => {
    const card = freshCard()
    await setPrice(card, 30)
    const webhook = await addWebhook(card, 'above', 20)
    await setPrice(card, 35)
    expect(await evaluate([card.id])).toEqual({ fired: 0, rearmed: 0 })
    await setPrice(card, 19.99)
    expect(await evaluate([card.id])).toEqual({ fired: 0, rearmed: 1 })
    await setPrice(card, 20)
    expect(await evaluate([card.id])).toEqual({ fired: 1, rearmed: 0 })
    expect(await entries(webhook)).toHaveLength(1)
  })
})

describe('a `below` webhook', () => {
  test('fires once when the price falls to exactly the threshold, stays quiet below it, re-arms above it and fires again at exactly the threshold', async () => {
    const card = freshCard()
    await setPrice(card, 20)
    const webhook = await addWebhook(card, 'below', 12.5)
    expect(await evaluate([card.id])).toEqual({ fired: 0, rearmed: 0 })

    await setPrice(card, 12.5)
    expect(await evaluate([card.id])).toEqual({ fired: 1, rearmed: 0 })
    expect(await state(webhook)).toEqual({ armed: false, triggered_ms: TEST_NOW.getTime() })
    expect(await evaluate([card.id])).toEqual({ fired: 0, rearmed: 0 })
    await setPrice(card, 3)
    expect(await evaluate([card.id])).toEqual({ fired: 0, rearmed: 0 })
    expect(await entries(webhook)).toHaveLength(1)

    await setPrice(card, 12.51)
    expect(await evaluate([card.id])).toEqual({ fired: 0, rearmed: 1 })
    expect(await state(webhook)).toMatchObject({ armed: true })

    await setPrice(card, 12.5)
    expect(await evaluate([card.id], LATER)).toEqual({ fired: 1, rearmed: 0 })
    expect((await entries(webhook)).map((entry) => JSON.parse(entry.payload).current_price)).toEqual([12.5, 12.5])
  })
})

describe('what is not evaluated', () => {
  test('prices moving on the far side of the threshold write nothing', async () => {
    const card = freshCard()
    await setPrice(card, 10)
    const above = await addWebhook(card, 'above', 100)
    const below = await addWebhook(card, 'below', 1)
    for (const price of [50, 99.99, 1.01, 2]) {
      await setPrice(card, price)
      expect(await evaluate([card.id])).toEqual({ fired: 0, rearmed: 0 })
    }
    expect(await entries()).toEqual([])
    expect(await state(above)).toEqual({ armed: true, triggered_ms: null })
    expect(await state(below)).toEqual({ armed: true, triggered_ms: null })
  })

  test('an inactive webhook is left alone, by the hook and by a full evaluation', async () => {
    const card = freshCard()
    await setPrice(card, 10)
    const webhook = await addWebhook(card, 'above', 12, { active: false })
    await setPrice(card, 15)
    expect(await evaluate([card.id])).toEqual({ fired: 0, rearmed: 0 })
    expect(await evaluate(undefined)).toEqual({ fired: 0, rearmed: 0 })
    expect(await entries()).toEqual([])
    expect(await state(webhook)).toEqual({ armed: true, triggered_ms: null })
  })

  test('a non-primary printing crossing the threshold fires nothing; the primary one does, with its own price', async () => {
    const card = freshCard(2)
    const other = card.printings[1]!
    await setPrice(card, 10)
    await setPrice(card, 10, other)
    const webhook = await addWebhook(card, 'above', 12)
    await setPrice(card, 50, other)
    expect(await evaluate([card.id])).toEqual({ fired: 0, rearmed: 0 })
    expect(await entries()).toEqual([])

    await setPrice(card, 12)
    expect(await evaluate([card.id])).toEqual({ fired: 1, rearmed: 0 })
    expect(JSON.parse((await entries(webhook))[0]!.payload).current_price).toBe(12)
  })

  test('a primary printing without a market price: nothing happens, however the other printings stand', async () => {
    const card = freshCard(2)
    await setPrice(card, 10)
    const webhook = await addWebhook(card, 'below', 5)
    await setPrice(card, null)
    await setPrice(card, 1, card.printings[1])
    expect(await evaluate([card.id])).toEqual({ fired: 0, rearmed: 0 })
    expect(await state(webhook)).toEqual({ armed: true, triggered_ms: null })
    await setPrice(card, 4)
    expect(await evaluate([card.id])).toEqual({ fired: 1, rearmed: 0 })
  })

  test('only webhooks on the given cards are evaluated; an empty list evaluates none; no list catches up the rest', async () => {
    const [first, second] = [freshCard(), freshCard()]
    await setPrice(first, 10)
    await setPrice(second, 10)
    const onFirst = await addWebhook(first, 'above', 11)
    const onSecond = await addWebhook(second, 'above', 11)
    await setPrice(first, 11)
    await setPrice(second, 11)

    expect(await evaluate([first.id])).toEqual({ fired: 1, rearmed: 0 })
    expect(await state(onSecond)).toEqual({ armed: true, triggered_ms: null })
    expect(await entries(onSecond)).toEqual([])
    expect(await evaluate([])).toEqual({ fired: 0, rearmed: 0 })

    expect(await evaluate(undefined, LATER)).toEqual({ fired: 1, rearmed: 0 })
    expect(await state(onSecond)).toEqual({ armed: false, triggered_ms: LATER.getTime() })
    expect(await entries(onFirst)).toHaveLength(1)
  })
})

describe("a new leader's catch-up", () => {
  test('evaluates every active webhook, whatever card it watches, and wakes the worker once for all', async () => {
    const cards = [freshCard(), freshCard()]
    const webhooks = []
    for (const card of cards) {
      await setPrice(card, 10)
      webhooks.push(await addWebhook(card, 'below', 8))
      await setPrice(card, 7.5)
    }
    const wakeUps: number[] = []
    const deps = { db, clock: clockWithWall(() => LATER), logger: testLogger }
    expect(await catchUpAlerts(deps, { onAlerts: (fired) => wakeUps.push(fired) })).toEqual({ fired: 2, rearmed: 0 })
    expect(wakeUps).toEqual([2])
    for (const webhook of webhooks) expect(await state(webhook)).toEqual({ armed: false, triggered_ms: LATER.getTime() })
    expect(await catchUpAlerts(deps, { onAlerts: (fired) => wakeUps.push(fired) })).toEqual({ fired: 0, rearmed: 0 })
    expect(wakeUps).toEqual([2])
  })
})

describe('the outbox entry', () => {
  test("is the spec's payload in the spec's key order, as compact JSON, pending and due now", async () => {
    const card = freshCard()
    // A name JSON must escape, to check card_name is the card's own, byte for byte.
    const name = 'Jace "the" Mind\\Sculptor — 雪 ☃\u0001'
    await db.execute(sql`update cards set name = ${name} where id = ${card.id}`)
    await setPrice(card, 2)
    const webhook = await addWebhook(card, 'above', 2.675)
    await setPrice(card, 3)
    await evaluate([card.id], LATER)

    const [entry, ...more] = await entries(webhook)
    expect(more).toEqual([])
    expect(entry!.event).toBe('price_alert')
    expect(entry!.status).toBe('pending')
    expect(entry!.next_attempt_ms).toBe(LATER.getTime())
    const payload = JSON.parse(entry!.payload)
    expect(Object.keys(payload)).toEqual(SPEC_KEYS)
    expect(payload).toEqual({
      event: 'price_alert',
      card_id: card.id,
      card_name: name,
      condition: 'above',
      threshold: 2.675,
      current_price: 3,
      timestamp: LATER.toISOString(),
    })
    expect(Number.isInteger(payload.card_id)).toBe(true)
    // Compact, numbers as JavaScript prints them: re-serialising the parsed payload gives the same bytes.
    expect(entry!.payload).toBe(JSON.stringify(payload))
    expect(entry!.payload).toContain('"threshold":2.675,"current_price":3,')
  })

  test('every alert gets its own msg_ event id', async () => {
    const card = freshCard()
    await setPrice(card, 1)
    const webhooks = []
    for (const threshold of [1.5, 2, 2.5, 3, 3.5]) webhooks.push(await addWebhook(card, 'above', threshold))
    await addWebhook(card, 'above', 50)
    await setPrice(card, 4)
    expect(await evaluate([card.id])).toEqual({ fired: 5, rearmed: 0 })
    const written = await entries()
    expect(written.map((entry) => entry.webhook_id).sort(byNumber)).toEqual(webhooks.sort(byNumber))
    for (const entry of written) expect(entry.event_id).toMatch(/^msg_[A-Za-z0-9_-]{22}$/)
    expect(new Set(written.map((entry) => entry.event_id)).size).toBe(5)
    expect(written.map((entry) => JSON.parse(entry.payload).threshold).sort(byNumber)).toEqual([1.5, 2, 2.5, 3, 3.5])
  })
})

describe('atomicity', () => {
  test('two evaluations of the same crossings at once write each alert once', async () => {
    // On PostgreSQL, two pools as two processes would have; embedded, one connection serialises them.
    const pools = TEST_DATABASE_URL ? await Promise.all([openPostgres(database.url!, { max: 1 }), openPostgres(database.url!, { max: 1 })]) : []
    const [left, right] = TEST_DATABASE_URL ? pools.map((pool) => pool.db) : [db, db]
    try {
      const card = freshCard()
      await setPrice(card, 10)
      const watched = [
        { condition: 'above' as const, threshold: 11 },
        { condition: 'above' as const, threshold: 12 },
        { condition: 'below' as const, threshold: 9 },
      ]
      const webhooks = []
      for (const { condition, threshold } of watched) webhooks.push(await addWebhook(card, condition, threshold))
      const walk = [12, 8, 12, 10.5, 11.5, 8.5, 13, 7, 14]
      for (let step = 0; step < walk.length; step++) {
        await setPrice(card, walk[step]!)
        const results = await Promise.all([left, right].map((side) => evaluateAlerts(side!, { now: TEST_NOW, cardIds: [card.id] })))
        const crossingNow = watched.filter(
          ({ condition, threshold }) => crossings(condition, threshold, 10, walk.slice(0, step + 1)).length > crossings(condition, threshold, 10, walk.slice(0, step)).length,
        )
        expect(results[0]!.fired + results[1]!.fired).toBe(crossingNow.length)
      }
      for (let i = 0; i < watched.length; i++) {
        const { condition, threshold } = watched[i]!
        expect(await entries(webhooks[i]!)).toHaveLength(crossings(condition, threshold, 10, walk).length)
      }
    } finally {
      await Promise.all(pools.map((pool) => pool.close()))
    }
  })

  test.skipIf(!TEST_DATABASE_URL)(
    'two processes blocked on the same webhook row: the one that goes second finds the crossing fired',
    async () => {
      const [first, second, holder] = await Promise.all([1, 2, 3].map(() => openPostgres(database.url!, { max: 1 })))
      try {
        const card = freshCard()
        await setPrice(card, 10)
        const webhook = await addWebhook(card, 'above', 11)
        await setPrice(card, 11)

        // A third connection holds the row until both evaluations are waiting for it, so both
        // started before either could write.
        let release!: () => void
        const released = new Promise<void>((resolve) => (release = resolve))
        let locked!: () => void
        const isLocked = new Promise<void>((resolve) => (locked = resolve))
        const holding = holder!.db.transaction(async (tx) => {
          await tx.execute(sql`select id from webhooks where id = ${webhook} for update`)
          locked()
          await released
        })
        await isLocked
        const racing = [first!, second!].map((handle) => evaluateAlerts(handle.db, { now: TEST_NOW, cardIds: [card.id] }))
        const waiting = async () =>
          (await selectRows<{ n: number }>(db, sql`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`))[0]!.n
        await eventually(async () => (await waiting()) >= 2, { what: 'both evaluations waiting for the row' })
        release()
        await holding
        const results = await Promise.all(racing)
        expect(results.map((result) => result.fired).sort()).toEqual([0, 1])
        expect(await entries(webhook)).toHaveLength(1)
        expect(await state(webhook)).toMatchObject({ armed: false })
      } finally {
        await Promise.all([first, second, holder].map((handle) => handle!.close()))
      }
    },
    30_000,
  )

  /** A database of its own whose outbox refuses alerts until `allow()`, with one webhook due to fire and one to re-arm. */
  async function outboxRefusingAlerts() {
    const isolated = await freshDatabase('seeded')
    const own = await alertFixture(isolated.db)
    const [firing, rearming, unwatched] = [own.freshCard(), own.freshCard(), own.freshCard()]
    await own.setPrice(firing, 10)
    await own.setPrice(rearming, 10)
    const fires = await own.addWebhook(firing, 'above', 11)
    const rearms = await own.addWebhook(rearming, 'above', 9)
    await own.setPrice(firing, 11)
    await own.setPrice(rearming, 8)
    await isolated.db.execute(sql`alter table webhook_deliveries add constraint test_refuses_alerts check (event <> 'price_alert')`)
    const unchanged = async () => {
      expect(await own.state(fires)).toEqual({ armed: true, triggered_ms: null })
      expect(await own.state(rearms)).toEqual({ armed: false, triggered_ms: null })
      expect(await own.entries()).toEqual([])
    }
    const allow = () => isolated.db.execute(sql`alter table webhook_deliveries drop constraint test_refuses_alerts`).then(() => {})
    return { db: isolated.db, own, cardIds: [firing.id, rearming.id], unwatched, unchanged, allow }
  }
  const failureOf = (evaluation: Promise<unknown>) =>
    evaluation.then(
      () => undefined,
      (error: Error) => error,
    )

  test('an outbox write that fails leaves every webhook as it was; the next evaluation fires exactly once', async () => {
    const { db: own, cardIds, unchanged, allow, own: fixtureOf } = await outboxRefusingAlerts()
    const failure = await failureOf(evaluateAlerts(own, { now: TEST_NOW, cardIds }))
    expect(String(failure?.cause)).toContain('test_refuses_alerts')
    await unchanged()

    await allow()
    expect(await evaluateAlerts(own, { now: TEST_NOW, cardIds })).toEqual({ fired: 1, rearmed: 1 })
    expect(await evaluateAlerts(own, { now: TEST_NOW, cardIds })).toEqual({ fired: 0, rearmed: 0 })
    expect(await fixtureOf.entries()).toHaveLength(1)
  })

  test("after a failed hook call, the hook's next call evaluates every webhook, whatever cards its batch brings", async () => {
    const { db: own, cardIds, unwatched, unchanged, allow, own: fixtureOf } = await outboxRefusingAlerts()
    const wakeUps: number[] = []
    const hook = webhookAlertHook({ db: own, clock: testClock, logger: testLogger }, { onAlerts: (fired) => wakeUps.push(fired) })
    const batch = (ids: number[]) => ({
      job: 'manual-sync',
      runId: 1,
      changes: ids.map((cardId) => ({ cardId, printing: 'Normal', previousPrice: 1, newPrice: 2 })),
    })
    expect(String((await failureOf(hook(batch(cardIds))))?.cause)).toContain('test_refuses_alerts')
    await unchanged()
    expect(wakeUps).toEqual([])

    await allow()
    await hook(batch([unwatched.id]))
    expect(wakeUps).toEqual([1])
    const written = await fixtureOf.entries()
    expect(written.map((entry) => JSON.parse(entry.payload).card_id)).toEqual([cardIds[0]])
    // Caught up: the next call is back to its batch's cards only.
    const elsewhere = fixtureOf.freshCard()
    await fixtureOf.setPrice(elsewhere, 10)
    await fixtureOf.addWebhook(elsewhere, 'below', 9)
    await fixtureOf.setPrice(elsewhere, 9)
    await hook(batch([unwatched.id]))
    expect(wakeUps).toEqual([1])
    await hook(batch([elsewhere.id]))
    expect(wakeUps).toEqual([1, 1])
    expect(await fixtureOf.entries()).toHaveLength(2)
  })
})

describe('after a sync, through the sync job and its alert hook', () => {
  test("the demo marketplace's next day fires the webhooks whose thresholds its moves cross, and only those", async () => {
    const synced = await freshDatabase('seeded')
    const own = await alertFixture(synced.db)
    const nextDay = new Date(TEST_NOW.getTime() + 86_400_000)

    // Tomorrow's primary prices, read from the demo marketplace itself.
    const listed = await selectRows<{ id: number; product: number; group_id: number }>(
      synced.db,
      sql`select c.id, c.marketplace_id as product, s.marketplace_group_id as group_id from cards c join sets s on s.id = c.set_id`,
    )
    const tomorrowSource = createDemoSource({ scale: 'tiny', now: () => nextDay })
    const tomorrow = new Map<string, number | null>()
    for (const groupId of new Set(listed.map((row) => row.group_id))) {
      for (const price of await tomorrowSource.listPrices(groupId, utcDate(nextDay))) tomorrow.set(`${price.productId} ${price.printing}`, price.marketPrice)
    }
    const moves = []
    for (const row of listed) {
      const card = own.catalog.find((c) => c.id === row.id)
      if (!card) continue
      const before = await own.marketPrice(card)
      const after = tomorrow.get(`${row.product} ${own.primaryOf(card)}`)
      if (before !== null && after !== null && after !== undefined && Math.abs(after - before) >= 0.02) moves.push({ card, before, after })
    }
    const rising = moves.filter((move) => move.after > move.before).slice(0, 3)
    const falling = moves.filter((move) => move.after < move.before).slice(0, 3)
    expect(rising.length).toBe(3)
    expect(falling.length).toBe(3)

    const crossing = new Map<number, number>()
    for (const move of rising) crossing.set(await own.addWebhook(move.card, 'above', (move.before + move.after) / 2), move.after)
    for (const move of falling) crossing.set(await own.addWebhook(move.card, 'below', (move.before + move.after) / 2), move.after)
    const quiet = []
    for (const move of [...rising, ...falling]) {
      quiet.push(await own.addWebhook(move.card, 'above', Math.max(move.before, move.after) * 10 + 100))
      quiet.push(await own.addWebhook(move.card, 'below', Math.min(move.before, move.after) / 10))
    }

    const logged: string[] = []
    const logger = createLogger('info', { write: (line: string) => void logged.push(line) })
    const wakeUps: number[] = []
    const syncAt = async (now: Date) => {
      const clock = clockWithWall(() => now)
      const hook = webhookAlertHook({ db: synced.db, clock, logger }, { onAlerts: (fired) => wakeUps.push(fired) })
      return runSyncJob(
        { db: synced.db, source: createDemoSource({ scale: 'tiny', now: () => now }), clock, logger: testLogger, redis: undefined, alertHook: hook },
        { job: 'manual-sync', scheduledFor: now },
      )
    }

    await syncAt(TEST_NOW)
    expect(await own.entries()).toEqual([])
    const { changes } = await syncAt(nextDay)
    expect(changes.length).toBeGreaterThan(0)

    const written = await own.entries()
    expect(written.map((entry) => entry.webhook_id).sort(byNumber)).toEqual([...crossing.keys()].sort(byNumber))
    for (const entry of written) {
      const payload = JSON.parse(entry.payload)
      expect(payload.current_price).toBe(crossing.get(entry.webhook_id)!)
      expect(payload.card_name).toBe(own.catalog.find((card) => card.id === payload.card_id)!.name)
      expect(payload.timestamp).toBe(nextDay.toISOString())
    }
    for (const webhook of quiet) expect(await own.state(webhook)).toEqual({ armed: true, triggered_ms: null })
    expect(wakeUps).toEqual([6])
    const evaluated = logged.map((line) => JSON.parse(line)).filter((line) => line.msg === 'price alerts evaluated')
    expect(evaluated.map((line) => line.fired)).toEqual([0, 6])
    expect(logged.join('')).not.toContain(SEALED_SECRET)
  }, 120_000)
})

describe('property: alerts match the crossings', () => {
  // Half-dollar steps land on the threshold often; cents exercise the rest.
  const price = fc.oneof(
    fc.integer({ min: 0, max: 20 }).map((n) => n / 2),
    fc.integer({ min: 1, max: 1000 }).map((n) => n / 100),
  )

  test('for a random walk of the primary price, one entry per crossing in the webhook direction, at the crossing price', async () => {
    const card = freshCard()
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('above' as const, 'below' as const),
        price,
        fc.option(price, { freq: 5 }),
        fc.array(fc.record({ price: fc.option(price, { freq: 8 }), evaluations: fc.integer({ min: 1, max: 2 }) }), { maxLength: 12 }),
        async (condition, threshold, start, walk) => {
          await fixture.clearWebhooks()
          await setPrice(card, start)
          const webhook = await addWebhook(card, condition, threshold)
          for (const step of walk) {
            await setPrice(card, step.price)
            for (let i = 0; i < step.evaluations; i++) await evaluate([card.id])
          }
          const written = (await entries(webhook)).map((entry) => JSON.parse(entry.payload).current_price)
          expect(written).toEqual(
            crossings(
              condition,
              threshold,
              start,
              walk.map((step) => step.price),
            ),
          )
        },
      ),
      { numRuns: 40 },
    )
  }, 120_000)
})
