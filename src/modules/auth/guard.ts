import { type Static, type TObject, Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { utcDay } from '../../shared/clock'
import { AppError } from '../../shared/errors'
import { RateLimit } from '../../shared/model'
import { noteAccount } from '../../shared/request-id'
import { RefusedBody } from '../../shared/request-rules'
import { findSession } from './accounts'
import { type DayCounters, nextUtcMidnight } from './quota'
import type { AuthRuntime } from './runtime'
import { type Capability, minimumTier, TIER_POLICY, type Tier, type TierPolicy } from './tiers'
import type { AccountRow, KeyIdentity } from './types'

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
// costs quota, docs/adr/0036-quota-accounting.md), and the error handler needs the quota state for error bodies.
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

const recordUse = (auth: AuthRuntime, identity: KeyIdentity, now: Date, units: number, rejected = false) =>
  auth.usage.record({ keyId: identity.keyId, accountId: identity.accountId, units, rejected, at: now })

/** A request the key guard let through: who asked, what it was charged, and the `rate_limit` it shows. */
export interface Admission extends KeyAuth {
  rateLimit: RateLimit
}

const fixedCost = (rule: ApiKeyRule) => (typeof rule.cost === 'function' ? undefined : (rule.cost ?? 1))

/**
 * The key guard's prefix that needs no wait, run first on every key-guarded request: the key
 * already known to this node, its tier allowed, a fixed cost above 0 that a quota lease or local
 * counters cover, and (`answerFor`, asked before anything is charged) an answer to give. Charged
 * and recorded then; undefined, with nothing charged or counted, when any of it needs a wait or
 * ends in a refusal: `admit` then judges the request from the start.
 */
export function admitAtOnce<Answer>(
  auth: AuthRuntime,
  request: Request,
  rule: ApiKeyRule,
  answerFor: (policy: TierPolicy) => Answer | undefined,
): { admission: Admission; answer: Answer } | undefined {
  const raw = request.headers.get('x-api-key')
  const identity = raw ? auth.keys.known(raw) : undefined
  if (!identity) return undefined
  const policy = TIER_POLICY[identity.tier]
  const cost = fixedCost(rule)
  if (!cost || !policy.capabilities.has(rule.needs)) return undefined
  const answer = answerFor(policy)
  if (answer === undefined) return undefined
  const now = auth.clock.now()
  const used = auth.quota.chargeAtOnce({ accountId: identity.accountId, keyId: identity.keyId, cost, limit: policy.dailyQuota, now })
  if (used === undefined) return undefined
  recordUse(auth, identity, now, cost)
  noteAccount(identity.accountId, identity.tier)
  auth.quotaCounts.admitted[identity.tier].inc()
  // The key's cache hit is counted here, not in `known`: an early answer that declines asks `known` again in Elysia.
  auth.keyLookups.hit.inc()
  return { admission: { identity, policy, now, charge: { cost, used }, rateLimit: rateLimitOfDay(policy, used, now) }, answer }
}

const always = () => true

/**
 * The key guard's whole judgement of a request: admitAtOnce, and only when it declines the checks
 * that wait (key lookup, quota read or charge). Throws the refusal (401, 403, 429) after putting
 * the quota state in `headers` and beside the request, so error bodies carry it too.
 */
async function admit(auth: AuthRuntime, request: Request, rule: ApiKeyRule, body: unknown, headers: Record<string, unknown>): Promise<Admission> {
  const atOnce = admitAtOnce(auth, request, rule, always)
  if (atOnce) return announce(request, headers, atOnce.admission)
  const raw = request.headers.get('x-api-key')
  if (!raw) throw new AppError('API_KEY_REQUIRED', 'An API key is required: send it in the X-API-Key header')
  const identity = await auth.keys.lookup(raw)
  if (!identity) throw new AppError('INVALID_API_KEY', 'The API key is unknown or has been revoked')
  const policy = TIER_POLICY[identity.tier]
  const now = auth.clock.now()
  const allowed = policy.capabilities.has(rule.needs)
  const cost = typeof rule.cost === 'function' ? (allowed ? rule.cost({ body, tier: identity.tier }) : 0) : (rule.cost ?? 1)
  if (!allowed || cost === 0) {
    const counters = await auth.quota.read(identity.accountId, now)
    const admission = announce(request, headers, { identity, policy, now, counters, rateLimit: rateLimitOfDay(policy, counters.used, now) })
    recordUse(auth, identity, now, 0)
    if (!allowed) {
      const needed = TIER_POLICY[minimumTier(rule.needs)].label
      throw new AppError('TIER_REQUIRED', `This endpoint requires a ${needed} subscription or higher; this key's account is on ${policy.label}`)
    }
    return admission
  }
  const charged = await auth.quota.charge({ accountId: identity.accountId, keyId: identity.keyId, cost, limit: policy.dailyQuota, now })
  const rateLimit = rateLimitOfDay(policy, charged.used, now)
  recordUse(auth, identity, now, charged.admitted ? cost : 0, !charged.admitted)
  auth.quotaCounts[charged.admitted ? 'admitted' : 'rejected'][identity.tier].inc()
  if (!charged.admitted) {
    announce(request, headers, { identity, policy, now, rateLimit })
    const reset = nextUtcMidnight(now)
    const retryAfter = Math.max(1, Math.ceil((reset.getTime() - now.getTime()) / 1000))
    const left = Math.max(0, policy.dailyQuota - charged.used)
    const why =
      cost > 1 && left > 0
        ? `This request needs ${cost} credits of the daily quota of ${policy.dailyQuota} and ${left} are left`
        : `Daily quota of ${policy.dailyQuota} requests exceeded`
    throw new AppError('RATE_LIMIT_EXCEEDED', `${why}; it resets at midnight UTC (${reset.toISOString()})`, undefined, {
      'retry-after': String(retryAfter),
    })
  }
  return announce(request, headers, { identity, policy, now, charge: { cost, used: charged.used }, rateLimit })
}

/** Puts an admission beside its request (for the route, the error handler, refundRefusal) and its X-RateLimit-* in `headers`. */
function announce(request: Request, headers: Record<string, unknown>, admission: Admission): Admission {
  addRateLimitHeaders(headers, admission.rateLimit)
  noteAccount(admission.identity.accountId, admission.identity.tier)
  rateLimits.set(request, admission.rateLimit)
  keyAuths.set(request, admission)
  return admission
}

/**
 * A 429 costs nothing, also one a route answers after the guard charged its request (429
 * LIVE_FETCH_LIMIT): the units go back, the refusal counts in rejected_today, and the answer's
 * `rate_limit` and headers show the quota as it was before (docs/adr/0090-a-429-never-costs-a-unit.md).
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
  const rateLimit = rateLimitOfDay(policy, charge.used - charge.cost, now)
  addRateLimitHeaders(headers, rateLimit)
  rateLimits.set(request, rateLimit)
}

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])

/**
 * CSRF defence for cookie-authenticated writes (docs/adr/0005-csrf-rules-for-cookie-writes.md), part 1: a browser sends its
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

/** A key-guarded read of one thing: a bad parameter (400), nothing of that id (404), and the guard's refusals. */
export const NOT_FOUND_ERRORS = { 400: 'Error', 404: 'Error', ...KEY_GUARD_ERRORS } as const

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
        await admit(auth, request, rule, body, set.headers)
        // Judged only now, so a bad body costs quota like any refused request (docs/adr/0036-quota-accounting.md).
        if (body instanceof RefusedBody) throw body.error
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
        noteAccount(found.account.id, found.account.tier)
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
