import { type Static, Type } from '@sinclair/typebox'
import { Id, LiteralUnion, MAX_ID, PageMeta, PaginationQuery, PathParams, QueryInt, Timestamp } from '../../shared/model'

export const CONDITIONS = ['above', 'below'] as const
export type Condition = (typeof CONDITIONS)[number]

/** Thresholds are USD prices: a cent at least, and far above any card's price at most. */
export const MIN_THRESHOLD = 0.01
export const MAX_THRESHOLD = 1_000_000

const ConditionName = LiteralUnion(CONDITIONS, {
  description: '`above`: fires when the price rises to or past the threshold; `below`: when it falls to or under it',
})

export const CreateWebhookBody = Type.Object({
  url: Type.String({
    minLength: 1,
    maxLength: 2048,
    description: 'Where events are POSTed: an http(s) URL on a public address, without credentials or #fragment',
    examples: ['https://example.com/hooks/prices'],
  }),
  card_id: Type.Integer({ minimum: 1, maximum: MAX_ID, description: 'The card whose primary printing market price is watched' }),
  condition: ConditionName,
  threshold: Type.Number({
    minimum: MIN_THRESHOLD,
    maximum: MAX_THRESHOLD,
    description: `The price in USD, ${MIN_THRESHOLD} to ${MAX_THRESHOLD}`,
    examples: [25],
  }),
})
export type CreateWebhookBody = Static<typeof CreateWebhookBody>

const IsActive = Type.Union([Type.Literal(0), Type.Literal(1)], {
  description: '1 while events are sent; 0 once disabled after sustained delivery failure (see `disabled_reason`)',
})

const webhookFields = {
  id: Id,
  url: Type.String(),
  card_id: Id,
  card_name: Type.String(),
  condition: ConditionName,
  threshold: Type.Number({ description: 'USD' }),
  is_active: IsActive,
  created_at: Timestamp,
}

export const CreatedWebhook = Type.Object({
  ...webhookFields,
  secret: Type.String({
    description: 'The signing secret (`whsec_` and 32 random bytes in base64). Shown only in this response: store it now.',
    examples: ['whsec_…'],
  }),
  message: Type.String(),
})

/** A status line has three digits; what a receiver sends is shown as it came. */
const StatusCode = Type.Union([Type.Integer({ minimum: 100, maximum: 999 }), Type.Null()], { description: "The receiver's status; null when no response came" })

const Outcome = LiteralUnion(['delivered', 'failed'] as const, { description: '`delivered`: the receiver answered 2xx' })

export const WebhookListItem = Type.Object({
  ...webhookFields,
  last_triggered_at: Type.Union([Timestamp, Type.Null()], { description: 'When the last price alert was queued' }),
  last_delivery: Type.Union([
    Type.Object(
      {
        outcome: Outcome,
        status_code: StatusCode,
        attempted_at: Timestamp,
      },
      { description: 'The latest delivery attempt, of an alert or a test ping' },
    ),
    Type.Null(),
  ]),
  disabled_at: Type.Union([Timestamp, Type.Null()]),
  disabled_reason: Type.Union([Type.String(), Type.Null()]),
})

export const DeliveryAttempt = Type.Object({
  event_id: Type.String({ description: 'The `webhook-id` header: the same on every attempt of one event', examples: ['msg_…'] }),
  event: LiteralUnion(['price_alert', 'ping'] as const),
  attempt: Type.Integer({ minimum: 1, description: '1 for the first attempt of the event' }),
  attempted_at: Timestamp,
  outcome: Outcome,
  status_code: StatusCode,
  duration_ms: Type.Integer({ minimum: 0 }),
  error: Type.Union([Type.String(), Type.Null()], { description: 'Why the attempt failed; null when delivered' }),
  next_retry_at: Type.Union([Timestamp, Type.Null()], { description: 'When the event is tried again; null when delivered, for a ping, or when retries are over' }),
})

export const PingResult = Type.Object({
  event_id: Type.String({ examples: ['msg_…'] }),
  delivered: Type.Boolean({ description: 'The receiver answered 2xx' }),
  status_code: StatusCode,
  duration_ms: Type.Integer({ minimum: 0 }),
  error: Type.Union([Type.String(), Type.Null()]),
})

export const WebhookIdParams = PathParams({
  webhookId: QueryInt({ minimum: 1, maximum: MAX_ID, description: 'The webhook id, as `GET /v1/webhooks` lists it' }),
})

export const DeliveriesQuery = PaginationQuery

export const DeliveriesPage = Type.Object({ data: Type.Array(DeliveryAttempt), meta: PageMeta })

export type CreatedWebhook = Static<typeof CreatedWebhook>
export type WebhookListItem = Static<typeof WebhookListItem>
export type DeliveryAttempt = Static<typeof DeliveryAttempt>
export type PingResult = Static<typeof PingResult>
