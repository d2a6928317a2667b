import { type Static, type TObject, Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { utcDay } from '../../shared/clock'
import { AppError } from '../../shared/errors'
import { RateLimit } from '../../shared/model'
import { RefusedBody } from '../../shared/request-rules'
import { findSession } from './accounts'
import { type DayCounters, nextUtcMidnight } from './quota'
import type { AccountRow, KeyIdentity } from './repo'
import type { AuthRuntime } from './runtime'
import { type Capability, minimumTier, type Tier, TIER_POLICY, type TierPolicy } from './tiers'

export interface ApiKeyRule {
  /** What the route needs beyond a valid key (see tiers.ts). */
  needs: Capability
  /**
   * Quota units the request costs (default 1). 0 = free and answered even over quota. A function
   * prices the request from its parsed body (not yet validated; a RefusedBody when it will be
   * refused) and the caller's tier.
   */
  cost?: number | ((request: { body: unknown; tier: Tier }) => number)
}

export interface KeyAuth {
  identity: KeyIdentity
  policy: TierPolicy
  /** The instant the request was charged at: the day it counts for. */
  now: Date
  /** Today's counters, read for routes that cost nothing (they are not charged, only shown). */
  counters?: DayCounters
  /** What the request was charged, and the account's units used after it; none when it cost nothing. */
  charge?: { cost: number; used: number }
}

export interface SessionAuth {
  sessionId: number
  account: AccountRow
}

// Per-request state lives beside the request, not in the context: the checks run in `transform`
// (before validation, so a missing key is a 401 even with bad parameters and a bad parameter still
// costs quota, docs/decisions.md "Quota accounting"), and the error handler needs the quota state for error bodies.
const keyAuths = new WeakMap<Request, KeyAuth>()
const rateLimits = new WeakMap<Request, RateLimit>()
const sessions = new WeakMap<Request, SessionAuth>()

/** The `rate_limit` of a request that carried a valid key: error responses include it too. */
export const rateLimitOf = (request: Request): RateLimit | undefined => rateLimits.get(request)

function rateLimitOfDay(policy: TierPolicy, used: number, now: Date): RateLimit {
  return { daily_limit: policy.dailyQuota, daily_remaining: Math.max(0, policy.dailyQuota - used), daily_reset: utcDay(now).endIso }
}

/** The spec's X-RateLimit-* headers, added to `headers`. */
export function addRateLimitHeaders(headers: Record<string, unknown> | Headers, rateLimit: RateLimit) {
  const limit = String(rateLimit.daily_limit)
  const remaining = String(rateLimit.daily_remaining)
  if (headers instanceof Headers) {
    headers.set('x-ratelimit-limit', limit)
    headers.set('x-ratelimit-remaining', remaining)
    headers.set('x-ratelimit-reset', rateLimit.daily_reset)
  } else {
    headers['x-ratelimit-limit'] = limit
    headers['x-ratelimit-remaining'] = remaining
    headers['x-ratelimit-reset'] = rateLimit.daily_reset
  }
}

function announceQuota(request: Request, headers: Record<string, unknown>, policy: TierPolicy, used: number, now: Date) {
  const rateLimit = rateLimitOfDay(policy, used, now)
  addRateLimitHeaders(headers, rateLimit)
  rateLimits.set(request, rateLimit)
}

const recordUse = (auth: AuthRuntime, identity: KeyIdentity, now: Date, units: number, rejected = false) =>
  auth.usage.record({ keyId: identity.keyId, accountId: identity.accountId, units, rejected, at: now })

/**
 * The key guard's whole work for a request it can admit without waiting: the key already known to
 * this node, its tier allowed, a fixed cost that a quota lease or local counters cover, and an
 * answer kept for the key's tier (`answerFor`, asked before anything is charged). Answers that
 * answer and the request's `rate_limit`, charged and counted as the guard would; undefined, with
 * nothing charged or counted, when any of it needs a wait or ends in a refusal: the route's guard
 * then judges the request from the start.
 */
export function admitAtOnce<Answer>(
  auth: AuthRuntime,
  request: Request,
  rule: ApiKeyRule & { cost?: number },
  answerFor: (policy: TierPolicy) => Answer | undefined,
): { answer: Answer; rateLimit: RateLimit } | undefined {
  const raw = request.headers.get('x-api-key')
  const identity = raw ? auth.keys.known(raw) : undefined
  if (!identity) return undefined
  const policy = TIER_POLICY[identity.tier]
  const cost = rule.cost ?? 1
  if (!policy.capabilities.has(rule.needs) || cost === 0) return undefined
  const answer = answerFor(policy)
  if (answer === undefined) return undefined
  const now = auth.clock.now()
  const used = auth.quota.chargeAtOnce({ accountId: identity.accountId, keyId: identity.keyId, cost, limit: policy.dailyQuota, now })
  if (used === undefined) return undefined
  recordUse(auth, identity, now, cost)
  return { answer, rateLimit: rateLimitOfDay(policy, used, now) }
}

/**
 * A 429 costs nothing, also one a route answers after the guard charged its request (429
 * LIVE_FETCH_LIMIT): the units go back, the refusal counts in rejected_today, and the answer's
 * `rate_limit` and headers show the quota as it was before (docs/decisions.md "A 429 never costs a unit").
 * Called by the error handler before it answers.
 */
export async function refundRefusal(auth: AuthRuntime, request: Request, error: AppError, headers: Record<string, unknown>) {
  const keyAuth = keyAuths.get(request)
  const charge = keyAuth?.charge
  if (error.status !== 429 || !keyAuth || !charge) return
  keyAuth.charge = undefined
  const { identity, policy, now } = keyAuth
  try {
    await auth.quota.refund({ accountId: identity.accountId, keyId: identity.keyId, cost: charge.cost, now })
  } catch (failure) {
    // Never a 5xx for it: the refusal stands, charged.
    auth.logger.warn({ err: failure, accountId: identity.accountId }, 'quota units of a 429 not handed back')
    return
  }
  auth.usage.refund({ accountId: identity.accountId, units: charge.cost, at: now })
  announceQuota(request, headers, policy, charge.used - charge.cost, now)
}

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])

