import { afterAll, beforeEach, describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { testRedis } from '../../../test/helpers/auth'
import { freshDatabase, selectRows, testClock, testLogger, tinySource } from '../../../test/helpers/db'
import { TEST_NOW } from '../../../test/helpers/env'
import { startFakeMarketplace } from '../../../test/fixtures/fake-marketplace'
import type { MarketplaceSource } from '../ingest/source'
import { createHttpSource } from '../ingest/sources/http'
import { PRIORITY_BONUS_MS, recrawlConditions } from './recrawl'
import { conditionService } from './service'

const database = await freshDatabase('seeded')
const redis = await testRedis()
const marketplace = await startFakeMarketplace({ source: tinySource() })
afterAll(() => marketplace.stop())
const http = createHttpSource({ url: marketplace.url, timeoutMs: 500 })
/** When each listings request was sent: the re-crawl's pace as the marketplace sees it. */
const sentAt: number[] = []
const source: MarketplaceSource = {
  ...http,
  listListings(productId) {
    sentAt.push(performance.now())
    return http.listListings(productId)
  },
}
const deps = { db: database.db, redis, source, clock: testClock, logger: testLogger, config: { marketplaceTimeoutMs: 500 } }
const HOUR = 3_600_000

const ago = (ms: number) => new Date(TEST_NOW.getTime() - ms).toISOString()

/** Every card refreshed an hour ago (too young for the re-crawl), then the given cards dated as asked. */
async function dateRefreshes(dated: Record<number, string>) {
  await database.db.execute(sql`delete from condition_prices`)
  await database.db.execute(sql`delete from condition_refreshes`)
  await database.db.execute(
    sql`insert into condition_refreshes (card_id, refreshed_at, condition_counts) select id, ${ago(HOUR)}::timestamptz, '{}'::jsonb from cards`,
  )
  for (const [cardId, at] of Object.entries(dated)) {
    await database.db.execute(sql`update condition_refreshes set refreshed_at = ${at}::timestamptz where card_id = ${Number(cardId)}`)
  }
}

const refreshedNow = async () =>
  (
    await selectRows<{ card_id: number }>(
      database.db,
      sql`select card_id from condition_refreshes where refreshed_at = ${TEST_NOW.toISOString()}::timestamptz order by card_id`,
    )
  ).map((row) => row.card_id)

const cardsOfPriority = async (priority: number) =>
  (await selectRows<{ id: number }>(database.db, sql`select c.id from cards c join games g on g.id = c.game_id where g.priority = ${priority} order by c.id`)).map(
    (row) => row.id,
  )

beforeEach(() => {
  marketplace.setFault({ kind: 'none' })
  sentAt.length = 0
})

describe('recrawlConditions', () => {
  test('never-refreshed cards first, popular games first among them', async () => {
    await database.db.execute(sql`delete from condition_refreshes`)
    // A window roomy enough that a loaded machine's slower refreshes still fit it (the pacing has its own test).
    const result = await recrawlConditions(deps, { limit: 4, windowMs: 400 })
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
    expect(await recrawlConditions(deps, { limit: 3, windowMs: 300 })).toEqual({ refreshed: 3, failed: 0 })
    expect(marketplace.requests()).toBe(before + 3)
    expect(await refreshedNow()).toEqual([p2a!, p3a!, p2b!].sort((a, b) => a - b))
    expect(await recrawlConditions(deps, { limit: 10, windowMs: 30 })).toEqual({ refreshed: 1, failed: 0 })
    expect(await refreshedNow()).toContain(p3b!)
    expect(await recrawlConditions(deps, { limit: 10, windowMs: 30 })).toEqual({ refreshed: 0, failed: 0 })
  })

  test('spreads its marketplace requests evenly over the window, one at a time, and stops at the end of it', async () => {
    await database.db.execute(sql`delete from condition_refreshes`)
    const started = performance.now()
    expect(await recrawlConditions(deps, { limit: 5, windowMs: 500 })).toEqual({ refreshed: 5, failed: 0 })
    expect(sentAt).toHaveLength(5)
    const gaps = sentAt.slice(1).map((at, i) => at - sentAt[i]!)
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(90) // 500 ms / 5
    expect(sentAt[0]! - started).toBeLessThan(90)
    expect(performance.now() - started).toBeLessThan(1_000)

    // A marketplace slower than the pace: the run ends with its window instead of overlapping the next.
    sentAt.length = 0
    marketplace.setFault({ kind: 'slow', delayMs: 150 })
    expect(await recrawlConditions(deps, { limit: 10, windowMs: 250 })).toEqual({ refreshed: 2, failed: 0 })
  })

  test('a failing marketplace: counted as failed, the stored rows left as they were', async () => {
    const [card] = await cardsOfPriority(3)
    await dateRefreshes({ [card!]: ago(30 * HOUR) })
    marketplace.setFault({ kind: 'status', status: 500 })
    expect(await recrawlConditions(deps, { limit: 1, windowMs: 10 })).toEqual({ refreshed: 0, failed: 1 })
    const [refresh] = await selectRows<{ refreshed_at: string | Date }>(database.db, sql`select refreshed_at from condition_refreshes where card_id = ${card!}`)
    expect(new Date(refresh!.refreshed_at).toISOString()).toBe(ago(30 * HOUR))
  })

  test('takes the single-flight lock: a card being refreshed live is not requested twice', async () => {
    await database.db.execute(sql`delete from condition_refreshes`)
    const [first] = await cardsOfPriority(3)
    const [card] = await selectRows<{ id: number; marketplace_id: number }>(database.db, sql`select id, marketplace_id from cards where id = ${first!}`)
    marketplace.setFault({ kind: 'slow', delayMs: 200 })
    const before = marketplace.requests()
    const live = conditionService(deps).refreshCard({ id: card!.id, marketplaceId: card!.marketplace_id }, { staleBefore: new Date(TEST_NOW.getTime() - 24 * HOUR) })
    await Bun.sleep(20)
    const recrawled = await recrawlConditions(deps, { limit: 1, windowMs: 10 })
    expect((await live) !== 'busy' && (await live as { kind: string }).kind).toBe('refreshed')
    expect(recrawled).toEqual({ refreshed: 0, failed: 0 })
    expect(marketplace.requests()).toBe(before + 1)
  })

  test('a limit of 0 does nothing', async () => {
    const before = marketplace.requests()
    expect(await recrawlConditions(deps, { limit: 0 })).toEqual({ refreshed: 0, failed: 0 })
    expect(marketplace.requests()).toBe(before)
  })
})
