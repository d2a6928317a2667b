import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { freshDatabase, selectRows } from '../../../test/helpers/db'
import { TEST_DATABASE_URL } from '../../../test/helpers/env'
import { eventually } from '../../../test/helpers/eventually'
import { openPostgres } from '../../db/client'
import { loadSnapshotSource, type SnapshotSource } from './repo'

/** The rows read, as objects: Price objects, and cards as read. */
const pricesOf = (source: SnapshotSource) => Array.from({ length: source.prices.length }, (_, row) => source.prices.price(row))
const cardsOf = (source: SnapshotSource) => Array.from({ length: source.cards.length }, (_, row) => source.cards.fields(row))

// Under PGlite both reads are the same SELECTs.
const database = TEST_DATABASE_URL ? await freshDatabase('seeded') : undefined

describe.skipIf(!database)('snapshot source', () => {
  test('binary COPY reads the very cards and prices the SELECTs do, keys in the same order', async () => {
    const db = database!.db
    // Every nullable price column null somewhere, as a printing never sold gives, and a source that
    // does not report listing prices.
    await db.execute(sql`update card_prices set market_price = null, market_price_as_of = null, price_change_24h = null,
                                               price_change_7d = null, price_change_30d = null
                         where card_id in (select id from cards order by id limit 5)`)
    await db.execute(sql`update card_prices set low_price = null, median_price = null, lowest_with_shipping = null
                         where card_id in (select id from cards order by id desc limit 5)`)
    const viaCopy = await loadSnapshotSource(db)
    const viaSelect = await loadSnapshotSource(db, { viaCopy: false })
    const prices = pricesOf(viaCopy)
    expect(prices.length).toBeGreaterThan(100)
    expect(prices.filter((price) => price.market_price === null && price.price_change_30d === null).length).toBeGreaterThanOrEqual(5)
    expect(prices.some((price) => price.buylist_price === null)).toBe(true)
    const unreported = prices.filter((price) => price.low_price === null && price.median_price === null && price.lowest_with_shipping === null)
    expect(unreported.length).toBeGreaterThanOrEqual(5)
    const cards = cardsOf(viaCopy)
    expect(cards.some((card) => card.foilOnly === 1)).toBe(true)
    expect(cards.some((card) => card.number === null)).toBe(true)
    // Every field of every row, keys in the same order, as objects and as the columns themselves.
    expect(JSON.stringify([prices, cards])).toBe(JSON.stringify([pricesOf(viaSelect), cardsOf(viaSelect)]))
    expect(JSON.stringify(viaCopy)).toBe(JSON.stringify(viaSelect))
  })

  test('prices come through a second connection in the same snapshot: a sync committing before that connection starts is wholly out', async () => {
    const before = await loadSnapshotSource(database!.db)
    // A pool of two: a "sync" holds one until the load has read all but prices on the other, then
    // rewrites every price and commits; only then can the load's second connection start.
    const pool = await openPostgres((database as { url: string }).url, { max: 2 })
    try {
      let release!: () => void
      const released = new Promise<void>((resolve) => (release = resolve))
      let holding!: () => void
      const isHolding = new Promise<void>((resolve) => (holding = resolve))
      const sync = pool.db.transaction(async (tx) => {
        await tx.execute(sql`select 1`)
        holding()
        await released
        await tx.execute(sql`update card_prices set low_price = low_price + 1000, last_updated_at = last_updated_at + interval '1 hour'`)
      })
      await isHolding
      const loading = loadSnapshotSource(pool.db)
      const cardsRead = async () =>
        (
          await selectRows<{ n: number }>(
            database!.db,
            sql`select count(*)::int as n from pg_stat_activity
                where datname = current_database() and state = 'idle in transaction' and query like 'copy (select id, set_id,%'`,
          )
        )[0]!.n
      await eventually(async () => (await cardsRead()) > 0, { what: 'the load reading cards' })
      release()
      await sync
      expect(JSON.stringify(await loading)).toBe(JSON.stringify(before))
      const after = await loadSnapshotSource(pool.db)
      expect(after.fingerprint).not.toBe(before.fingerprint)
      const lowPrices = (source: typeof before) => new Map(pricesOf(source).map((price) => [`${price.card_id} ${price.printing}`, price.low_price]))
      const [was, now] = [lowPrices(before), lowPrices(after)]
      for (const [key, low] of now) expect(low).toBe(was.get(key) === null ? null : was.get(key)! + 1000)
    } finally {
      await pool.close()
    }
  })

  test('with a pool of one connection, both large reads come through it, one after the other', async () => {
    const single = await openPostgres((database as { url: string }).url, { max: 1 })
    try {
      const alone = await loadSnapshotSource(single.db)
      expect(JSON.stringify(alone)).toBe(JSON.stringify(await loadSnapshotSource(database!.db)))
    } finally {
      await single.close()
    }
  })
})
