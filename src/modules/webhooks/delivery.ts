import type { Database } from '../../db/client'
import { type Clock, type Timer, withTimeout } from '../../shared/clock'
import type { Logger } from '../../shared/logger'
import type { Metrics } from '../../shared/metrics'
import type { AttemptRecord } from './attempts-repo'
import { type Claimed, claimDueDeliveries, countQueuedDeliveries, pruneDeliveryHistory, recordDead, recordDelivered, recordRetry } from './delivery-repo'
import { DELIVERY_TIMEOUT_MS, type SendResult, sendSigned } from './send'
import type { WebhookSettings } from './settings'

export interface DeliveryDeps {
  db: Database
  clock: Clock
  logger: Logger
  /** Where attempts are counted and the queue read on scrape; absent: not counted. */
  metrics?: Metrics
}

/**
 * Waits before each retry: after the first failed attempt 5 s, then 30 s, 2 min, … About a day
 * from the first attempt to the last (11 attempts); then the webhook is disabled.
 */
export const RETRY_DELAYS_MS: readonly number[] = [5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 7_200_000, 14_400_000, 28_800_000, 28_800_000]
/** Each wait is moved by up to this share either way, so receivers that failed together are not retried together. */
export const RETRY_JITTER = 0.2
/** How long past an attempt's timeout its claim lasts: time to open the secret and record the outcome. */
export const CLAIM_MARGIN_MS = 5_000
/** Attempts, and delivered or dead outbox entries, are kept this long. */
export const HISTORY_KEPT_MS = 30 * 86_400_000
const PRUNE_EVERY_MS = 3_600_000
/** The longest a scrape waits for the outbox's depth. */
const QUEUE_READ_TIMEOUT_MS = 2_000

/** The wait before the next attempt after `failedAttempts` attempts failed; null when retries are exhausted. */
export type Backoff = (failedAttempts: number) => number | null

/** Exponential backoff with jitter over `delays`: attempt n's failure waits delays[n-1] ± jitter. */
export function retryBackoff(delays: readonly number[] = RETRY_DELAYS_MS, jitter = RETRY_JITTER, random: () => number = Math.random): Backoff {
  return (failedAttempts) => {
    const delay = delays[failedAttempts - 1]
    if (delay === undefined) return null
    return Math.round(delay * (1 + jitter * (2 * random() - 1)))
  }
}

export interface DeliveryWorkerOptions {
  settings: WebhookSettings
  /** Delivers only while this is true: the node leading the scheduled jobs. */
  isLeader: () => boolean
  /** Attempts in flight at most (default 32). */
  concurrency?: number
  /** How often due entries are looked for without a wake-up (default 1 s). */
  pollMs?: number
  /** One attempt's bound (default the 10 s of send.ts). */
  timeoutMs?: number
  backoff?: Backoff
}

export interface DeliveryWorker {
  /** Starts polling (and prunes old history now and then). */
  start(): void
  /** Stops polling and waits for the attempts in flight (each bounded by the timeout). */
  stop(): Promise<void>
  /** Looks for due entries now: called after alerts are written so they go out at once. */
  wake(): void
  /** Delivers every entry due now and waits for the outcomes, including retries that fall due meanwhile (tests). */
  drain(): Promise<void>
}

/**
 * The delivery worker of the webhook outbox (docs/adr/0059-when-an-alert-fires.md), run on the leader. It claims due
 * entries in one short statement (`FOR UPDATE SKIP LOCKED`) that moves each entry's
 * `next_attempt_at` past its attempt's bound, so no lock or transaction is held during HTTP, and
 * an attempt whose worker died is retried once its claim lapses: delivery is at least once, with
 * the same `webhook-id` on every attempt. Each outcome is written in one short transaction.
 */