/**
 * CSRF defence for cookie-authenticated writes (docs/decisions.md, "CSRF rules for cookie writes"), part 1: a browser sends its
 * page's `Origin` on cross-site requests, so a write that names another origin is refused.
 */
function refuseForeignOrigin(request: Request) {
  if (!WRITE_METHODS.has(request.method)) return
  const origin = request.headers.get('origin')
  if (origin === null) return
  let originHost: string | undefined
  try {
    originHost = new URL(origin).host
  } catch {}
  if (originHost === undefined || originHost !== request.headers.get('host')) {
    throw new AppError('FORBIDDEN', `Cross-origin request refused: Origin ${origin} is not this service`)
  }
}

/**
 * Both CSRF rules: a write naming another origin is 403, and its body must be JSON (415 otherwise,
 * see request-rules.ts): a page can post a form or text to another site without a preflight, never
 * JSON. A body refused for any other reason is answered here too, before the session is looked up.
 */
function refuseCrossSiteWrite(request: Request, body: unknown) {
  refuseForeignOrigin(request)
  if (body instanceof RefusedBody) throw body.error
}

export const SESSION_COOKIE = 'session'

/**
 * A key-guarded route's 200 schema: its own fields plus the spec's `rate_limit`, which the guard
 * adds after the handler. The static type stays the handler's own, so handlers never build it.
 */
export function withRateLimit<T extends TObject>(schema: T) {
  return Type.Unsafe<Static<T>>(Type.Object({ ...schema.properties, rate_limit: RateLimit }, { description: schema.description }))
}

/** What OpenAPI says of a key-guarded route (its `detail`): the tier it needs and what a request costs. */
export interface KeyGuardDetail {
  'x-min-tier': string
  /** Quota units one request costs; `per-item` for bulk resolve, priced from its body. */
  'x-quota-cost': number | 'per-item'
}

function keyGuardDetail(rule: ApiKeyRule): KeyGuardDetail {
  const cost = rule.cost ?? 1
  return { 'x-min-tier': TIER_POLICY[minimumTier(rule.needs)].label, 'x-quota-cost': typeof cost === 'function' ? 'per-item' : cost }
}

/**
 * The refusals a key-guarded route can answer with. OpenAPI leaves out those its rule rules out
 * (403 where every tier may call it, 429 where it costs nothing).
 */
export const KEY_GUARD_ERRORS = { 401: 'Error', 403: 'Error', 429: 'Error' } as const

