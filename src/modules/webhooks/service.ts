import type { Database } from '../../db/client'
import type { Clock } from '../../shared/clock'
import { AppError, notFound } from '../../shared/errors'
import { type Page, pageMeta } from '../../shared/model'
import type { AttemptCounter } from '../auth/login-throttle'
import { minimumTier, TIER_POLICY } from '../auth/tiers'
import type { AccountRow } from '../auth/types'
import { recordAttempt } from './attempts-repo'
import type { Condition, CreatedWebhook, CreateWebhookBody, DeliveryAttempt, PingResult, WebhookListItem } from './model'
import * as repo from './repo'
import type { SecretBox } from './secret-box'
import { sendSigned } from './send'
import type { WebhookSettings } from './settings'
import { newEventId, newSigningSecret } from './signing'
import { checkTargetAtCreation, RefusedTarget } from './target-guard'

/** docs/adr/0059-when-an-alert-fires.md. */
export const MAX_WEBHOOKS = 25

/** Test pings make outbound requests on demand: at most this many per account in a window. */
export const PING_LIMIT = { perWindow: 10, windowSeconds: 60 } as const

export interface WebhookDeps {
  db: Database
  clock: Clock
  settings: WebhookSettings
  /** Counts test pings per account, on every node together. */
  attempts: AttemptCounter
}

type Account = Pick<AccountRow, 'id' | 'tier'>

const iso = (instant: Date | null) => instant?.toISOString() ?? null

/** Creating webhooks and sending test pings need Pro or higher; listing and deleting do not, so a downgraded account can clean up. */
function requireWebhookTier(account: Account) {
  if (TIER_POLICY[account.tier].capabilities.has('webhooks')) return
  const needed = TIER_POLICY[minimumTier('webhooks')].label
  throw new AppError('TIER_REQUIRED', `Webhooks require a ${needed} subscription or higher; this account is on ${TIER_POLICY[account.tier].label}`)
}

function requireSecretBox(settings: WebhookSettings): SecretBox {
  if (settings.secrets) return settings.secrets
  throw new AppError('SERVICE_UNAVAILABLE', 'Webhooks are not available: the server has no WEBHOOK_SECRET_KEY to keep signing secrets with; ask its operator to set it')
}

/**
 * Whether a new webhook can fire on the next crossing: only when the price is on the near side of
 * the threshold (or unknown). One already past it fires after the price has crossed back first.
 */
export function initiallyArmed(condition: Condition, threshold: number, price: number | null): boolean {
  if (price === null) return true
  return condition === 'above' ? price < threshold : price > threshold
}

async function checkUrl(url: string, settings: WebhookSettings, clock: Clock) {
  try {
    await checkTargetAtCreation(url, settings.targets, clock)
  } catch (error) {
    if (!(error instanceof RefusedTarget)) throw error
    throw new AppError('INVALID_PARAMETER', error.message, [{ field: 'url', message: error.message }])
  }
}

export async function createWebhook(deps: WebhookDeps, account: Account, body: CreateWebhookBody): Promise<CreatedWebhook> {
  requireWebhookTier(account)
  const card = await repo.findCardPrice(deps.db, body.card_id)
  if (!card) throw notFound(`Card ${body.card_id}`)
  await checkUrl(body.url, deps.settings, deps.clock)
  const box = requireSecretBox(deps.settings)
  const secret = newSigningSecret()
  const secretCiphertext = await box.seal(secret)
  const created = await deps.db.transaction(async (tx) => {
    // Two concurrent creates cannot both pass the limit check.
    await repo.lockAccount(tx, account.id)
    if ((await repo.countWebhooks(tx, account.id)) >= MAX_WEBHOOKS) {
      throw new AppError('CONFLICT', `An account can have at most ${MAX_WEBHOOKS} webhooks; delete one first`)
    }
    // The price as of now, read inside the transaction: the one a later sync's change starts from.
    const price = (await repo.findCardPrice(tx, body.card_id))?.marketPrice ?? null
    const armed = initiallyArmed(body.condition, body.threshold, price)
    const row = await repo.insertWebhook(tx, {
      accountId: account.id,
      url: body.url,
      cardId: card.id,
      condition: body.condition,
      threshold: body.threshold,
      secretCiphertext,
      armed,
    })
    return { row, armed }
  })
  const pastThreshold = created.armed
    ? ''
    : ` The price is already ${body.condition === 'above' ? 'at or above' : 'at or below'} the threshold: the first alert comes after it has crossed back and crosses again.`
  return {
    id: created.row.id,
    url: body.url,
    card_id: card.id,
    card_name: card.name,
    condition: body.condition,
    threshold: body.threshold,
    is_active: created.row.isActive ? 1 : 0,
    created_at: created.row.createdAt.toISOString(),
    secret,
    message: `Store this signing secret now: it is shown only once. It signs every event (Standard Webhooks headers webhook-id, webhook-timestamp, webhook-signature).${pastThreshold}`,
  }
}

