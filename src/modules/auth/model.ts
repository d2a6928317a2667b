import { Type } from '@sinclair/typebox'
import { EXPECTATION } from '../../shared/errors'
import { Id, LiteralUnion, PathParams, Timestamp } from '../../shared/model'
import { MIN_PASSWORD_LENGTH } from './accounts'
import { KEY_ID_PATTERN } from './secrets'
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

/** docs/adr/0089-key-ids-are-opaque-strings.md: what clients see of a key's id, and revoke it by. */
const KeyId = Type.String({
  pattern: KEY_ID_PATTERN.source,
  description: 'The key id: `key_` and 32 lowercase hex digits',
  examples: ['key_3f9c2a7be4d1806c5a9e0b7d2c4f1e88'],
})

export const CreatedKey = Type.Object({
  id: KeyId,
  key: Type.String({ description: 'The raw key. Shown only in this response: store it now.', examples: ['tcg_live_…'] }),
  key_prefix: Type.String({ description: 'How lists show the key' }),
  name: Type.String(),
  tier: TierName,
  message: Type.String(),
})

export const KeyListItem = Type.Object({
  id: KeyId,
  key_prefix: Type.String(),
  name: Type.String(),
  tier: TierName,
  is_active: Type.Union([Type.Literal(0), Type.Literal(1)]),
  total_requests: Type.Integer({ minimum: 0, description: 'Requests made with the key, all time' }),
  last_used_at: Type.Union([Timestamp, Type.Null()]),
  created_at: Timestamp,
})

// Integer ids were migrated, not kept: one (or anything else not shaped like a key id) is a 400 that
// says where the new ids are (docs/adr/0089-key-ids-are-opaque-strings.md).
export const KeyIdParams = PathParams({
  keyId: Type.String({
    pattern: KEY_ID_PATTERN.source,
    description: 'The key id, as `GET /v1/keys` lists it: `key_` and 32 lowercase hex digits. Integer key ids are no longer accepted (400).',
    examples: ['key_3f9c2a7be4d1806c5a9e0b7d2c4f1e88'],
    [EXPECTATION]: 'must be a key id as GET /v1/keys lists it (key_ and 32 lowercase hex digits); integer key ids are no longer used: list your keys for their new ids',
  }),
})

export const Message = Type.Object({ message: Type.String() })

export const Usage = Type.Object({
  account: Type.Object({
    today_requests: Type.Integer({ minimum: 0, description: 'Quota units used today (UTC)' }),
    daily_limit: Type.Integer({ minimum: 0 }),
    daily_remaining: Type.Integer({ minimum: 0 }),
    rejected_today: Type.Integer({
      minimum: 0,
      description: 'Requests refused with a 429 today: over the daily quota (`RATE_LIMIT_EXCEEDED`) or the live refreshes (`LIVE_FETCH_LIMIT`); they used no quota',
    }),
    live_refreshes_today: Type.Integer({ minimum: 0 }),
    live_refresh_limit: Type.Integer({ minimum: 0 }),
  }),
  keys: Type.Array(
    Type.Object({
      id: KeyId,
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
