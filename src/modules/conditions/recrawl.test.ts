import { afterAll, beforeEach, describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { startFakeMarketplace } from '../../../test/fixtures/fake-marketplace'
import { testRedis } from '../../../test/helpers/auth'
import { fakeClock } from '../../../test/helpers/clock'
import { freshDatabase, selectRows, testLogger, tinySource } from '../../../test/helpers/db'
import { TEST_NOW } from '../../../test/helpers/env'
import { eventually } from '../../../test/helpers/eventually'
import type { Clock } from '../../shared/clock'
import type { MarketplaceSource } from '../ingest/source'
import { createHttpSource } from '../ingest/sources/http'
import { PRIORITY_BONUS_MS, recrawlConditions } from './recrawl'
import { conditionService } from './service'

const database = await freshDatabase('seeded')
const redis = await testRedis()
const marketplace = await startFakeMarketplace({ source: tinySource() })
afterAll(() => marketplace.stop(), 30_000)

// The re-crawl's pacing and window run on a fake clock (docs/testing.md "Time"): the database,
// Redis and the marketplace take no time on it, so a loaded machine cannot make a run miss its window.
const fake = fakeClock()
/** When each clock sleep in progress (a pacing pause, a slow answer) wakes. */
const wakes: number[] = []
const clock: Clock = {
  ...fake,
  sleep(ms) {
    const at = fake.monotonic() + ms
    wakes.push(at)
    return fake.sleep(ms).finally(() => wakes.splice(wakes.indexOf(at), 1))
  },
}

/** Runs `run` to its end, moving the clock to the next wake each time the code waits on it, and only then. */
async function onClock<T>(run: Promise<T>): Promise<T> {
  let settled = false
  run.then(
    () => (settled = true),
    () => (settled = true),
  )
  for (;;) {
    await eventually(() => settled || wakes.length > 0, { what: 'the re-crawl done or waiting on the clock' })
    if (settled) return run
    await fake.advance(Math.min(...wakes) - fake.monotonic())
  }
}

const http = createHttpSource({ url: marketplace.url, timeoutMs: 500, clock })
/** When each listings request was sent on the clock: the re-crawl's pace as the marketplace sees it. */
const sentAt: number[] = []
/** How long the marketplace takes to answer, on the clock. */
let answerMs = 0
/** Listings requests for these marketplace ids wait for the test to let them through. */
const held = new Map<number, Promise<void>>()
const source: MarketplaceSource = {
  ...http,
  async listListings(productId) {
    sentAt.push(clock.monotonic())
    await held.get(productId)
    if (answerMs > 0) await clock.sleep(answerMs)
    return http.listListings(productId)
  },
}
const deps = { db: database.db, redis, source, clock, logger: testLogger, config: { marketplaceTimeoutMs: 500 } }
const HOUR = 3_600_000

const ago = (ms: number) => new Date(TEST_NOW.getTime() - ms).toISOString()

/** Every card refreshed an hour ago (too young for the re-crawl), then the given cards dated as asked. */
async function dateRefreshes(dated: Record<number, string>) {
  await database.db.execute(sql`delete from condition_prices`)
  await database.db.execute(sql`delete from condition_refreshes`)
  await database.db.execute(sql`insert into condition_refreshes (card_id, refreshed_at, condition_counts) select id, ${ago(HOUR)}::timestamptz, '{}'::jsonb from cards`)
  for (const [cardId, at] of Object.entries(dated)) {
    await database.db.execute(sql`update condition_refreshes set refreshed_at = ${at}::timestamptz where card_id = ${Number(cardId)}`)
  }
}

/** Cards refreshed by the runs of this test (the clock's wall time moves on from TEST_NOW with it). */
const refreshedNow = async () =>
  (
    await selectRows<{ card_id: number }>(database.db, sql`select card_id from condition_refreshes where refreshed_at >= ${TEST_NOW.toISOString()}::timestamptz order by card_id`)
  ).map((row) => row.card_id)

const cardsOfPriority = async (priority: number) =>
  (await selectRows<{ id: number }>(database.db, sql`select c.id from cards c join games g on g.id = c.game_id where g.priority = ${priority} order by c.id`)).map((row) => row.id)

beforeEach(() => {
  marketplace.setFault({ kind: 'none' })
  sentAt.length = 0
  answerMs = 0
  held.clear()
})

describe('recrawlConditions', () => {
  test('never-refreshed cards first, popular games first among them', async () => {
    await database.db.execute(sql`delete from condition_refreshes`)
    const result = await onClock(recrawlConditions(deps, { limit: 4, windowMs: 400 }))
    expect(result).toEqual({ refreshed: 4, failed: 0 })
    expect(await refreshedNow()).toEqual((await cardsOfPriority(3)).slice(0, 4))
    const [rows] = await selectRows<{ n: number }>(database.db, sql`select count(*)::int as n from condition_prices`)
    expect(rows!.n).toBeGreaterThan(0)
  })

  test('then the oldest refresh first, a priority tier counting a day older, cards refreshed within 12 hours left alone', async () => {
    const [p2a, p2b] = await cardsOfPriority(2)
    const [p3a, p3b] = await cardsOfPriority(3)
    expect(PRIORITY_BONUS_MS).toBe(24 * HOUR)
    // Ranks (refreshed minus a day per tier): p2a 3d1h + 2d, p3a 2d + 3d, p2b 2d + 2d, p3b 13h + 3d.
    await dateRefreshes({ [p2a!]: ago(73 * HOUR), [p3a!]: ago(48 * HOUR), [p2b!]: ago(48 * HOUR), [p3b!]: ago(13 * HOUR) })
    const before = marketplace.requests()
    expect(await onClock(recrawlConditions(deps, { limit: 3, windowMs: 300 }))).toEqual({ refreshed: 3, failed: 0 })
    expect(marketplace.requests()).toBe(before + 3)
    expect(await refreshedNow()).toEqual([p2a!, p3a!, p2b!].sort((a, b) => a - b))
    expect(await onClock(recrawlConditions(deps, { limit: 10, windowMs: 30 }))).toEqual({ refreshed: 1, failed: 0 })
    expect(await refreshedNow()).toContain(p3b!)
    expect(await onClock(recrawlConditions(deps, { limit: 10, windowMs: 30 }))).toEqual({ refreshed: 0, failed: 0 })
  })

  test('spreads its marketplace requests evenly over the window, one at a time, and stops at the end of it', async () => {
    await database.db.execute(sql`delete from condition_refreshes`)
    const started = clock.monotonic()
    expect(await onClock(recrawlConditions(deps, { limit: 5, windowMs: 500 }))).toEqual({ refreshed: 5, failed: 0 })
    // 500 ms / 5: one at once, then one every 100 ms, and the run ends with its last request.
    expect(sentAt.map((at) => at - started)).toEqual([0, 100, 200, 300, 400])
    expect(clock.monotonic() - started).toBeLessThan(500)

    // A marketplace slower than the pace: the second request waits for the first answer, and the
    // run ends with its window instead of overlapping the next.
    sentAt.length = 0
    answerMs = 150
    const slowStart = clock.monotonic()
    expect(await onClock(recrawlConditions(deps, { limit: 10, windowMs: 250 }))).toEqual({ refreshed: 2, failed: 0 })
    expect(sentAt.map((at) => at - slowStart)).toEqual([0, 150])
    expect(clock.monotonic() - slowStart).toBe(300)
  })

  test('a failing marketplace: counted as failed, the stored rows left as they were', async () => {
    const [card] = await cardsOfPriority(3)
    await dateRefreshes({ [card!]: ago(30 * HOUR) })
    marketplace.setFault({ kind: 'status', status: 500 })
    expect(await onClock(recrawlConditions(deps, { limit: 1, windowMs: 10 }))).toEqual({ refreshed: 0, failed: 1 })
    const [refresh] = await selectRows<{ refreshed_at: string | Date }>(database.db, sql`select refreshed_at from condition_refreshes where card_id = ${card!}`)
    expect(new Date(refresh!.refreshed_at).toISOString()).toBe(ago(30 * HOUR))
  })

  test('takes the single-flight lock: a card being refreshed live is not requested twice', async () => {
    await database.db.execute(sql`delete from condition_refreshes`)
    // The re-crawl's second card is being refreshed live, its marketplace answer held back.
    const [, second] = await cardsOfPriority(3)
    const [card] = await selectRows<{ id: number; marketplace_id: number }>(database.db, sql`select id, marketplace_id from cards where id = ${second!}`)
    let answer!: () => void
    held.set(card!.marketplace_id, new Promise<void>((resolve) => (answer = resolve)))
    const before = marketplace.requests()
    const live = conditionService(deps).refreshCard({ id: card!.id, marketplaceId: card!.marketplace_id }, { staleBefore: new Date(TEST_NOW.getTime() - 24 * HOUR) })
    await eventually(() => sentAt.length === 1, { what: 'the live refresh asking the marketplace' })
    // The re-crawl refreshes its first card, then waits for its second card's turn.
    const started = clock.monotonic()
    const recrawl = recrawlConditions(deps, { limit: 2, windowMs: 200 })
    await eventually(() => wakes.length > 0, { what: "the re-crawl's pause before the second card" })
    expect(sentAt).toHaveLength(2)
    // Its turn comes while the live refresh still waits for the marketplace: it joins that refresh.
    await fake.advance(Math.min(...wakes) - fake.monotonic())
    expect(clock.monotonic() - started).toBe(100)
    answer()
    expect((await live) !== 'busy' && ((await live) as { kind: string }).kind).toBe('refreshed')
    expect(await onClock(recrawl)).toEqual({ refreshed: 1, failed: 0 })
    expect(sentAt).toHaveLength(2)
    expect(marketplace.requests()).toBe(before + 2)
  })

  test('a limit of 0 does nothing', async () => {
    const before = marketplace.requests()
    expect(await onClock(recrawlConditions(deps, { limit: 0 }))).toEqual({ refreshed: 0, failed: 0 })
    expect(marketplace.requests()).toBe(before)
  })
})
