import { afterAll, describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { Webhook } from 'standardwebhooks'
import { runSyncJob } from '../../src/jobs/sync-job'
import type { MarketplaceSource } from '../../src/modules/ingest/source'
import { createDemoSource } from '../../src/modules/ingest/sources/demo'
import { webhookAlertHook } from '../../src/modules/webhooks/alerts'
import { createDeliveryWorker } from '../../src/modules/webhooks/delivery'
import { createSecretBox } from '../../src/modules/webhooks/secret-box'
import { clockWithWall, systemClock, utcDate } from '../../src/shared/clock'
import { startWebhookReceiver } from '../fixtures/webhook-receiver'
import { fakeClock } from '../helpers/clock'
import { freshDatabase, PRIMARY_PRINTING_FIRST, selectRows, testLogger } from '../helpers/db'
import { TEST_NOW } from '../helpers/env'
import { seedWebhook, TEST_WEBHOOK_KEY, webhookOwner } from '../helpers/webhooks'

// End to end: a sync commits prices, the alert hook writes the crossings to the outbox and wakes
// the delivery worker, which POSTs them to a real receiver. The marketplace is the tiny demo one,
// with one card's primary market price steered by the test, day by day. The syncs stand on days
// after TEST_NOW, before today, so their alerts are due for the worker, whose clock stands at the
// real now (the standardwebhooks oracle refuses timestamps far from now). Once per crossing is
// the subject of the property test in src/modules/webhooks/alerts.test.ts; here it is the whole path.

const SPEC_KEYS = ['event', 'card_id', 'card_name', 'condition', 'threshold', 'current_price', 'timestamp']
const DAY_MS = 86_400_000
/** Dollars and cents, as prices are. */
const cents = (dollars: number) => Math.round(dollars * 100) / 100

/** The demo marketplace, except that `productId`'s `printing` has the market price the test sets for the date. */
function steeredSource(now: Date, productId: number, printing: string, price: number): MarketplaceSource {
  const demo = createDemoSource({ scale: 'tiny', now: () => now })
  return {
    name: demo.name,
    capabilities: demo.capabilities,
    listGames: () => demo.listGames(),
    listSets: (categoryId) => demo.listSets(categoryId),
    listProducts: (groupId) => demo.listProducts(groupId),
    listSales: (groupId, date) => demo.listSales(groupId, date),
    listListings: (id) => demo.listListings(id),
    async listPrices(groupId, date) {
      const prices = await demo.listPrices(groupId, date)
      return prices.map((row) => (row.productId === productId && row.printing === printing ? { ...row, marketPrice: price } : row))
    },
  }
}

describe('price alerts from a sync to the receiver', async () => {
  const { db } = await freshDatabase('seeded')
  const box = await createSecretBox(TEST_WEBHOOK_KEY)
  const receiver = await startWebhookReceiver()
  afterAll(() => receiver.stop(), 30_000)
  // Its clock never moves, so it never polls: an alert that goes out was sent by the hook's wake-up.
  const worker = createDeliveryWorker(
    { db, clock: fakeClock(systemClock.now()), logger: testLogger },
    { settings: { secrets: box, targets: { allowPrivateTargets: true } }, isLeader: () => true, pollMs: 60_000 },
  )
  worker.start()
  afterAll(() => worker.stop(), 30_000)

  // A card with a market price on its primary printing (the test's own primary-printing oracle).
  const [card] = await selectRows<{ id: number; name: string; product: number; printing: string; price: number }>(
    db,
    sql`select c.id, c.name, c.marketplace_id as product, cp.printing, cp.market_price as price
        from cards c join games g on g.id = c.game_id join card_prices cp on cp.card_id = c.id
        where c.id = (select min(card_id) from card_prices where market_price is not null)
        order by ${PRIMARY_PRINTING_FIRST} limit 1`,
  )
  const threshold = cents(Number(card!.price) + 10)
  const owner = await webhookOwner(db)
  const watched = await seedWebhook(db, box, { accountId: owner, url: `${receiver.url}/hooks/above`, cardId: card!.id, condition: 'above', threshold })
  // Never reached by the prices below: they must never fire.
  await seedWebhook(db, box, { accountId: owner, url: `${receiver.url}/hooks/quiet-below`, cardId: card!.id, condition: 'below', threshold: 0.01 })
  await seedWebhook(db, box, { accountId: owner, url: `${receiver.url}/hooks/quiet-above`, cardId: card!.id, condition: 'above', threshold: threshold * 100 })

  let day = 0
  /** Just after midnight UTC of the nth day after TEST_NOW: the fourth is today at the latest. */
  const syncInstant = (n: number) => new Date(`${utcDate(new Date(TEST_NOW.getTime() + n * DAY_MS))}T00:00:01.000Z`)
  /** Syncs the next day with the card's primary market price at `price`; the worker runs as the server runs it. */
  async function syncWithPrice(price: number) {
    const now = syncInstant(++day)
    const clock = clockWithWall(() => now)
    const { changes } = await runSyncJob(
      {
        db,
        source: steeredSource(now, card!.product, card!.printing, price),
        clock,
        logger: testLogger,
        redis: undefined,
        alertHook: webhookAlertHook({ db, clock, logger: testLogger }, { onAlerts: () => worker.wake() }),
      },
      { job: 'manual-sync', scheduledFor: now },
    )
    expect(changes.some((change) => change.cardId === card!.id && change.printing === card!.printing && change.newPrice === price)).toBe(true)
    return now
  }
  const outbox = () => selectRows<{ status: string }>(db, sql`select status from webhook_deliveries order by id`)

  test('the syncs stand before today, so their alerts are due for a worker on the real now', () => {
    expect(syncInstant(4).getTime()).toBeLessThan(systemClock.now().getTime())
  })

  test('no crossing: no alert, no delivery', async () => {
    await syncWithPrice(cents(threshold - 5))
    await worker.drain()
    expect(await outbox()).toEqual([])
    expect(receiver.received()).toHaveLength(0)
  }, 120_000)

  test('a crossing: exactly one delivery, sent at once, signed, with the spec fields', async () => {
    const crossedAt = await syncWithPrice(cents(threshold + 2.5))
    const [request] = await receiver.waitFor(1)
    await worker.drain()
    expect(receiver.received()).toHaveLength(1)
    expect(request!.path).toBe('/hooks/above')
    const payload = new Webhook(watched.secret).verify(request!.body, request!.headers) as Record<string, unknown>
    expect(Object.keys(payload)).toEqual(SPEC_KEYS)
    expect(payload).toEqual({
      event: 'price_alert',
      card_id: card!.id,
      card_name: card!.name,
      condition: 'above',
      threshold,
      current_price: cents(threshold + 2.5),
      timestamp: crossedAt.toISOString(),
    })
    expect(await outbox()).toEqual([{ status: 'delivered' }])
  }, 120_000)

  test('crossing back re-arms without a delivery; the next crossing delivers again, as a new event', async () => {
    await syncWithPrice(cents(threshold - 3))
    await worker.drain()
    expect(receiver.received()).toHaveLength(1)
    const [rearmed] = await selectRows<{ armed: boolean }>(db, sql`select armed from webhooks where id = ${watched.id}`)
    expect(rearmed!.armed).toBe(true)

    const crossedAt = await syncWithPrice(cents(threshold + 1))
    const [first, second] = await receiver.waitFor(2)
    await worker.drain()
    expect(receiver.received()).toHaveLength(2)
    expect(second!.headers['webhook-id']).not.toBe(first!.headers['webhook-id'])
    const payload = new Webhook(watched.secret).verify(second!.body, second!.headers) as Record<string, unknown>
    expect(payload).toMatchObject({ card_id: card!.id, current_price: cents(threshold + 1), timestamp: crossedAt.toISOString() })
    expect(await outbox()).toEqual([{ status: 'delivered' }, { status: 'delivered' }])
    expect(new Set(receiver.received().map((request) => request.path))).toEqual(new Set(['/hooks/above']))
  }, 120_000)
})
