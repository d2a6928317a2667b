import { Type } from '@sinclair/typebox'
import { Id, LiteralUnion, PathParams, QueryInt, Timestamp } from '../../shared/model'
import { MIN_PASSWORD_LENGTH } from './accounts'
import { TIERS } from './tiers'

const TierName = LiteralUnion(TIERS, { description: 'Subscription tier' })

export const Credentials = Type.Object({
  email: Type.String({ format: 'email', maxLength: 254, examples: ['collector@example.com'] }),
  password: Type.String({
    minLength: MIN_PASSWORD_LENGTH,
    maxLength: 1024,
    description: `At least ${MIN_PASSWORD_LENGTH} characters`,
  }),
})

export const Account = Type.Object({
  id: Id,
  email: Type.String(),
  tier: TierName,
  subscription: Type.Object({ plan: TierName, status: Type.String({ examples: ['active'] }) }),
  created_at: Timestamp,
})

export const CreateKeyBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 100, description: 'What the key is for, e.g. the application using it' }),
})

export const CreatedKey = Type.Object({
  id: Id,
  key: Type.String({ description: 'The raw key. Shown only in this response: store it now.', examples: ['tcg_live_…'] }),
  key_prefix: Type.String({ description: 'How lists show the key' }),
  name: Type.String(),
  tier: TierName,
  message: Type.String(),
})

export const KeyListItem = Type.Object({
  id: Id,
  key_prefix: Type.String(),
  name: Type.String(),
  tier: TierName,
  is_active: Type.Union([Type.Literal(0), Type.Literal(1)]),
  total_requests: Type.Integer({ minimum: 0, description: 'Requests made with the key, all time' }),
  last_used_at: Type.Union([Timestamp, Type.Null()]),
  created_at: Timestamp,
})

export const KeyIdParams = PathParams({ keyId: QueryInt({ minimum: 1, maximum: 2147483647, description: 'The key id, as `GET /v1/keys` lists it' }) })

export const Message = Type.Object({ message: Type.String() })

export const Usage = Type.Object({
  account: Type.Object({
    today_requests: Type.Integer({ minimum: 0, description: 'Quota units used today (UTC)' }),
    daily_limit: Type.Integer({ minimum: 0 }),
    daily_remaining: Type.Integer({ minimum: 0 }),
    rejected_today: Type.Integer({ minimum: 0, description: 'Requests refused over quota today; they used no quota' }),
    live_refreshes_today: Type.Integer({ minimum: 0 }),
    live_refresh_limit: Type.Integer({ minimum: 0 }),
  }),
  keys: Type.Array(
    Type.Object({
      id: Id,
      key_prefix: Type.String(),
      name: Type.String(),
      tier: TierName,
      is_active: Type.Union([Type.Literal(0), Type.Literal(1)]),
      requests_today: Type.Integer({ minimum: 0, description: 'Quota units this key used today' }),
      total_requests: Type.Integer({ minimum: 0 }),
      last_used_at: Type.Union([Timestamp, Type.Null()]),
    }),
  ),
  subscription: Type.Object({ plan: TierName, status: Type.String() }),
})
