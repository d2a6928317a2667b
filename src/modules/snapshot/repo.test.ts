import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { freshDatabase } from '../../../test/helpers/db'
import { TEST_DATABASE_URL } from '../../../test/helpers/env'
import { loadSnapshotSource } from './repo'

// Under PGlite both reads are the same SELECTs.
const database = TEST_DATABASE_URL ? await freshDatabase('seeded') : undefined

describe.skipIf(!database)('snapshot source', () => {
  test('binary COPY reads the very cards and prices the SELECTs do, keys in the same order', async () => {
    const db = database!.db
    // Every nullable price column null somewhere, as a printing never sold gives.
    await db.execute(sql`update card_prices set market_price = null, market_price_as_of = null, price_change_24h = null,
                                               price_change_7d = null, price_change_30d = null
                         where card_id in (select id from cards order by id limit 5)`)
    const viaCopy = await loadSnapshotSource(db)
    const viaSelect = await loadSnapshotSource(db, { viaCopy: false })
    expect(viaCopy.prices.length).toBeGreaterThan(100)
    expect(viaCopy.prices.filter((price) => price.market_price === null && price.price_change_30d === null).length).toBeGreaterThanOrEqual(5)
    expect(viaCopy.prices.some((price) => price.buylist_price === null)).toBe(true)
    expect(viaCopy.cards.some((card) => card.foilOnly === 1)).toBe(true)
    expect(JSON.stringify(viaCopy)).toBe(JSON.stringify(viaSelect))
  })
})