/**
 * The route guards. `apiKey: { needs }` authenticates the X-API-Key header, checks the tier's
 * capability, charges the quota and adds `rate_limit` to the response; `session: true`
 * authenticates the session cookie; `sameOriginJson: true` applies the CSRF rules alone.
 */
export function authGuard(auth: AuthRuntime) {
  return new Elysia({ name: 'auth-guard' }).macro({
    apiKey: (rule: ApiKeyRule) => ({
      detail: { security: [{ ApiKey: [] }], ...keyGuardDetail(rule) },
      async transform({ request, set, body }) {
        const raw = request.headers.get('x-api-key')
        if (!raw) throw new AppError('API_KEY_REQUIRED', 'An API key is required: send it in the X-API-Key header')
        const identity = await auth.keys.lookup(raw)
        if (!identity) throw new AppError('INVALID_API_KEY', 'The API key is unknown or has been revoked')
        const policy = TIER_POLICY[identity.tier]
        const now = auth.clock.now()
        const record = (units: number, rejected = false) => recordUse(auth, identity, now, units, rejected)

        const allowed = policy.capabilities.has(rule.needs)
        const cost = typeof rule.cost === 'function' ? (allowed ? rule.cost({ body, tier: identity.tier }) : 0) : (rule.cost ?? 1)
        let counters: DayCounters | undefined
        let charge: KeyAuth['charge']
        if (!allowed || cost === 0) {
          counters = await auth.quota.read(identity.accountId, now)
          announceQuota(request, set.headers, policy, counters.used, now)
          record(0)
          if (!allowed) {
            const needed = TIER_POLICY[minimumTier(rule.needs)].label
            throw new AppError(
              'TIER_REQUIRED',
              `This endpoint requires a ${needed} subscription or higher; this key's account is on ${policy.label}`,
            )
          }
        } else {
          const charged = await auth.quota.charge({ accountId: identity.accountId, keyId: identity.keyId, cost, limit: policy.dailyQuota, now })
          announceQuota(request, set.headers, policy, charged.used, now)
          record(charged.admitted ? cost : 0, !charged.admitted)
          if (!charged.admitted) {
            const reset = nextUtcMidnight(now)
            const retryAfter = Math.max(1, Math.ceil((reset.getTime() - now.getTime()) / 1000))
            const left = Math.max(0, policy.dailyQuota - charged.used)
            const why =
              cost > 1 && left > 0
                ? `This request needs ${cost} credits of the daily quota of ${policy.dailyQuota} and ${left} are left`
                : `Daily quota of ${policy.dailyQuota} requests exceeded`
            throw new AppError(
              'RATE_LIMIT_EXCEEDED',
              `${why}; it resets at midnight UTC (${reset.toISOString()})`,
              undefined,
              { 'retry-after': String(retryAfter) },
            )
          }
          charge = { cost, used: charged.used }
        }
        // Judged only now, so a bad body costs quota like any refused request (docs/decisions.md, "Quota accounting").
        if (body instanceof RefusedBody) throw body.error
        keyAuths.set(request, { identity, policy, now, counters, charge })
      },
      resolve: ({ request }) => ({ apiKey: keyAuths.get(request)! }),
      afterHandle({ request, response }) {
        const rateLimit = rateLimits.get(request)
        if (rateLimit && response !== null && typeof response === 'object' && !(response instanceof Response)) {
          return { ...response, rate_limit: rateLimit }
        }
      },
    }),
    session: (required: true) => ({
      detail: { security: [{ Session: [] }] },
      async transform({ request, body }) {
        if (!required) return
        refuseCrossSiteWrite(request, body)
        const token = new Bun.CookieMap(request.headers.get('cookie') ?? '').get(SESSION_COOKIE)
        if (!token) throw new AppError('UNAUTHORIZED', 'Log in first: this endpoint needs the session cookie')
        const found = await findSession(auth.db, token, auth.clock.now())
        if (!found) throw new AppError('UNAUTHORIZED', 'The session has expired or was logged out; log in again')
        sessions.set(request, found)
      },
      resolve: ({ request }) => ({ session: sessions.get(request)! }),
    }),
    sameOriginJson: (required: true) => ({
      transform({ request, body }) {
        if (required) refuseCrossSiteWrite(request, body)
      },
    }),
  })
}
