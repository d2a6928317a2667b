import { beforeAll, describe, expect, test } from 'bun:test'
import { and, asc, count, desc, eq, gte, lte, max, min, type SQL, sql } from 'drizzle-orm'
import { accountWithKey, type TestAccount, testRedis } from '../../../test/helpers/auth'
import { freshDatabase, testLogger } from '../../../test/helpers/db'
import { TEST_NOW } from '../../../test/helpers/env'
import { startServer } from '../../../test/helpers/server'
import { cardPrices, cards, priceHistory } from '../../db/schema'
import { addDays, utcDate } from '../../shared/clock'
import type { Tier } from '../auth/tiers'

// Over real HTTP on the seeded demo catalog (history: weekly points for a year, daily points for
// the last 60 days, today's point from the sync). Every expectation is read back from the database.
const database = await freshDatabase('seeded')
const { db } = database
const redis = await testRedis()
const server = startServer({ db, redis, logger: testLogger })

const TODAY = utcDate(TEST_NOW)
/** The spec's "History window by tier" table, in days (null = full history). */
const SPEC_WINDOW: Record<Tier, number | null> = { free: 7, hobby: 30, starter: 90, pro: null, business: null }
const ROW_FIELDS = ['avg_sales_price', 'date', 'low_price', 'market_price', 'printing', 'sales_volume']

const get = (path: string, key?: string) => server.get(path, { headers: key ? { 'x-api-key': key } : {} })
async function call(path: string, key: string) {
  const response = await get(path, key)
  return { status: response.status, body: (await response.json()) as any, headers: response.headers }
}

interface Row {
  date: string
  printing: string
  market_price: number
  low_price: number | null
  avg_sales_price: number | null
  sales_volume: number | null
}

const byDateThenPrinting = (a: Row, b: Row) => (a.date < b.date ? -1 : a.date > b.date ? 1 : a.printing < b.printing ? -1 : a.printing > b.printing ? 1 : 0)

/** The card's history straight from the table, sorted here (not by the query under test). */
async function tableRows(cardId: number, filter: { days?: number; printing?: string } = {}): Promise<Row[]> {
  const conditions: (SQL | undefined)[] = [
    eq(priceHistory.cardId, cardId),
    filter.printing === undefined ? undefined : eq(priceHistory.printing, filter.printing),
    // The window computed by PostgreSQL's date arithmetic: today and the days - 1 before it.
    filter.days === undefined ? undefined : gte(priceHistory.date, sql`(${TODAY}::date - ${filter.days - 1}::int)`),
    lte(priceHistory.date, TODAY),
  ]
  const rows = await db
    .select()
    .from(priceHistory)
    .where(and(...conditions))
  return rows
    .map((r) => ({
      date: r.date,
      printing: r.printing,
      market_price: r.marketPrice,
      low_price: r.lowPrice,
      avg_sales_price: r.avgSalesPrice,
      sales_volume: r.salesVolume,
    }))
    .sort(byDateThenPrinting)
}

async function cardPrintings(cardId: number): Promise<string[]> {
  const rows = await db.select({ p: cardPrices.printing }).from(cardPrices).where(eq(cardPrices.cardId, cardId))
  return rows.map((r) => r.p)
}

function expectOrdered(rows: Row[]) {
  for (let i = 1; i < rows.length; i++) expect(byDateThenPrinting(rows[i - 1]!, rows[i]!)).toBe(-1)
}

let cardId: number // several printings, sales recorded (some 0, some null)
let printings: string[]
let bareCardId: number // a card with no printings and no history (presale)
let unknownCardId: number
const keys = {} as Record<Tier, TestAccount>

