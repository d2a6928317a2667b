import { sql } from 'drizzle-orm'
import { type Database, selectRows } from '../../src/db/client'
import { accounts, webhookDeliveries, webhooks } from '../../src/db/schema'
import { createSecretBox, type SecretBox } from '../../src/modules/webhooks/secret-box'
import type { WebhookSettings } from '../../src/modules/webhooks/settings'
import { newEventId, newSigningSecret } from '../../src/modules/webhooks/signing'
import type { TargetPolicy } from '../../src/modules/webhooks/target-guard'
import { systemClock } from '../../src/shared/clock'

/** A secret box under a fresh random key, as WEBHOOK_SECRET_KEY would give. */
export function testSecretBox(): Promise<SecretBox> {
  return createSecretBox(Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64'))
}

/** Webhook settings with a fresh secret box; local receivers are allowed unless `targets` says otherwise. */
export async function testWebhookSettings(targets: TargetPolicy = { allowPrivateTargets: true }): Promise<WebhookSettings> {
  return { secrets: await testSecretBox(), targets }
}

// The outbox side of a delivery test: a webhook with a sealed secret, a queued event.

/** The WEBHOOK_SECRET_KEY of tests: 32 bytes in base64. */
export const TEST_WEBHOOK_KEY = Buffer.alloc(32, 7).toString('base64')

let owners = 0

/** A Pro account to own test webhooks (inserted directly: no password hashing needed). */
export async function webhookOwner(db: Database): Promise<number> {
  const [row] = await db
    .insert(accounts)
    .values({ email: `webhook-owner-${process.pid}-${++owners}@example.com`, passwordHash: 'not a hash: never logs in', tier: 'pro' })
    .returning({ id: accounts.id })
  return row!.id
}

export interface SeededWebhook {
  id: number
  /** The signing secret in the clear, as its owner got it at creation. */
  secret: string
}

/** A webhook with a fresh signing secret sealed in `box`, as creation stores it. */
export async function seedWebhook(
  db: Database,
  box: SecretBox,
  values: { accountId: number; url: string; cardId?: number; condition?: 'above' | 'below'; threshold?: number; armed?: boolean },
): Promise<SeededWebhook> {
  const secret = newSigningSecret()
  const cardId = values.cardId ?? (await selectRows<{ id: number }>(db, sql`select min(id)::int as id from cards`))[0]!.id
  const [row] = await db
    .insert(webhooks)
    .values({
      accountId: values.accountId,
      url: values.url,
      cardId,
      condition: values.condition ?? 'above',
      threshold: values.threshold ?? 1_000_000,
      armed: values.armed ?? true,
      secretCiphertext: await box.seal(secret),
    })
    .returning({ id: webhooks.id })
  return { id: row!.id, secret }
}

export interface QueuedDelivery {
  id: number
  eventId: string
  payload: string
}

/** An outbox entry for the webhook, due at `dueAt` (default: now; a worker on a fake clock needs its `clock.now()`). */
export async function queueDelivery(db: Database, webhookId: number, options: { payload?: string; dueAt?: Date } = {}): Promise<QueuedDelivery> {
  const eventId = newEventId()
  const payload =
    options.payload ??
    JSON.stringify({
      event: 'price_alert',
      card_id: webhookId,
      card_name: 'Pokémon — Ünïcode ✓ "quoted"',
      condition: 'above',
      threshold: 12.5,
      current_price: 12.75,
      timestamp: systemClock.now().toISOString(),
    })
  const [row] = await db
    .insert(webhookDeliveries)
    // Due by this process's clock, which the worker reads, not by the database's (they may differ by a few ms).
    .values({ webhookId, eventId, event: 'price_alert', payload, nextAttemptAt: options.dueAt ?? systemClock.now() })
    .returning({ id: webhookDeliveries.id })
  return { id: row!.id, eventId, payload }
}
