import { createHmac, randomBytes } from 'node:crypto'

/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): a secret is `whsec_` and base64
 * random bytes; the HMAC key is those bytes, so any Standard Webhooks library verifies our events.
 */
export const SECRET_PREFIX = 'whsec_'

/** A new signing secret: 32 random bytes. */
export function newSigningSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64')
}

/** A new event id, the `webhook-id` header: unique, and the same on every retry of the event. */
export function newEventId(): string {
  return `msg_${randomBytes(16).toString('base64url')}`
}

/** The `webhook-signature` header: `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body`. */
export function signature(secret: string, eventId: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64')
  return `v1,${createHmac('sha256', key).update(`${eventId}.${timestampSeconds}.${body}`).digest('base64')}`
}

/** The three Standard Webhooks headers of one attempt; the timestamp is the attempt's own. */
export function signedHeaders(secret: string, eventId: string, at: Date, body: string): Record<string, string> {
  const timestamp = Math.floor(at.getTime() / 1000)
  return {
    'webhook-id': eventId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signature(secret, eventId, timestamp, body),
  }
}