export async function listWebhooks(db: Database, accountId: number): Promise<WebhookListItem[]> {
  const rows = await repo.listWebhooks(db, accountId)
  return rows.map((row) => ({
    id: row.id,
    url: row.url,
    card_id: row.cardId,
    card_name: row.cardName,
    condition: row.condition as Condition,
    threshold: row.threshold,
    is_active: row.isActive ? 1 : 0,
    created_at: row.createdAt.toISOString(),
    last_triggered_at: iso(row.lastTriggeredAt),
    last_delivery:
      row.lastOutcome === null || row.lastAttemptedAt === null
        ? null
        : { outcome: row.lastOutcome as 'delivered' | 'failed', status_code: row.lastStatusCode, attempted_at: row.lastAttemptedAt.toISOString() },
    disabled_at: iso(row.disabledAt),
    disabled_reason: row.disabledReason,
  }))
}

export async function deleteWebhook(db: Database, accountId: number, webhookId: number) {
  if (!(await repo.deleteWebhook(db, accountId, webhookId))) throw notFound(`Webhook ${webhookId}`)
}

async function requireOwnedWebhook(db: Database, accountId: number, webhookId: number) {
  const webhook = await repo.findOwnedWebhook(db, accountId, webhookId)
  if (!webhook) throw notFound(`Webhook ${webhookId}`)
  return webhook
}

export async function listDeliveries(db: Database, accountId: number, webhookId: number, page: Page) {
  const webhook = await requireOwnedWebhook(db, accountId, webhookId)
  const rows = webhook.attempts === 0 ? [] : await repo.findAttemptsPage(db, webhookId, page)
  const data: DeliveryAttempt[] = rows.map((row) => ({
    event_id: row.eventId,
    event: row.event as DeliveryAttempt['event'],
    attempt: row.attempt,
    attempted_at: row.attemptedAt.toISOString(),
    outcome: row.outcome as DeliveryAttempt['outcome'],
    status_code: row.statusCode,
    duration_ms: row.durationMs,
    error: row.error,
    next_retry_at: iso(row.nextRetryAt),
  }))
  return { data, meta: pageMeta(page, webhook.attempts) }
}

/**
 * Sends a signed `ping` to the webhook now and records the attempt. Works on a disabled webhook,
 * so an owner can check a fix to the receiver.
 */
export async function sendTestPing(deps: WebhookDeps, account: Account, webhookId: number): Promise<PingResult> {
  requireWebhookTier(account)
  const webhook = await requireOwnedWebhook(deps.db, account.id, webhookId)
  const box = requireSecretBox(deps.settings)
  const now = deps.clock.now()
  const { retryAfter } = await deps.attempts.take([`webhook-ping:${account.id}`], [PING_LIMIT.perWindow], PING_LIMIT.windowSeconds)
  if (retryAfter > 0) {
    throw new AppError(
      'TOO_MANY_ATTEMPTS',
      `At most ${PING_LIMIT.perWindow} test pings per account in ${PING_LIMIT.windowSeconds} seconds; try again in ${retryAfter} seconds`,
      undefined,
      { 'retry-after': String(retryAfter) },
    )
  }
  let secret: string
  try {
    secret = await box.open(webhook.secretCiphertext)
  } catch {
    // The key changed since the webhook was created: nothing the caller can fix.
    throw new AppError('SERVICE_UNAVAILABLE', "The webhook's signing secret cannot be read with the server's WEBHOOK_SECRET_KEY; ask its operator")
  }
  const eventId = newEventId()
  const body = JSON.stringify({ event: 'ping', webhook_id: webhook.id, timestamp: now.toISOString() })
  const result = await sendSigned({ url: webhook.url, secret, eventId, body, at: now }, { ...deps.settings.targets, clock: deps.clock })
  try {
    await recordAttempt(deps.db, { webhookId: webhook.id, eventId, event: 'ping', attempt: 1, at: now, result })
  } catch (error) {
    // Deleted while the ping was out: there is nothing left to record it on.
    if (await repo.webhookExists(deps.db, webhook.id)) throw error
  }
  return {
    event_id: eventId,
    delivered: result.delivered,
    status_code: result.statusCode,
    duration_ms: result.durationMs,
    error: result.error ?? null,
  }
}
