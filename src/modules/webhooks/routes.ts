import { Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { toPage } from '../../shared/model'
import { models } from '../../shared/models-plugin'
import { authGuard } from '../auth/guard'
import { Message } from '../auth/model'
import type { AuthRuntime } from '../auth/runtime'
import { minimumTier, TIER_POLICY } from '../auth/tiers'
import { CreatedWebhook, CreateWebhookBody, DeliveriesPage, DeliveriesQuery, PingResult, WebhookIdParams, WebhookListItem } from './model'
import { DELIVERY_TIMEOUT_MS } from './send'
import { createWebhook, deleteWebhook, listDeliveries, listWebhooks, MAX_WEBHOOKS, PING_LIMIT, sendTestPing, type WebhookDeps } from './service'
import type { WebhookSettings } from './settings'

const SESSION_ERRORS = { 401: 'Error', 403: 'Error', 415: 'Error' } as const

/** How long a test ping's request may stay silent: the delivery timeout and a margin. */
const PING_CONNECTION_SECONDS = DELIVERY_TIMEOUT_MS / 1000 + 5

const PRO = TIER_POLICY[minimumTier('webhooks')].label

// What the shared descriptions of 403 and 503 leave out for the routes that need Pro or a secret key.
const TIER_NOTE = { 403: `or \`TIER_REQUIRED\`: the account is below the ${PRO} tier` }
const SECRET_KEY_NOTE = { 503: 'or `SERVICE_UNAVAILABLE` naming `WEBHOOK_SECRET_KEY`: the server has no key to keep signing secrets with' }

const CREATE_DESCRIPTION = `Needs the **${PRO}** tier or higher (403 \`TIER_REQUIRED\` below it). At most ${MAX_WEBHOOKS} webhooks per account (409 beyond). The answer carries the webhook's signing \`secret\` once: only an encrypted copy is kept and no other answer shows it.

**When it fires.** The webhook watches the market price of the card's primary printing. \`above\` fires when the price crosses the threshold upward (it was below the threshold and is now at or above it), \`below\` when it crosses downward (it was above and is now at or below it): once per crossing, and again only after the price has crossed back. A webhook created while the price is already past its threshold (or exactly at it) fires only after the price has crossed back and crosses again; with no price yet, the first price past the threshold fires.

**Event.** A POST to \`url\` with the JSON body \`{"event": "price_alert", "card_id": <integer>, "card_name": <string>, "condition": "above" | "below", "threshold": <number, USD>, "current_price": <number, USD>, "timestamp": <ISO 8601>}\`. A 2xx answer within ${DELIVERY_TIMEOUT_MS / 1000} s delivers it; redirects are not followed. Otherwise it is retried with growing delays for about a day, and a webhook failing for that long is disabled (\`is_active\` 0, \`disabled_reason\`).

**Signature** ([Standard Webhooks](https://www.standardwebhooks.com)). Headers \`webhook-id\` (the event id, the same on every retry: de-duplicate on it), \`webhook-timestamp\` (Unix seconds of the attempt) and \`webhook-signature\`: \`v1,\` followed by the base64 HMAC-SHA256 of \`<webhook-id>.<webhook-timestamp>.<body>\`, keyed with the bytes of the base64 part of the secret after \`whsec_\`. Any Standard Webhooks library verifies it.

**Targets.** \`url\` must be http or https, without credentials (any \`user:password@\`, even empty) or a fragment, and its host must be public: a literal or resolved loopback, private, link-local (cloud metadata), unique-local or other non-public address, or an IPv6 address that embeds an IPv4 one (IPv4-compatible, 6to4, NAT64, Teredo; an IPv4-mapped one is judged as its IPv4 address), is refused with 400, here and again at every delivery.`

/** Webhook management, authenticated with the session cookie like key management. */
export function webhookRoutes(auth: AuthRuntime, settings: WebhookSettings) {
  const deps: WebhookDeps = { db: auth.db, clock: auth.clock, settings, attempts: auth.attempts }

  return new Elysia({ name: 'webhook-routes' })
    .use(models)
    .use(authGuard(auth))
    .post(
      '/v1/webhooks',
      async ({ body, session, set }) => {
        const created = await createWebhook(deps, session.account, body)
        set.status = 201
        return { data: created }
      },
      {
        session: true,
        body: CreateWebhookBody,
        response: { 201: Type.Object({ data: CreatedWebhook }), 400: 'Error', 404: 'Error', 409: 'Error', 503: 'Error', ...SESSION_ERRORS },
        detail: {
          tags: ['Webhooks'],
          summary: 'Create a price-alert webhook',
          description: CREATE_DESCRIPTION,
          'x-error-notes': { ...TIER_NOTE, ...SECRET_KEY_NOTE, 404: 'no card with this `card_id`' },
        },
      },
    )
    .get('/v1/webhooks', async ({ session }) => ({ data: await listWebhooks(auth.db, session.account.id) }), {
      session: true,
      response: { 200: Type.Object({ data: Type.Array(WebhookListItem) }), 401: 'Error' },
      detail: {
        tags: ['Webhooks'],
        summary: "List the account's webhooks",
        description:
          'Oldest first, on any tier (an account that left Pro can still see and delete its webhooks), disabled ones included, each with its card, its last alert and its latest delivery attempt. Never the signing secret.',
      },
    })
    .delete(
      '/v1/webhooks/:webhookId',
      async ({ params, session }) => {
        await deleteWebhook(auth.db, session.account.id, params.webhookId)
        return { data: { message: `Webhook ${params.webhookId} deleted` } }
      },
      {
        session: true,
        params: WebhookIdParams,
        response: { 200: Type.Object({ data: Message }), 400: 'Error', 404: 'Error', ...SESSION_ERRORS },
        detail: {
          tags: ['Webhooks'],
          summary: 'Delete a webhook',
          description: "On any tier. Alerts not yet delivered are dropped with it, and so is its delivery log. Another account's webhook is 404, like a missing one.",
        },
      },
    )
    .get('/v1/webhooks/:webhookId/deliveries', async ({ params, query, session }) => listDeliveries(auth.db, session.account.id, params.webhookId, toPage(query)), {
      session: true,
      params: WebhookIdParams,
      query: DeliveriesQuery,
      response: { 200: DeliveriesPage, 400: 'Error', 401: 'Error', 404: 'Error' },
      detail: {
        tags: ['Webhooks'],
        summary: "A webhook's delivery attempts",
        description:
          "Every attempt to deliver a price alert or a test ping, newest first, on any tier: outcome, status code, duration, the error and when a failed event is tried again. Recent attempts only: older ones are removed after a while. Another account's webhook is 404.",
      },
    })
    .post(
      '/v1/webhooks/:webhookId/test',
      async ({ params, session, request, server }) => {
        // The ping may wait the whole delivery timeout for the receiver: the connection must outlast it.
        server?.timeout(request, PING_CONNECTION_SECONDS)
        return { data: await sendTestPing(deps, session.account, params.webhookId) }
      },
      {
        session: true,
        params: WebhookIdParams,
        response: { 200: Type.Object({ data: PingResult }), 400: 'Error', 404: 'Error', 429: 'Error', 503: 'Error', ...SESSION_ERRORS },
        detail: {
          tags: ['Webhooks'],
          summary: 'Send a test ping',
          description: `Needs the **${PRO}** tier or higher. Sends a \`ping\` event to the webhook now, signed like every event, with the body \`{"event": "ping", "webhook_id": <id>, "timestamp": <ISO 8601>}\`, and answers how it went; the attempt also appears in the deliveries. Works on a disabled webhook too, to check a fix on the receiving side. No request body. At most ${PING_LIMIT.perWindow} pings per account in ${PING_LIMIT.windowSeconds} seconds (429 \`TOO_MANY_ATTEMPTS\` with \`Retry-After\` beyond).`,
          'x-error-notes': { ...TIER_NOTE, ...SECRET_KEY_NOTE, 429: `here: more than ${PING_LIMIT.perWindow} test pings per account in ${PING_LIMIT.windowSeconds} seconds` },
        },
      },
    )
}