beforeAll(async () => {
  // The card with the most printings among those whose history has both zero-volume and null sales.
  const [best] = await db
    .select({ id: priceHistory.cardId, n: sql<number>`count(distinct ${priceHistory.printing})::int` })
    .from(priceHistory)
    .groupBy(priceHistory.cardId)
    .having(sql`bool_or(${priceHistory.salesVolume} = 0) and bool_or(${priceHistory.salesVolume} > 0) and bool_or(${priceHistory.avgSalesPrice} is null)`)
    .orderBy(desc(sql`count(distinct ${priceHistory.printing})`), asc(priceHistory.cardId))
    .limit(1)
  cardId = best!.id
  printings = await cardPrintings(cardId)
  expect(printings.length).toBeGreaterThanOrEqual(2)

  // Boundary points the seed may lack (weekly points fall on one weekday): just inside and just
  // outside the 90- and 365-day windows, and one older than a year. Our private database.
  const [first] = printings
  const template = (await tableRows(cardId, { printing: first })).at(-1)!
  const extra = [-89, -90, -364, -365, -400].map((back) => ({
    cardId,
    printing: first!,
    date: addDays(TODAY, back),
    marketPrice: template.market_price,
    lowPrice: template.low_price,
    avgSalesPrice: 1.5,
    salesVolume: 0,
  }))
  await db.insert(priceHistory).values(extra).onConflictDoNothing()

  const [bare] = await db
    .select({ id: cards.id })
    .from(cards)
    .where(sql`not exists (select 1 from ${cardPrices} where ${cardPrices.cardId} = ${cards.id})`)
    .orderBy(asc(cards.id))
    .limit(1)
  bareCardId = bare!.id
  const [top] = await db.select({ id: max(cards.id) }).from(cards)
  unknownCardId = top!.id! + 1

  for (const tier of Object.keys(SPEC_WINDOW) as Tier[]) keys[tier] = await accountWithKey(db, tier)
}, 30_000) // reads and writes the price history: seconds on a loaded machine

