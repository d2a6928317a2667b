import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import fc from 'fast-check'
import { freshDatabase, selectRows } from '../../../test/helpers/db'
import { queueDelivery, seedWebhook, TEST_WEBHOOK_KEY, webhookOwner } from '../../../test/helpers/webhooks'
import { systemClock } from '../../shared/clock'
import { formatDuration, HISTORY_KEPT_MS, RETRY_DELAYS_MS, RETRY_JITTER, retryBackoff } from './delivery'
import { pruneDeliveryHistory } from './delivery-repo'
import { createSecretBox } from './secret-box'

describe('retryBackoff', () => {
  test('the default schedule retries for about a day, ten times, growing', () => {
    const total = RETRY_DELAYS_MS.reduce((sum, delay) => sum + delay, 0)
    expect(total).toBeGreaterThan(20 * 3_600_000)
    expect(total).toBeLessThan(28 * 3_600_000)
    expect(RETRY_DELAYS_MS).toHaveLength(10)
    for (let n = 1; n < RETRY_DELAYS_MS.length; n++) expect(RETRY_DELAYS_MS[n]!).toBeGreaterThanOrEqual(RETRY_DELAYS_MS[n - 1]!)
    expect(RETRY_DELAYS_MS[0]).toBe(5_000)
  })

  test('attempt n waits the nth delay within the jitter, and nothing after the last', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 14 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (failed, draw) => {
        const delay = retryBackoff(RETRY_DELAYS_MS, RETRY_JITTER, () => draw)(failed)
        const base = RETRY_DELAYS_MS[failed - 1]
        if (base === undefined) return delay === null
        return delay !== null && delay >= Math.floor(base * (1 - RETRY_JITTER)) && delay <= Math.ceil(base * (1 + RETRY_JITTER))
      }),
    )
  })

  test('the jitter spreads retries both ways', () => {
    const backoff = retryBackoff([10_000], 0.2)
    const delays = Array.from({ length: 200 }, () => backoff(1)!)
    expect(Math.min(...delays)).toBeLessThan(9_000)
    expect(Math.max(...delays)).toBeGreaterThan(11_000)
    expect(retryBackoff([10_000], 0)(1)).toBe(10_000)
  })
})

test.each([
  [0, '0 s'],
  [12_400, '12 s'],
  [59_400, '59 s'],
  [59_600, '1 min'],
  [60_000, '1 min'],
  [3_599_000, '59 min'],
  [3_600_000, '1 h'],
  [85_355_000, '23 h 42 min'],
])('formatDuration(%d) is %s', (ms, words) => {
  expect(formatDuration(ms)).toBe(words)
})

describe('pruneDeliveryHistory', async () => {
  const { db } = await freshDatabase('seeded')
  const box = await createSecretBox(TEST_WEBHOOK_KEY)
  const { id: webhookId } = await seedWebhook(db, box, { accountId: await webhookOwner(db), url: 'https://example.com/hook' })

  test('removes finished entries and attempts past the window, keeps pending entries and recent history', async () => {
    const now = systemClock.now()
    const old = new Date(now.getTime() - HISTORY_KEPT_MS - 86_400_000)
    const recent = new Date(now.getTime() - 86_400_000)
    const entries = {
      oldDelivered: await queueDelivery(db, webhookId),
      oldDead: await queueDelivery(db, webhookId),
      oldPending: await queueDelivery(db, webhookId),
      recentDelivered: await queueDelivery(db, webhookId),
    }
    const set = (id: number, status: string, createdAt: Date) =>
      db.execute(sql`update webhook_deliveries set status = ${status}, created_at = ${createdAt.toISOString()}::timestamptz where id = ${id}`)
    await set(entries.oldDelivered.id, 'delivered', old)
    await set(entries.oldDead.id, 'dead', old)
    await set(entries.oldPending.id, 'pending', old)
    await set(entries.recentDelivered.id, 'delivered', recent)
    const attempt = (deliveryId: number, at: Date) =>
      db.execute(sql`insert into webhook_attempts (webhook_id, delivery_id, event_id, event, attempt, attempted_at, duration_ms, outcome)
                     values (${webhookId}, ${deliveryId}, 'msg_x', 'price_alert', 1, ${at.toISOString()}::timestamptz, 5, 'failed')`)
    // An old attempt of the pending entry (it has been failing), and a recent one of it.
    await attempt(entries.oldPending.id, old)
    await attempt(entries.oldPending.id, recent)
    await attempt(entries.oldDelivered.id, old)
    await attempt(entries.recentDelivered.id, recent)

    // 2 old attempts directly, 2 old finished entries (one attempt went with its entry, counted once above).
    expect(await pruneDeliveryHistory(db, new Date(now.getTime() - HISTORY_KEPT_MS))).toBe(4)
    const left = await selectRows<{ id: number }>(db, sql`select id::int as id from webhook_deliveries order by id`)
    expect(left.map((row) => row.id)).toEqual([entries.oldPending.id, entries.recentDelivered.id])
    const attemptsLeft = await selectRows<{ delivery_id: number }>(db, sql`select delivery_id::int as delivery_id from webhook_attempts order by id`)
    expect(attemptsLeft.map((row) => row.delivery_id)).toEqual([entries.oldPending.id, entries.recentDelivered.id])
    expect(await pruneDeliveryHistory(db, new Date(now.getTime() - HISTORY_KEPT_MS))).toBe(0)
  })
})
