import { afterAll, afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'drizzle-orm'
import { Webhook } from 'standardwebhooks'
import type { Database } from '../../src/db/client'
import { webhooks } from '../../src/db/schema'
import { createDeliveryWorker, type DeliveryWorkerOptions, retryBackoff } from '../../src/modules/webhooks/delivery'
import { createSecretBox, EMBEDDED_KEY_FILE } from '../../src/modules/webhooks/secret-box'
import { DELIVERY_TIMEOUT_MS, MAX_RESPONSE_BYTES } from '../../src/modules/webhooks/send'
import { checkTargetAtCreation, type Resolver } from '../../src/modules/webhooks/target-guard'
import { type Clock, systemClock } from '../../src/shared/clock'
import { createLogger, type Logger } from '../../src/shared/logger'
import { type ReceivedRequest, startWebhookReceiver } from '../fixtures/webhook-receiver'
import { fakeClock } from '../helpers/clock'
import { freshDatabase, selectRows, testLogger } from '../helpers/db'
import { TEST_DATABASE_URL } from '../helpers/env'
import { eventually } from '../helpers/eventually'
import { ROOT, serverProcesses } from '../helpers/process'
import { queueDelivery, seedWebhook, TEST_WEBHOOK_KEY, webhookOwner } from '../helpers/webhooks'

// The delivery worker in this process against a real receiver over HTTP, on either database.
// Retries, backoff, timeouts and polls run on a fake clock that starts at the real now
// (docs/testing.md "Time"): the standardwebhooks oracle refuses a timestamp more than five minutes
// from now. The rest runs on the system clock.

const database = await freshDatabase('seeded')
const db: Database = database.db
const box = await createSecretBox(TEST_WEBHOOK_KEY)
const receiver = await startWebhookReceiver()
afterAll(() => receiver.stop(), 30_000)
const owner = await webhookOwner(db)
const OPEN = { allowPrivateTargets: true }
const POLL_MS = 50
/** A fake clock standing at the real now, so what the worker signs still verifies. */
const clockFromNow = () => fakeClock(systemClock.now())

type Options = Partial<DeliveryWorkerOptions>
// Every test's workers stop after it: a worker left polling would take the next test's entries.
const workers: { stop(): Promise<void> }[] = []
afterEach(async () => {
  receiver.release()
  await Promise.all(workers.splice(0).map((worker) => worker.stop()))
}, 30_000)
function worker(options: Options = {}, { logger = testLogger, clock = systemClock }: { logger?: Logger; clock?: Clock } = {}) {
  const created = createDeliveryWorker(
    { db, clock, logger },
    { settings: { secrets: box, targets: OPEN }, isLeader: () => true, pollMs: POLL_MS, backoff: retryBackoff([60_000], 0), ...options },
  )
  workers.push(created)
  return created
}

const hook = (name: string) => `${receiver.url}/hooks/${name}`

type DeliveryRow = { status: string; attempts: number; last_status_code: number | null; last_error: string | null; delivered: boolean; due_in_ms: number }
/** The outbox entry; `due_in_ms` counts from `now` (the worker's clock). */
async function delivery(id: number, now: Date = systemClock.now()): Promise<DeliveryRow | undefined> {
  const [row] = await selectRows<DeliveryRow>(
    db,
    sql`select status, attempts, last_status_code, last_error, delivered_at is not null as delivered,
               (extract(epoch from next_attempt_at - ${now.toISOString()}::timestamptz) * 1000)::float8 as due_in_ms
        from webhook_deliveries where id = ${id}`,
  )
  return row
}
type AttemptRow = {
  event_id: string
  attempt: number
  outcome: string
  status_code: number | null
  error: string | null
  retried: boolean
  duration_ms: number
  at_ms: number
}
const attempts = (deliveryId: number) =>
  selectRows<AttemptRow>(
    db,
    sql`select event_id, attempt, outcome, status_code, error, next_retry_at is not null as retried, duration_ms,
               (extract(epoch from attempted_at) * 1000)::float8 as at_ms
        from webhook_attempts where delivery_id = ${deliveryId} order by id`,
  )
type WebhookRow = { is_active: boolean; consecutive_failures: number; disabled: boolean; disabled_reason: string | null }
async function webhookRow(id: number): Promise<WebhookRow> {
  const [row] = await selectRows<WebhookRow>(db, sql`select is_active, consecutive_failures, disabled_at is not null as disabled, disabled_reason from webhooks where id = ${id}`)
  return row!
}

const isDelivered = (id: number) => async () => (await delivery(id))?.status === 'delivered'

/** The request verified by the independent Standard Webhooks library; throws when the signature does not hold. */
function verified(request: ReceivedRequest, secret: string) {
  return new Webhook(secret).verify(request.body, request.headers)
}

beforeEach(async () => {
  await db.delete(webhooks)
  receiver.reset()
  receiver.release()
})

describe('one due entry', () => {
  test('is sent as exactly one POST, signed as Standard Webhooks verifies, with the stored payload byte for byte', async () => {
    const { id: webhookId, secret } = await seedWebhook(db, box, { accountId: owner, url: hook('one?token=abc') })
    const queued = await queueDelivery(db, webhookId)
    await worker().drain()

    const [request, ...more] = receiver.received()
    expect(more).toHaveLength(0)
    expect(request!.method).toBe('POST')
    expect(request!.path).toBe('/hooks/one?token=abc')
    expect(request!.body).toBe(queued.payload)
    expect(request!.headers['webhook-id']).toBe(queued.eventId)
    expect(request!.headers['content-type']).toBe('application/json')
    expect(Math.abs(Number(request!.headers['webhook-timestamp']) - systemClock.now().getTime() / 1000)).toBeLessThan(60)
    expect(verified(request!, secret)).toEqual(JSON.parse(queued.payload))
    // The oracle is not a pushover: another secret or a changed byte fails.
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`).verify(request!.body, request!.headers)).toThrow()
    expect(() => new Webhook(secret).verify(request!.body.replace('12.75', '12.76'), request!.headers)).toThrow()

    expect(await delivery(queued.id)).toMatchObject({ status: 'delivered', attempts: 1, last_status_code: 200, last_error: null, delivered: true })
    expect(await attempts(queued.id)).toMatchObject([{ event_id: queued.eventId, attempt: 1, outcome: 'delivered', status_code: 200, error: null, retried: false }])
    expect(await webhookRow(webhookId)).toMatchObject({ is_active: true, consecutive_failures: 0 })

    // Delivered is final: a later full pass (a drain waits for what it sends) sends nothing.
    await worker().drain()
    expect(receiver.received()).toHaveLength(1)
  })

  test('an entry not yet due, or of an inactive webhook, is not sent', async () => {
    const clock = clockFromNow()
    const later = await seedWebhook(db, box, { accountId: owner, url: hook('later') })
    const notYet = await queueDelivery(db, later.id, { dueAt: new Date(clock.now().getTime() + 3_600_000) })
    const inactive = await seedWebhook(db, box, { accountId: owner, url: hook('inactive') })
    await db.execute(sql`update webhooks set is_active = false where id = ${inactive.id}`)
    const parked = await queueDelivery(db, inactive.id, { dueAt: clock.now() })
    const running = worker({}, { clock })
    await running.drain()
    await clock.advance(3_600_000 - 1)
    await running.drain()
    expect(receiver.received()).toHaveLength(0)
    expect(await delivery(notYet.id)).toMatchObject({ status: 'pending', attempts: 0 })
    expect(await delivery(parked.id)).toMatchObject({ status: 'pending', attempts: 0 })
    // Due at last, the entry goes out; the inactive webhook's still does not.
    await clock.advance(1)
    await running.drain()
    expect(receiver.received().map((request) => request.path)).toEqual(['/hooks/later'])
    expect(await delivery(parked.id)).toMatchObject({ status: 'pending', attempts: 0 })
  })
})

describe('retries', () => {
  test('500 then 200: the same webhook-id twice, the second after the backoff, then nothing more', async () => {
    const clock = clockFromNow()
    const { id: webhookId, secret } = await seedWebhook(db, box, { accountId: owner, url: hook('flaky') })
    const queued = await queueDelivery(db, webhookId, { dueAt: clock.now() })
    receiver.script([{ kind: 'status', status: 500 }])
    const backoffMs = 30_000
    const running = worker({ backoff: retryBackoff([backoffMs], 0) }, { clock })
    // Each drain is a full pass that waits for what it sends.
    await running.drain()
    await clock.advance(backoffMs - 1)
    await running.drain()
    expect(receiver.received()).toHaveLength(1)
    await clock.advance(1)
    await running.drain()
    expect(receiver.received()).toHaveLength(2)
    // Delivered: a pass long after sends nothing more.
    await clock.advance(backoffMs * 10)
    await running.drain()
    expect(receiver.received()).toHaveLength(2)

    const [first, second] = receiver.received()
    expect(first!.headers['webhook-id']).toBe(queued.eventId)
    expect(second!.headers['webhook-id']).toBe(queued.eventId)
    expect(second!.body).toBe(first!.body)
    expect(verified(first!, secret)).toEqual(verified(second!, secret))

    expect(await delivery(queued.id)).toMatchObject({ status: 'delivered', attempts: 2, last_status_code: 200, last_error: null })
    const tried = await attempts(queued.id)
    expect(tried).toMatchObject([
      { attempt: 1, outcome: 'failed', status_code: 500, error: 'answered 500', retried: true },
      { attempt: 2, outcome: 'delivered', status_code: 200, error: null, retried: false },
    ])
    expect(tried[1]!.at_ms - tried[0]!.at_ms).toBe(backoffMs)
    expect((await webhookRow(webhookId)).consecutive_failures).toBe(0)
  })

  test('a failure schedules the next attempt by the backoff and counts against the webhook', async () => {
    const clock = clockFromNow()
    const { id: webhookId } = await seedWebhook(db, box, { accountId: owner, url: hook('down') })
    const queued = await queueDelivery(db, webhookId, { dueAt: clock.now() })
    receiver.script([], { kind: 'status', status: 503 })
    await worker({ backoff: retryBackoff([60_000], 0) }, { clock }).drain()
    const row = await delivery(queued.id, clock.now())
    expect(row).toMatchObject({ status: 'pending', attempts: 1, last_status_code: 503, last_error: 'answered 503' })
    expect(row!.due_in_ms).toBe(60_000)
    expect((await webhookRow(webhookId)).consecutive_failures).toBe(1)
  })

  test('sustained failure: after the last retry the entry is dead, the webhook disabled with a reason, its other pending entries dead', async () => {
    const clock = clockFromNow()
    const failing = await seedWebhook(db, box, { accountId: owner, url: hook('failing') })
    const healthyReceiver = await startWebhookReceiver()
    const healthy = await seedWebhook(db, box, { accountId: owner, url: `${healthyReceiver.url}/hooks/healthy` })
    const exhausted = await queueDelivery(db, failing.id, { dueAt: clock.now() })
    const waiting = await queueDelivery(db, failing.id, { dueAt: new Date(clock.now().getTime() + 3_600_000) })
    const other = await queueDelivery(db, healthy.id, { dueAt: clock.now() })
    receiver.script([], { kind: 'status', status: 500 })
    const running = worker({ backoff: retryBackoff([5_000, 30_000], 0) }, { clock })
    await running.drain()
    await clock.advance(5_000)
    await running.drain()
    await clock.advance(30_000)
    await running.drain()

    expect(await delivery(exhausted.id)).toMatchObject({ status: 'dead', attempts: 3, last_status_code: 500, last_error: 'answered 500' })
    expect(await delivery(waiting.id)).toMatchObject({ status: 'dead', attempts: 0, last_error: expect.stringContaining('webhook was disabled') })
    const disabled = await webhookRow(failing.id)
    expect(disabled).toMatchObject({ is_active: false, disabled: true, consecutive_failures: 3 })
    expect(disabled.disabled_reason).toMatch(/failed for \d+ s \(3 attempts\); last error: answered 500$/)
    expect((await attempts(exhausted.id)).map((row) => [row.attempt, row.outcome, row.status_code, row.retried])).toEqual([
      [1, 'failed', 500, true],
      [2, 'failed', 500, true],
      [3, 'failed', 500, false],
    ])
    // Another webhook is not concerned.
    expect(await delivery(other.id)).toMatchObject({ status: 'delivered' })
    expect(await webhookRow(healthy.id)).toMatchObject({ is_active: true, disabled: false, consecutive_failures: 0 })
    await healthyReceiver.stop()

    // A disabled webhook gets nothing more, even a new entry.
    const before = receiver.received().filter((request) => request.path === '/hooks/failing').length
    expect(before).toBe(3)
    await queueDelivery(db, failing.id, { dueAt: clock.now() })
    receiver.script([])
    await running.drain()
    expect(receiver.received().filter((request) => request.path === '/hooks/failing')).toHaveLength(3)
  })
})

describe('hostile and broken receivers', () => {
  test('a receiver that never answers: the attempt ends at the timeout, the worker goes on', async () => {
    const clock = clockFromNow()
    const { id: webhookId } = await seedWebhook(db, box, { accountId: owner, url: hook('hang') })
    const queued = await queueDelivery(db, webhookId, { dueAt: clock.now() })
    receiver.script([{ kind: 'hang' }])
    const draining = worker({}, { clock }).drain()
    await receiver.waitFor(1)
    // Just before the timeout the attempt is still open: its timer alone waits, nothing is recorded.
    await clock.advance(DELIVERY_TIMEOUT_MS - 1)
    expect(clock.pending()).toBe(1)
    expect(await delivery(queued.id)).toMatchObject({ attempts: 1, last_error: null })
    await clock.advance(1)
    await draining
    expect(receiver.received()).toHaveLength(1)
    expect(await delivery(queued.id)).toMatchObject({ status: 'pending', attempts: 1, last_status_code: null, last_error: 'no response within 10 s' })
    const [attempt] = await attempts(queued.id)
    expect(attempt).toMatchObject({ outcome: 'failed', status_code: null, retried: true })
    expect(attempt!.duration_ms).toBe(DELIVERY_TIMEOUT_MS)
  })

  test('a redirect is not followed and counts as a failure', async () => {
    const { id: webhookId } = await seedWebhook(db, box, { accountId: owner, url: hook('moved') })
    const queued = await queueDelivery(db, webhookId)
    receiver.script([{ kind: 'status', status: 302 }])
    // The drain waits for the attempt, which would include following the redirect.
    await worker().drain()
    expect(receiver.received().map((request) => request.path)).toEqual(['/hooks/moved'])
    expect(await delivery(queued.id)).toMatchObject({ status: 'pending', last_status_code: 302, last_error: 'answered 302: redirects are not followed' })
  })

  test('a 10 MB response body neither stalls the worker nor is read beyond the cap', async () => {
    const clock = clockFromNow()
    const { id: webhookId } = await seedWebhook(db, box, { accountId: owner, url: hook('huge') })
    const queued = await queueDelivery(db, webhookId, { dueAt: clock.now() })
    const failing = await queueDelivery(db, (await seedWebhook(db, box, { accountId: owner, url: hook('huge-500') })).id, { dueAt: clock.now() })
    receiver.script([
      { kind: 'huge', bytes: 10_000_000 },
      // Larger still, so that reading it whole would show in the bytes the receiver got out.
      { kind: 'huge', bytes: 64_000_000, status: 500 },
    ])
    // The clock never moves, so the attempts' timeout cannot end them: the drain ending means each
    // ended on its status line, without waiting for the body.
    await worker({}, { clock }).drain()
    expect(clock.pending()).toBe(0)
    // The status decides: the 2xx is delivered, the 500 is not, whatever followed.
    const outcomes = [await delivery(queued.id), await delivery(failing.id)].map((row) => row?.status).sort()
    expect(outcomes).toEqual(['delivered', 'pending'])
    // The worker closed each connection after the first few KB (MAX_RESPONSE_BYTES); the receiver
    // pushed only what the sockets' buffers took (a few MB on loopback), not the 74 MB.
    expect(receiver.hugeBytesSent()).toBeLessThan(20_000_000)
    expect(MAX_RESPONSE_BYTES).toBe(4_096)
  })

  test('a receiver that resets the connection is a failed attempt without a status; the retry delivers', async () => {
    const clock = clockFromNow()
    const { id: webhookId } = await seedWebhook(db, box, { accountId: owner, url: hook('reset') })
    const queued = await queueDelivery(db, webhookId, { dueAt: clock.now() })
    receiver.script([{ kind: 'reset' }])
    // An attempt timeout no advance below can reach: the retry in flight must end on its answer.
    const running = worker({ backoff: retryBackoff([5_000], 0), timeoutMs: 3_600_000 }, { clock })
    running.start()
    await eventually(async () => (await attempts(queued.id)).length === 1, { what: 'the first attempt recorded' })
    await clock.advance(5_000)
    // The worker's own polls (no drain, no wake-up) send the retry once it is due.
    await eventually(
      async () => {
        await clock.advance(POLL_MS)
        return isDelivered(queued.id)()
      },
      { what: 'delivered after the reset' },
    )
    const [reset, ok] = await attempts(queued.id)
    expect(reset).toMatchObject({ attempt: 1, outcome: 'failed', status_code: null })
    expect(reset!.error).toMatch(/could not connect|answered/)
    expect(ok).toMatchObject({ attempt: 2, outcome: 'delivered', status_code: 200 })
  })

  test('a connection refused (nothing listening) is a failed attempt', async () => {
    const closed = await startWebhookReceiver()
    const url = `${closed.url}/hooks/gone`
    await closed.stop()
    const { id: webhookId } = await seedWebhook(db, box, { accountId: owner, url })
    const queued = await queueDelivery(db, webhookId)
    await worker().drain()
    expect(await delivery(queued.id)).toMatchObject({ status: 'pending', attempts: 1, last_status_code: null, last_error: expect.stringContaining('could not connect') })
  })
})

describe('targets refused at delivery (WEBHOOK_ALLOW_PRIVATE_TARGETS off)', () => {
  const port = new URL(receiver.url).port
  /** Public when the webhook was created, the receiver's loopback address at delivery: DNS rebinding. */
  function rebinding(): Resolver {
    let calls = 0
    return async () => [{ address: ++calls === 1 ? '93.184.215.14' : '127.0.0.1', family: 4 }]
  }
  const fixed =
    (...addresses: string[]): Resolver =>
    async () =>
      addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))

  test.each([
    ['a loopback literal', `http://127.0.0.1:${port}/hooks/x`, undefined, 'a loopback address'],
    ['an IPv6 loopback literal', `http://[::1]:${port}/hooks/x`, undefined, 'a loopback address'],
    ['a private literal', 'http://10.1.2.3/hooks/x', undefined, 'a private address'],
    ['the cloud metadata address', 'http://169.254.169.254/latest/meta-data/', undefined, 'link-local (cloud metadata)'],
    ['a name resolving to loopback', `http://hooks.example.test:${port}/hooks/x`, fixed('127.0.0.1'), 'resolves to a loopback address (127.0.0.1)'],
    ['a name resolving to the metadata address', 'http://metadata.example.test/x', fixed('169.254.169.254'), 'link-local (cloud metadata)'],
    ['a name with one private address among public ones', `http://mixed.example.test:${port}/x`, fixed('93.184.215.14', '192.168.1.20'), 'a private address (192.168.1.20)'],
  ])('%s is refused: nothing reaches it, the attempt says why and is retried', async (_, url, resolve, why) => {
    const { id: webhookId } = await seedWebhook(db, box, { accountId: owner, url })
    const queued = await queueDelivery(db, webhookId)
    await worker({ settings: { secrets: box, targets: { allowPrivateTargets: false, resolve } } }).drain()
    expect(receiver.received()).toHaveLength(0)
    const row = await delivery(queued.id)
    expect(row).toMatchObject({ status: 'pending', attempts: 1, last_status_code: null })
    expect(row!.last_error).toContain(why)
    expect(await attempts(queued.id)).toMatchObject([{ outcome: 'failed', status_code: null, error: row!.last_error, retried: true }])
  })

  test('DNS rebinding: a name public at creation and loopback at delivery never reaches the receiver', async () => {
    const targets = { allowPrivateTargets: false, resolve: rebinding() }
    const url = `http://rebind.example.test:${port}/hooks/rebind`
    await checkTargetAtCreation(url, targets, systemClock) // accepted: it resolved public then
    const { id: webhookId } = await seedWebhook(db, box, { accountId: owner, url })
    const queued = await queueDelivery(db, webhookId)
    await worker({ settings: { secrets: box, targets } }).drain()
    expect(receiver.received()).toHaveLength(0)
    expect((await delivery(queued.id))!.last_error).toBe("url's host rebind.example.test resolves to a loopback address (127.0.0.1); webhook targets must be public")
  })

  test('the same name is delivered when the operator allows private targets (the refusal above is the policy, not a broken URL)', async () => {
    const { id: webhookId } = await seedWebhook(db, box, { accountId: owner, url: `http://rebind.example.test:${port}/hooks/allowed` })
    const queued = await queueDelivery(db, webhookId)
    await worker({ settings: { secrets: box, targets: { allowPrivateTargets: true, resolve: fixed('127.0.0.1') } } }).drain()
    expect(receiver.received().map((request) => request.path)).toEqual(['/hooks/allowed'])
    expect((await delivery(queued.id))!.status).toBe('delivered')
  })
})

describe('who delivers', () => {
  test('without a secret box nothing is sent, entries stay pending, and the warning is logged once', async () => {
    const clock = clockFromNow()
    const { id: webhookId } = await seedWebhook(db, box, { accountId: owner, url: hook('no-key') })
    const queued = await queueDelivery(db, webhookId, { dueAt: clock.now() })
    const lines: string[] = []
    const logger = createLogger('warn', { write: (line: string) => void lines.push(line) })
    const keyless = worker({ settings: { secrets: undefined, targets: OPEN } }, { logger, clock })
    await keyless.drain()
    keyless.start()
    // Three polls: each ends by arming the next, so one is waiting after them.
    await clock.advance(POLL_MS * 3)
    expect(clock.pending()).toBe(1)
    await keyless.drain()
    expect(receiver.received()).toHaveLength(0)
    expect(await delivery(queued.id)).toMatchObject({ status: 'pending', attempts: 0 })
    expect(lines.filter((line) => line.includes('WEBHOOK_SECRET_KEY'))).toHaveLength(1)
  })

  test('only the leader delivers; a node that starts leading delivers what waited', async () => {
    const clock = clockFromNow()
    const { id: webhookId } = await seedWebhook(db, box, { accountId: owner, url: hook('leader') })
    const queued = await queueDelivery(db, webhookId, { dueAt: clock.now() })
    let leading = false
    const follower = worker({ isLeader: () => leading }, { clock })
    follower.start()
    await follower.drain()
    // Three polls while following: each ends by arming the next, so one is waiting after them.
    await clock.advance(POLL_MS * 3)
    expect(clock.pending()).toBe(1)
    expect(receiver.received()).toHaveLength(0)
    expect(await delivery(queued.id)).toMatchObject({ status: 'pending', attempts: 0 })
    leading = true
    follower.wake()
    await receiver.waitFor(1)
    await eventually(isDelivered(queued.id), { what: 'delivered once leading' })
  })

  test('a webhook deleted while its delivery is in flight: no crash, nothing recorded, the worker goes on', async () => {
    const doomed = await seedWebhook(db, box, { accountId: owner, url: hook('doomed') })
    await queueDelivery(db, doomed.id)
    receiver.script([{ kind: 'hang' }])
    const running = worker()
    running.start()
    await receiver.waitFor(1)
    await db.delete(webhooks).where(sql`${webhooks.id} = ${doomed.id}`)
    receiver.release()
    const next = await queueDelivery(db, (await seedWebhook(db, box, { accountId: owner, url: hook('after') })).id)
    await eventually(isDelivered(next.id), { what: 'the next delivery' })
    const [orphans] = await selectRows<{ n: number }>(db, sql`select count(*)::int as n from webhook_attempts where webhook_id = ${doomed.id}`)
    expect(orphans!.n).toBe(0)
  })

  test('concurrency is bounded: with 3 slots, 3 requests are in flight and the rest wait', async () => {
    const clock = clockFromNow()
    const { id: webhookId } = await seedWebhook(db, box, { accountId: owner, url: hook('bounded') })
    const queued = await Promise.all(Array.from({ length: 10 }, () => queueDelivery(db, webhookId, { dueAt: clock.now() })))
    receiver.script([], { kind: 'hang' })
    const running = worker({ concurrency: 3 }, { clock })
    running.start()
    await receiver.waitFor(3)
    // Three attempts wait on their timeouts, the worker on its next poll.
    await eventually(() => clock.pending() === 4, { what: 'the three attempts and the poll waiting' })
    // A poll with every slot taken: once it has armed the next one it is over, and any claim it
    // made would be in the outbox.
    await clock.advance(POLL_MS)
    await eventually(() => clock.pending() === 4, { what: 'the poll over' })
    const [claimed] = await selectRows<{ n: number }>(db, sql`select count(*)::int as n from webhook_deliveries where attempts > 0`)
    expect(claimed!.n).toBe(3)
    expect(receiver.received()).toHaveLength(3)
    receiver.script([])
    receiver.release()
    await eventually(
      async () => {
        const rows = await Promise.all(queued.map((entry) => delivery(entry.id)))
        return rows.every((row) => row?.status === 'delivered')
      },
      { what: 'all delivered' },
    )
    const ids = receiver.received().map((request) => request.headers['webhook-id'])
    expect(new Set(ids)).toEqual(new Set(queued.map((entry) => entry.eventId)))
    expect(ids).toHaveLength(10)
  })

  test('two workers on one outbox (a claim race): every entry is sent exactly once', async () => {
    const hooks = await Promise.all(Array.from({ length: 5 }, (_, n) => seedWebhook(db, box, { accountId: owner, url: hook(`race-${n}`) })))
    const queued = await Promise.all(Array.from({ length: 60 }, (_, n) => queueDelivery(db, hooks[n % hooks.length]!.id)))
    await Promise.all([worker({ concurrency: 8 }).drain(), worker({ concurrency: 8 }).drain()])
    const ids = receiver
      .received()
      .map((request) => request.headers['webhook-id'])
      .sort()
    expect(ids).toEqual(queued.map((entry) => entry.eventId).sort())
    const [counts] = await selectRows<{ delivered: number; attempts: number }>(
      db,
      sql`select count(*) filter (where status = 'delivered')::int as delivered, sum(attempts)::int as attempts from webhook_deliveries`,
    )
    expect(counts).toEqual({ delivered: 60, attempts: 60 })
  })

  test('an attempt whose claim lapsed (its worker died unacknowledged) is sent again with the same webhook-id', async () => {
    const { id: webhookId } = await seedWebhook(db, box, { accountId: owner, url: hook('lapsed') })
    const queued = await queueDelivery(db, webhookId)
    // As a worker that died mid-attempt leaves it: claimed (attempts 1), its claim now past.
    await db.execute(sql`update webhook_deliveries set attempts = 1, next_attempt_at = now() - interval '1 second' where id = ${queued.id}`)
    await worker().drain()
    expect(receiver.received().map((request) => request.headers['webhook-id'])).toEqual([queued.eventId])
    expect(await attempts(queued.id)).toMatchObject([{ attempt: 2, outcome: 'delivered' }])
  })

  test('a secret that cannot be opened with the configured key is a failed attempt, and nothing is sent', async () => {
    const { id: webhookId } = await seedWebhook(db, await createSecretBox(Buffer.alloc(32, 9).toString('base64')), { accountId: owner, url: hook('other-key') })
    const queued = await queueDelivery(db, webhookId)
    await worker().drain()
    expect(receiver.received()).toHaveLength(0)
    expect(await delivery(queued.id)).toMatchObject({ status: 'pending', attempts: 1, last_error: 'the signing secret could not be opened on the server' })
  })
})

// The real server (src/index.ts) as the worker: killed mid-delivery, and taking the lead. The test
// and the server share one database, which needs PostgreSQL: embedded PGlite is one process's data
// directory.
describe.skipIf(!TEST_DATABASE_URL)('the real server as the delivery worker', async () => {
  const servers = serverProcesses()
  const killed = await freshDatabase('seeded')
  // Nothing is due to sync, so the server does nothing but deliver.
  await killed.db.execute(sql`update games set last_synced_at = now()`)
  const target = await startWebhookReceiver()
  afterAll(() => target.stop(), 30_000)
  const env = {
    PATH: process.env.PATH ?? '',
    DATABASE_URL: killed.url,
    PORT: '0',
    HOST: '127.0.0.1',
    DEMO_SCALE: 'tiny',
    LEADER_RETRY_SECONDS: '1',
    CONDITION_RECRAWL_PER_MINUTE: '0',
    WEBHOOK_SECRET_KEY: TEST_WEBHOOK_KEY,
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    // `listening` is logged at info.
    LOG_LEVEL: 'info',
  }
  const start = () => servers.start(env)
  const statusOf = async (eventId: string) => {
    const [row] = await selectRows<{ status: string; attempts: number; claimed_for_ms: number }>(
      killed.db,
      sql`select status, attempts, (extract(epoch from next_attempt_at - now()) * 1000)::float8 as claimed_for_ms
          from webhook_deliveries where event_id = ${eventId}`,
    )
    return row!
  }

  test('the unacknowledged attempt is sent again, with the same webhook-id, after the restart; nothing else twice', async () => {
    const owner = await webhookOwner(killed.db)
    const first = await seedWebhook(killed.db, box, { accountId: owner, url: `${target.url}/hooks/a` })
    const second = await seedWebhook(killed.db, box, { accountId: owner, url: `${target.url}/hooks/b` })
    const secrets = new Map([
      ['/hooks/a', first.secret],
      ['/hooks/b', second.secret],
    ])
    const queued = [await queueDelivery(killed.db, first.id), await queueDelivery(killed.db, first.id), await queueDelivery(killed.db, second.id)]
    // Whichever request arrives first is held: the server dies before it has an answer.
    target.script([{ kind: 'hang' }])

    const a = await start()
    const sent = await target.waitFor(3, 30_000)
    const held = sent[0]!.headers['webhook-id']!
    const others = queued.map((entry) => entry.eventId).filter((id) => id !== held)
    expect(others).toHaveLength(2)
    await eventually(async () => (await Promise.all(others.map(statusOf))).every((row) => row.status === 'delivered'), { what: 'the other two delivered' })

    a.child.kill('SIGKILL')
    await a.child.exited
    const orphan = await statusOf(held)
    expect(orphan).toMatchObject({ status: 'pending', attempts: 1 })
    // Claimed for the attempt's timeout and a margin (10 s + 5 s): retried once that lapses.
    expect(orphan.claimed_for_ms).toBeLessThanOrEqual(15_000)
    expect(target.received()).toHaveLength(3)

    const b = await start()
    const [again] = (await target.waitFor(4, 40_000)).slice(3)
    expect(again!.headers['webhook-id']).toBe(held)
    expect(again!.body).toBe(sent[0]!.body)
    expect(verified(again!, secrets.get(again!.path)!)).toEqual(JSON.parse(again!.body))
    await eventually(async () => (await statusOf(held)).status === 'delivered', { what: 'the held event delivered' })
    expect(await statusOf(held)).toMatchObject({ status: 'delivered', attempts: 2 })
    // The killed attempt left no record; the one that got through did.
    const recorded = await selectRows<{ attempt: number; outcome: string }>(killed.db, sql`select attempt, outcome from webhook_attempts where event_id = ${held} order by id`)
    expect(recorded).toEqual([{ attempt: 2, outcome: 'delivered' }])

    // A later entry delivered: the worker has claimed since, and a claim counts its attempt at once,
    // so anything sent twice would show now. Nothing but the held event was.
    const later = await queueDelivery(killed.db, second.id)
    await eventually(async () => (await statusOf(later.eventId)).status === 'delivered', { what: 'a later entry delivered' })
    const claims = await selectRows<{ event_id: string; attempts: number }>(killed.db, sql`select event_id, attempts from webhook_deliveries`)
    expect(Object.fromEntries(claims.map((row) => [row.event_id, row.attempts]))).toEqual({ [held]: 2, [others[0]!]: 1, [others[1]!]: 1, [later.eventId]: 1 })
    const counts = new Map<string, number>()
    for (const request of target.received()) counts.set(request.headers['webhook-id']!, (counts.get(request.headers['webhook-id']!) ?? 0) + 1)
    expect(Object.fromEntries(counts)).toEqual({ [held]: 2, [others[0]!]: 1, [others[1]!]: 1, [later.eventId]: 1 })

    // A graceful stop lets the worker finish and exits cleanly.
    b.child.kill('SIGTERM')
    expect(await b.child.exited).toBe(0)
  }, 120_000)

  test('a node that starts leading fires the crossings left unevaluated and delivers them at once', async () => {
    target.reset()
    const [priced] = await selectRows<{ id: number; name: string }>(
      killed.db,
      sql`select c.id, c.name from cards c where c.id = (select min(card_id) from card_prices where market_price > 1)`,
    )
    // Armed, with the price already past the threshold: as a leader that died between a sync's commit and its evaluation leaves it.
    const crossed = await seedWebhook(killed.db, box, {
      accountId: await webhookOwner(killed.db),
      url: `${target.url}/hooks/caught-up`,
      cardId: priced!.id,
      condition: 'above',
      threshold: 0.5,
    })
    const started = await start()
    const [request] = await target.waitFor(1, 20_000)
    const payload = verified(request!, crossed.secret) as Record<string, unknown>
    expect(payload).toMatchObject({ event: 'price_alert', card_id: priced!.id, card_name: priced!.name, condition: 'above', threshold: 0.5 })
    // A later entry to another webhook delivered: the leader has claimed since, so a second alert
    // or a second attempt would show now. The crossing fired once and went out once.
    const witness = await seedWebhook(killed.db, box, { accountId: await webhookOwner(killed.db), url: `${target.url}/hooks/witness` })
    const later = await queueDelivery(killed.db, witness.id)
    await eventually(async () => (await statusOf(later.eventId)).status === 'delivered', { what: 'a later entry delivered' })
    const alerts = await selectRows<{ status: string; attempts: number }>(killed.db, sql`select status, attempts from webhook_deliveries where webhook_id = ${crossed.id}`)
    expect(alerts).toEqual([{ status: 'delivered', attempts: 1 }])
    expect(target.received().map((received) => received.path)).toEqual(['/hooks/caught-up', '/hooks/witness'])
    started.child.kill('SIGTERM')
    expect(await started.child.exited).toBe(0)
  }, 120_000)
})

describe('starting the server', () => {
  test('an embedded key file that does not hold a key stops the start with a message naming it', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'tcg-webhook-key-'))
    try {
      writeFileSync(join(dataDir, EMBEDDED_KEY_FILE), 'not a key\n')
      const child = Bun.spawn([process.execPath, 'src/index.ts'], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '', DATA_DIR: dataDir, DEMO_SCALE: 'tiny', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
        stdout: 'pipe',
        stderr: 'pipe',
      })
      const [code, stderr] = await Promise.all([child.exited, new Response(child.stderr).text()])
      expect(code).toBe(1)
      expect(stderr.trim()).toBe(
        `cannot start: ${join(dataDir, EMBEDDED_KEY_FILE)} does not hold a webhook secret key (32 bytes in base64); restore it, or remove it and every webhook`,
      )
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  }, 120_000)
})