describe('GET /v1/cards/:id/history', () => {
  test('default: the last 30 days, today included, rows with exactly the History row fields', async () => {
    const { status, body, headers } = await call(`/v1/cards/${cardId}/history`, keys.business.key)
    expect(status).toBe(200)
    expect(Object.keys(body).sort()).toEqual(['data', 'meta', 'rate_limit'])
    for (const row of body.data) expect(Object.keys(row).sort()).toEqual(ROW_FIELDS)
    expect(body.data).toEqual(await tableRows(cardId, { days: 30 }))
    expect(body.meta).toEqual({
      range: 'month',
      days: 30,
      from: addDays(TODAY, -29),
      to: TODAY,
      clipped_to_tier: false,
      tier_history_days: null,
      count: body.data.length,
      total: body.data.length,
    })
    // Daily points cover the window, so both ends are present: the window is exactly 30 dates.
    expect(body.data[0].date).toBe(addDays(TODAY, -29))
    expect(body.data.at(-1).date).toBe(TODAY)
    expect(new Set(body.data.map((r: Row) => r.date)).size).toBe(30)
    expect(body.rate_limit).toMatchObject({ daily_limit: 50_000, daily_reset: '2026-11-21T00:00:00.000Z' })
    expect(headers.get('x-ratelimit-remaining')).toBe(String(body.rate_limit.daily_remaining))
  })

  test('rows are oldest first, then by printing, one per printing and day', async () => {
    const { body } = await call(`/v1/cards/${cardId}/history?range=all`, keys.pro.key)
    expect(body.data.length).toBeGreaterThan(100)
    expectOrdered(body.data)
    const seen = new Set(body.data.map((r: Row) => `${r.date}|${r.printing}`))
    expect(seen.size).toBe(body.data.length)
    expect(new Set(body.data.map((r: Row) => r.printing))).toEqual(new Set(printings))
  })

  for (const tier of Object.keys(SPEC_WINDOW) as Tier[]) {
    test(`${tier}: range=all is clipped to the tier window (${SPEC_WINDOW[tier] ?? 'full history'})`, async () => {
      const window = SPEC_WINDOW[tier]
      const { status, body } = await call(`/v1/cards/${cardId}/history?range=all`, keys[tier].key)
      expect(status).toBe(200)
      expect(body.data).toEqual(await tableRows(cardId, window === null ? {} : { days: window }))
      if (window === null) {
        const [span] = await db
          .select({ n: count(), first: min(priceHistory.date) })
          .from(priceHistory)
          .where(eq(priceHistory.cardId, cardId))
        expect(body.data).toHaveLength(span!.n)
        expect(body.data[0].date).toBe(span!.first)
        expect(body.data[0].date).toBe(addDays(TODAY, -400))
        expect(body.meta).toEqual({
          range: 'all',
          days: null,
          from: null,
          to: TODAY,
          clipped_to_tier: false,
          tier_history_days: null,
          count: span!.n,
          total: span!.n,
        })
      } else {
        const from = addDays(TODAY, -(window - 1))
        // The first date of the window is in, the day before is not (a row exists for both).
        expect(body.data[0].date).toBe(from)
        expect((await tableRows(cardId)).some((r) => r.date === addDays(from, -1))).toBe(true)
        expect(body.data.every((r: Row) => r.date >= from && r.date <= TODAY)).toBe(true)
        expect(new Set(body.data.map((r: Row) => r.date)).size).toBeLessThanOrEqual(window)
        expect(body.meta).toEqual({
          range: 'all',
          days: window,
          from,
          to: TODAY,
          clipped_to_tier: true,
          tier_history_days: window,
          count: body.data.length,
          total: body.data.length,
        })
      }
    })
  }

  test('Free sees at most 7 days whatever the range; Hobby is clipped only past a month', async () => {
    for (const range of ['month', 'quarter', 'year', 'all']) {
      const { body } = await call(`/v1/cards/${cardId}/history?range=${range}`, keys.free.key)
      expect(body.meta).toMatchObject({ range, days: 7, from: addDays(TODAY, -6), clipped_to_tier: true })
      expect(body.data).toEqual(await tableRows(cardId, { days: 7 }))
    }
    const month = await call(`/v1/cards/${cardId}/history?range=month`, keys.hobby.key)
    expect(month.body.meta).toMatchObject({ days: 30, clipped_to_tier: false })
    const quarter = await call(`/v1/cards/${cardId}/history?range=quarter`, keys.hobby.key)
    expect(quarter.body.meta).toMatchObject({ days: 30, clipped_to_tier: true })
    expect(quarter.body.data).toEqual(month.body.data)
  })

  test.each([
    ['month', 30],
    ['quarter', 90],
    ['year', 365],
  ] as const)('range=%s is %i days ending today', async (range, days) => {
    const { body } = await call(`/v1/cards/${cardId}/history?range=${range}`, keys.pro.key)
    const from = addDays(TODAY, -(days - 1))
    expect(body.meta).toEqual({
      range,
      days,
      from,
      to: TODAY,
      clipped_to_tier: false,
      tier_history_days: null,
      count: body.data.length,
      total: body.data.length,
    })
    expect(body.data).toEqual(await tableRows(cardId, { days }))
    expect(body.data[0].date).toBe(from)
    // The day before the window has a row and is left out.
    expect((await tableRows(cardId)).some((r) => r.date === addDays(from, -1))).toBe(true)
  })

  test('quarter on Starter is the full 90 days, not clipped', async () => {
    const { body } = await call(`/v1/cards/${cardId}/history?range=quarter`, keys.starter.key)
    expect(body.meta).toMatchObject({ days: 90, clipped_to_tier: false, tier_history_days: 90 })
    expect(body.data).toEqual(await tableRows(cardId, { days: 90 }))
  })

  test('the window ends today: a point dated tomorrow (clock skew) is left out, detailed keeps it', async () => {
    const [other] = await db
      .select({ id: priceHistory.cardId, printing: priceHistory.printing })
      .from(priceHistory)
      .where(and(sql`${priceHistory.cardId} <> ${cardId}`, eq(priceHistory.date, TODAY)))
      .orderBy(asc(priceHistory.cardId), asc(priceHistory.printing))
      .limit(1)
    const tomorrow = addDays(TODAY, 1)
    await db.insert(priceHistory).values({ cardId: other!.id, printing: other!.printing, date: tomorrow, marketPrice: 2, lowPrice: 1 })
    const windowed = await call(`/v1/cards/${other!.id}/history?range=all`, keys.pro.key)
    expect(windowed.body.meta.to).toBe(TODAY)
    expect(windowed.body.data.at(-1).date).toBe(TODAY)
    expect(windowed.body.data).toEqual(await tableRows(other!.id))
    const detailed = await call(`/v1/cards/${other!.id}/history/detailed`, keys.pro.key)
    expect(detailed.body.data.at(-1)).toMatchObject({ date: tomorrow, printing: other!.printing, avg_sales_price: null, sales_volume: null })
    expect(detailed.body.meta.last_date).toBe(tomorrow)
  })

  test('printing filters by exact name', async () => {
    for (const printing of printings) {
      const { status, body } = await call(`/v1/cards/${cardId}/history?range=year&printing=${encodeURIComponent(printing)}`, keys.pro.key)
      expect(status).toBe(200)
      expect(body.data.length).toBeGreaterThan(0)
      expect(body.data.every((r: Row) => r.printing === printing)).toBe(true)
      expect(body.data).toEqual(await tableRows(cardId, { days: 365, printing }))
    }
  })

  test('an unknown printing of an existing card is 400 naming printing and listing the card printings', async () => {
    for (const bad of ['No Such Printing', printings[0]!.toLowerCase(), ` ${printings[0]}`]) {
      const { status, body } = await call(`/v1/cards/${cardId}/history?printing=${encodeURIComponent(bad)}`, keys.hobby.key)
      expect(status).toBe(400)
      expect(body.error.code).toBe('INVALID_PARAMETER')
      expect(body.error.details).toHaveLength(1)
      expect(body.error.details[0].field).toBe('printing')
      for (const printing of printings) expect(body.error.details[0].message).toContain(printing)
      expect(body.error.message).toContain('printing')
      expect(body.rate_limit).toBeDefined()
    }
  })

  test('a card with no printings: empty history, and any printing is 400', async () => {
    const empty = await call(`/v1/cards/${bareCardId}/history?range=all`, keys.business.key)
    expect(empty.status).toBe(200)
    expect(empty.body.data).toEqual([])
    expect(empty.body.meta.count).toBe(0)
    const named = await call(`/v1/cards/${bareCardId}/history?printing=Normal`, keys.business.key)
    expect(named.status).toBe(400)
    expect(named.body.error.details[0]).toEqual({ field: 'printing', message: 'card has no printings' })
  })

  test('a card with printings but no points in the window: 200 and empty, not 404; its printings still checked', async () => {
    // The newest-numbered card with history, its last 7 days removed (our private database).
    const [quiet] = await db
      .select({ id: priceHistory.cardId, printing: min(priceHistory.printing) })
      .from(priceHistory)
      .where(sql`${priceHistory.cardId} <> ${cardId}`)
      .groupBy(priceHistory.cardId)
      .orderBy(desc(priceHistory.cardId))
      .limit(1)
    await db.delete(priceHistory).where(and(eq(priceHistory.cardId, quiet!.id), gte(priceHistory.date, addDays(TODAY, -6))))
    for (const query of ['', `?printing=${encodeURIComponent(quiet!.printing!)}`]) {
      const { status, body } = await call(`/v1/cards/${quiet!.id}/history${query}`, keys.free.key)
      expect(status).toBe(200)
      expect(body.data).toEqual([])
      expect(body.meta).toMatchObject({ days: 7, count: 0 })
    }
    expect((await call(`/v1/cards/${quiet!.id}/history?range=month`, keys.hobby.key)).body.data.length).toBeGreaterThan(0)
    const named = await call(`/v1/cards/${quiet!.id}/history?printing=No%20Such`, keys.free.key)
    expect(named.status).toBe(400)
    expect(named.body.error.details[0].field).toBe('printing')
  })

  test('an unknown card is 404 NOT_FOUND, with or without a printing, and carries rate_limit', async () => {
    for (const query of ['', '?printing=Normal', '?range=all']) {
      const { status, body } = await call(`/v1/cards/${unknownCardId}/history${query}`, keys.free.key)
      expect(status).toBe(404)
      expect(body.error.code).toBe('NOT_FOUND')
      expect(body.error.message).toContain(String(unknownCardId))
      expect(body.rate_limit.daily_limit).toBe(100)
    }
  })

  test.each([
    ['0', '', 'id', 'must be an integer from 1 to 2147483647'],
    ['-3', '', 'id', 'must be an integer from 1 to 2147483647'],
    ['abc', '', 'id', 'must be an integer from 1 to 2147483647'],
    ['1.5', '', 'id', 'must be an integer from 1 to 2147483647'],
    ['2147483648', '', 'id', 'must be an integer from 1 to 2147483647'],
    ['1', '?range=week', 'range', 'must be one of: month, quarter, year, all'],
    ['1', '?range=', 'range', 'must be one of: month, quarter, year, all'],
    ['1', '?range=MONTH', 'range', 'must be one of: month, quarter, year, all'],
    ['1', '?printing=', 'printing', 'must be 1 to 100 characters long'],
  ])('400 INVALID_PARAMETER for id=%s%s, naming %s', async (id, query, field, message) => {
    const { status, body } = await call(`/v1/cards/${id}/history${query}`, keys.starter.key)
    expect(status).toBe(400)
    expect(body.error.code).toBe('INVALID_PARAMETER')
    expect(body.error.details).toEqual([{ field, message }])
    expect(body.error.message).toContain(`'${field}'`)
    expect(body.rate_limit).toBeDefined()
  })

  test('no key is 401 API_KEY_REQUIRED', async () => {
    const response = await get(`/v1/cards/${cardId}/history`)
    expect(response.status).toBe(401)
    expect(((await response.json()) as any).error.code).toBe('API_KEY_REQUIRED')
  })
})