export function createDeliveryWorker(deps: DeliveryDeps, options: DeliveryWorkerOptions): DeliveryWorker {
  const { db, clock, logger } = deps
  const concurrency = options.concurrency ?? 32
  const pollMs = options.pollMs ?? 1_000
  const timeoutMs = options.timeoutMs ?? DELIVERY_TIMEOUT_MS
  const backoff = options.backoff ?? retryBackoff()
  const { secrets, targets } = options.settings

  const inFlight = new Map<number, Promise<void>>()
  let pumping: Promise<number> | undefined
  let pumpAgain = false
  let stopped = false
  let timer: Timer | undefined
  let lastPruneAt = Number.NEGATIVE_INFINITY
  let pruning: Promise<void> | undefined
  let warnedNoSecrets = false

  const mayRun = () => !stopped && options.isLeader()

  const outcomes = deps.metrics && {
    delivered: deps.metrics.webhookDeliveries.series('delivered'),
    retrying: deps.metrics.webhookDeliveries.series('retrying'),
    gaveUp: deps.metrics.webhookDeliveries.series('gave_up'),
  }
  deps.metrics?.readState({
    // Bounded as /ready's checks are: a scrape never waits on a stalled database.
    webhookQueue: () => withTimeout(clock, countQueuedDeliveries(db, clock.now()), QUEUE_READ_TIMEOUT_MS, () => new Error('webhook queue not read in time')),
    webhookInFlight: () => inFlight.size,
  })

  /** Claims up to `slots` due entries, skipping those locked by a concurrent claim or in flight here. */
  async function claim(slots: number): Promise<Claimed[]> {
    const now = clock.now()
    const claimUntil = new Date(now.getTime() + timeoutMs + CLAIM_MARGIN_MS)
    // A claim of ours can only lapse under a stalled event loop; never send the same entry twice at once from here.
    return claimDueDeliveries(db, { now, claimUntil, slots, exclude: [...inFlight.keys()] })
  }

  /** Claims into every free slot; returns how many entries it claimed. Concurrent calls share one run. */
  function pump(): Promise<number> {
    if (pumping) {
      pumpAgain = true
      return pumping
    }
    const run = claimIntoFreeSlots()
    pumping = run
    // Cleared here, not inside the run: a run that never awaits would finish before it is assigned.
    void run.finally(() => {
      if (pumping === run) pumping = undefined
    })
    return run
  }

  async function claimIntoFreeSlots(): Promise<number> {
    let claimed = 0
    try {
      do {
        pumpAgain = false
        if (!mayRun()) break
        if (!secrets) {
          if (!warnedNoSecrets) logger.warn('no webhook secret key: queued price alerts stay pending until WEBHOOK_SECRET_KEY is set')
          warnedNoSecrets = true
          break
        }
        maybePrune()
        const slots = concurrency - inFlight.size
        if (slots <= 0) break
        const entries = await claim(slots)
        claimed += entries.length
        for (const entry of entries) {
          const attempt = deliver(entry).finally(() => {
            inFlight.delete(entry.id)
            // A freed slot is filled at once; completions meanwhile join the same claim.
            if (mayRun()) void pump()
          })
          inFlight.set(entry.id, attempt)
        }
        // A full claim may have left more due entries behind.
        if (entries.length === slots) pumpAgain = true
      } while (pumpAgain)
    } catch (error) {
      logger.warn({ err: error }, 'could not claim webhook deliveries; trying again at the next poll')
    }
    return claimed
  }

  async function deliver(entry: Claimed): Promise<void> {
    const at = clock.now()
    let result: SendResult
    let secret: string | undefined
    try {
      secret = await secrets!.open(entry.secret_ciphertext)
    } catch {
      logger.error({ webhookId: entry.webhook_id }, "cannot open a webhook's signing secret with the configured key: was WEBHOOK_SECRET_KEY changed?")
    }
    if (secret === undefined) {
      result = { delivered: false, statusCode: null, durationMs: 0, error: 'the signing secret could not be opened on the server' }
    } else {
      result = await sendSigned({ url: entry.url, secret, eventId: entry.event_id, body: entry.payload, at }, { ...targets, timeoutMs, clock })
    }
    try {
      await settle(entry, at, result)
    } catch (error) {
      const code = (error as { cause?: { code?: string }; code?: string }).cause?.code ?? (error as { code?: string }).code
      // 23503: the webhook (and with it the entry) was deleted while the attempt was in flight.
      if (code === '23503') logger.debug({ webhookId: entry.webhook_id }, 'webhook deleted during its delivery')
      else logger.error({ err: error, webhookId: entry.webhook_id, eventId: entry.event_id }, 'could not record a webhook delivery attempt; it is retried once its claim lapses')
    }
  }

  /** Writes the attempt's outcome. Guarded by the attempt number: a claim that lapsed and was taken again is not overwritten. */
  async function settle(entry: Claimed, at: Date, result: SendResult) {
    const now = clock.now()
    const base = { webhookId: entry.webhook_id, deliveryId: entry.id, eventId: entry.event_id, event: entry.event as AttemptRecord['event'], attempt: entry.attempts, at, result }
    if (result.delivered) {
      outcomes?.delivered.inc()
      await recordDelivered(db, entry, now, result.statusCode, base)
      return
    }
    const delay = backoff(entry.attempts)
    const failure = { lastStatusCode: result.statusCode, lastError: result.error ?? 'failed' }
    if (delay !== null) {
      outcomes?.retrying.inc()
      await recordRetry(db, entry, failure, { ...base, nextRetryAt: new Date(now.getTime() + delay) })
      return
    }
    outcomes?.gaveUp.inc()
    const reason = `disabled after every delivery attempt failed for ${formatDuration(now.getTime() - entry.created_ms)} (${entry.attempts} attempts); last error: ${failure.lastError}`
    if (await recordDead(db, entry, failure, now, reason, base)) {
      logger.warn({ webhookId: entry.webhook_id, attempts: entry.attempts }, 'webhook disabled after sustained delivery failure')
    }
  }

  function maybePrune() {
    const now = clock.now().getTime()
    if (pruning || now - lastPruneAt < PRUNE_EVERY_MS) return
    lastPruneAt = now
    pruning = pruneDeliveryHistory(db, new Date(now - HISTORY_KEPT_MS))
      .then((removed) => {
        if (removed > 0) logger.info({ removed }, 'pruned old webhook attempts and finished deliveries')
      })
      .catch((error) => logger.warn({ err: error }, 'could not prune webhook delivery history'))
      .finally(() => {
        pruning = undefined
      })
  }

  function schedulePoll() {
    if (stopped) return
    timer = clock.after(pollMs, () => void pump().finally(schedulePoll), { unref: true })
  }

  return {
    start() {
      if (timer !== undefined || stopped) return
      schedulePoll()
      void pump()
    },
    async stop() {
      stopped = true
      timer?.cancel()
      await pumping
      await Promise.all([...inFlight.values(), pruning])
    },
    wake() {
      if (mayRun()) void pump()
    },
    async drain() {
      // Until a claim finds nothing and nothing is in flight: a retry due meanwhile is delivered too.
      for (;;) {
        const claimed = await pump()
        await Promise.all([...inFlight.values()])
        if (claimed === 0 && inFlight.size === 0 && !pumping) {
          await pruning
          return
        }
      }
    },
  }
}

/** `3 h 5 min`, `23 h 40 min`, `12 s`: how long a webhook kept failing. */
export function formatDuration(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000))
  if (seconds < 60) return `${seconds} s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 60) return `${minutes} min`
  const hours = Math.floor(minutes / 60)
  return minutes % 60 === 0 ? `${hours} h` : `${hours} h ${minutes % 60} min`
}
