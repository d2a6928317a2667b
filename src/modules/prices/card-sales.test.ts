import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { accountWithKey } from '../../../test/helpers/auth'
import { selectRows } from '../../../test/helpers/db'
import { seededCatalogServer } from '../../../test/helpers/server'

// docs/adr/0093-sales-in-pro-card-prices.md: Pro and Business card prices carry each printing's
// newest recorded sales; below Pro the fields are absent. Over real HTTP on the seeded tiny
// catalog; the expectations are SQL written here.
const { database, server, proKey, freeKey } = await seededCatalogServer()
const rows = <T>(query: ReturnType<typeof sql>) => selectRows<T>(database.db, query)
const businessKey = (await accountWithKey(database.db, 'business')).key
const starterKey = (await accountWithKey(database.db, 'starter')).key

// A card with several printings whose history has sales; its last printing (by name) is made one
// without any recorded sales, as from a source without them.
const [card] = await rows<{ id: number }>(sql`
  select card_id as id from price_history group by card_id
  having count(distinct printing) > 1 and bool_or(sales_volume > 0) order by card_id limit 1`)
const cardId = card!.id
const [unsold] = await rows<{ printing: string }>(sql`select max(printing collate "C") as printing from card_prices where card_id = ${cardId}`)
await database.db.execute(sql`update price_history set sales_volume = null, avg_sales_price = null where card_id = ${cardId} and printing = ${unsold!.printing}`)

/** Each printing's newest point with recorded sales, from the table. */
async function expectedSales(id: number) {
  const found = await rows<{ printing: string; date: string; sales_volume: number; avg_sales_price: number | null }>(sql`
    select distinct on (printing) printing, date::text as date, sales_volume, avg_sales_price from price_history
    where card_id = ${id} and sales_volume is not null order by printing, date desc`)
  return new Map(found.map((row) => [row.printing, { sales_volume: row.sales_volume, avg_sales_price: row.avg_sales_price, sales_as_of: row.date }]))
}

const NO_SALES = { sales_volume: null, avg_sales_price: null, sales_as_of: null }
const asList = (data: unknown) => (Array.isArray(data) ? data : [data]) as Record<string, unknown>[]

describe('sales in card prices', () => {
  test("Pro and Business: every price has its printing's newest recorded sales, null when none were recorded", async () => {
    const expected = await expectedSales(cardId)
    expect(expected.size).toBeGreaterThan(0)
    expect(expected.has(unsold!.printing)).toBe(false)
    for (const key of [proKey, businessKey]) {
      const { status, body } = await server.json(`/v1/cards/${cardId}/prices`, key)
      expect(status).toBe(200)
      const prices = asList(body.data)
      expect(prices.length).toBeGreaterThan(1)
      for (const price of prices) expect(price).toMatchObject(expected.get(price.printing as string) ?? NO_SALES)
      // The newest day may have no sales yet (they arrive late): the newest day that has them.
      const [newest] = await rows<{ date: string }>(sql`select max(date)::text as date from price_history where card_id = ${cardId} and sales_volume is not null`)
      expect(prices.map((price) => price.sales_as_of)).toContain(newest!.date)
    }
  })

  test('Free and Starter: the three fields are absent, not null', async () => {
    for (const key of [freeKey, starterKey]) {
      const { body } = await server.json(`/v1/cards/${cardId}/prices`, key)
      for (const price of asList(body.data)) {
        expect(Object.keys(price)).not.toContain('sales_volume')
        expect(Object.keys(price)).not.toContain('avg_sales_price')
        expect(Object.keys(price)).not.toContain('sales_as_of')
      }
    }
  })

  test('the two answers have their own ETags, and repeats (answered before routing) keep each caller its own', async () => {
    const path = `/v1/cards/${cardId}/prices?printing=${encodeURIComponent(unsold!.printing)}`
    const free = await server.get(path, { headers: { 'x-api-key': freeKey } })
    const pro = await server.get(path, { headers: { 'x-api-key': proKey } })
    const freeBody = (await free.json()) as any
    const proBody = (await pro.json()) as any
    expect(free.headers.get('etag')).not.toBe(pro.headers.get('etag'))
    expect(asList(proBody.data)[0]).toMatchObject(NO_SALES)
    // A Free tag does not answer a Pro request 304, nor the other way round.
    const crossed = await server.get(path, { headers: { 'x-api-key': proKey, 'if-none-match': free.headers.get('etag')! } })
    expect(crossed.status).toBe(200)
    expect(await crossed.json()).toMatchObject({ data: proBody.data })
    const own = await server.get(path, { headers: { 'x-api-key': freeKey, 'if-none-match': free.headers.get('etag')! } })
    expect(own.status).toBe(304)
    for (let round = 0; round < 3; round++) {
      for (const [key, expected] of [
        [freeKey, freeBody.data],
        [businessKey, proBody.data],
        [proKey, proBody.data],
        [starterKey, freeBody.data],
      ] as const) {
        const again = await server.get(path, { headers: { 'x-api-key': key } })
        expect(again.status).toBe(200)
        expect(((await again.json()) as any).data).toEqual(expected)
      }
    }
  })

  test('bulk cards: the prices carry the same sales', async () => {
    const expected = await expectedSales(cardId)
    const { status, body } = await server.json(`/v1/bulk/cards?ids=${cardId}`, proKey)
    expect(status).toBe(200)
    const [full] = body.data
    expect(full.prices.length).toBeGreaterThan(1)
    for (const price of full.prices) expect(price).toMatchObject(expected.get(price.printing) ?? NO_SALES)
    const single = await server.json(`/v1/cards/${cardId}/prices`, proKey)
    expect(full.prices).toEqual(asList(single.body.data))
  })
})