describe('GET /v1/cards/:id/history/detailed', () => {
  for (const tier of ['free', 'hobby', 'starter'] as const) {
    test(`${tier}: 403 TIER_REQUIRED that costs no quota`, async () => {
      const account = await accountWithKey(db, tier)
      const before = await call(`/v1/cards/${cardId}/history`, account.key)
      expect(before.status).toBe(200)
      const remaining = Number(before.headers.get('x-ratelimit-remaining'))
      for (let i = 0; i < 3; i++) {
        const refused = await call(`/v1/cards/${cardId}/history/detailed`, account.key)
        expect(refused.status).toBe(403)
        expect(refused.body.error.code).toBe('TIER_REQUIRED')
        expect(refused.body.error.message).toContain('Pro')
        expect(refused.headers.get('x-ratelimit-remaining')).toBe(String(remaining))
        expect(refused.body.rate_limit.daily_remaining).toBe(remaining)
      }
      const after = await call(`/v1/cards/${cardId}/history`, account.key)
      expect(Number(after.headers.get('x-ratelimit-remaining'))).toBe(remaining - 1)
    })
  }

  for (const tier of ['pro', 'business'] as const) {
    test(`${tier}: every point of every printing, with sales, oldest first`, async () => {
      const { status, body } = await call(`/v1/cards/${cardId}/history/detailed`, keys[tier].key)
      expect(status).toBe(200)
      expect(Object.keys(body).sort()).toEqual(['data', 'meta', 'rate_limit'])
      for (const row of body.data) expect(Object.keys(row).sort()).toEqual(ROW_FIELDS)
      const expected = await tableRows(cardId)
      expect(body.data).toEqual(expected)
      expectOrdered(body.data)
      const [span] = await db
        .select({ n: count(), first: min(priceHistory.date), last: max(priceHistory.date) })
        .from(priceHistory)
        .where(eq(priceHistory.cardId, cardId))
      expect(body.meta).toEqual({
        count: span!.n,
        total: span!.n,
        first_date: span!.first,
        last_date: span!.last,
        printings: [...printings].sort(),
      })
      // Sales as the table holds them: numbers, 0 for days without sales, null where not recorded.
      expect(body.data.some((r: Row) => r.sales_volume === 0)).toBe(true)
      expect(body.data.some((r: Row) => typeof r.avg_sales_price === 'number' && r.sales_volume! > 0)).toBe(true)
      expect(body.data.filter((r: Row) => r.date === TODAY).every((r: Row) => r.avg_sales_price === null && r.sales_volume === null)).toBe(true)
      expect(body.rate_limit.daily_limit).toBe(tier === 'pro' ? 10_000 : 50_000)
    })
  }

  test('printing filter, unknown printing 400, unknown card 404, bad id 400', async () => {
    const printing = printings.at(-1)!
    const one = await call(`/v1/cards/${cardId}/history/detailed?printing=${encodeURIComponent(printing)}`, keys.pro.key)
    expect(one.status).toBe(200)
    expect(one.body.data).toEqual(await tableRows(cardId, { printing }))
    expect(one.body.meta.printings).toEqual([printing])

    const bad = await call(`/v1/cards/${cardId}/history/detailed?printing=Nope`, keys.pro.key)
    expect(bad.status).toBe(400)
    expect(bad.body.error.details[0].field).toBe('printing')

    const missing = await call(`/v1/cards/${unknownCardId}/history/detailed`, keys.pro.key)
    expect(missing.status).toBe(404)
    expect(missing.body.error.code).toBe('NOT_FOUND')
    expect(missing.body.rate_limit).toBeDefined()

    const zero = await call('/v1/cards/0/history/detailed', keys.pro.key)
    expect(zero.status).toBe(400)
    expect(zero.body.error.details).toEqual([{ field: 'id', message: 'must be an integer from 1 to 2147483647' }])

    const empty = await call(`/v1/cards/${bareCardId}/history/detailed`, keys.pro.key)
    expect(empty.body).toMatchObject({ data: [], meta: { count: 0, first_date: null, last_date: null, printings: [] } })
  })
})

describe('OpenAPI', () => {
  test('both routes are documented with their response schemas', async () => {
    const doc = (await (await server.get('/openapi.json')).json()) as any
    // History is open to every tier (no 403); detailed history needs Pro.
    const statuses = {
      '/v1/cards/{id}/history': ['200', '400', '401', '404', '429', '503'],
      '/v1/cards/{id}/history/detailed': ['200', '400', '401', '403', '404', '429', '503'],
    }
    for (const [path, expected] of Object.entries(statuses)) {
      const operation = doc.paths[path]?.get
      expect(operation).toBeDefined()
      expect(operation.tags).toEqual(['History'])
      expect(Object.keys(operation.responses).sort()).toEqual(expected)
      expect(operation.security).toEqual([{ ApiKey: [] }])
    }
    const params = doc.paths['/v1/cards/{id}/history'].get.parameters.map((p: any) => p.name).sort()
    expect(params).toEqual(['id', 'printing', 'range'])
  })
})
