import { Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { models } from '../../shared/models-plugin'
import { endSession, login, type Session, signUp, startSession } from './accounts'
import { authGuard, KEY_GUARD_ERRORS, SESSION_COOKIE, withRateLimit } from './guard'
import { createKey, listKeys, MAX_ACTIVE_KEYS, revokeKey } from './keys'
import { LOGIN_THROTTLE, SIGNUP_THROTTLE } from './login-throttle'
import { Account, CreatedKey, CreateKeyBody, Credentials, KeyIdParams, KeyListItem, Message, Usage } from './model'
import type { AuthRuntime } from './runtime'
import { TIER_POLICY } from './tiers'
import type { AccountRow } from './types'

const accountView = (account: AccountRow) => ({
  id: account.id,
  email: account.email,
  tier: account.tier,
  subscription: { plan: account.tier, status: account.subscriptionStatus },
  created_at: account.createdAt.toISOString(),
})

const SESSION_ERRORS = { 401: 'Error', 403: 'Error', 415: 'Error' } as const

/** Accounts, sessions and keys (cookie-authenticated) and usage (key-authenticated). */
export function authRoutes(auth: AuthRuntime) {
  // The same attributes on setting and clearing, or a browser keeps the old cookie.
  const cookie = (value: string, lifetime: { expires?: Date; maxAge: number }) =>
    new Bun.Cookie(SESSION_COOKIE, value, { httpOnly: true, sameSite: 'lax', path: '/', secure: auth.cookieSecure, ...lifetime }).serialize()
  const sessionCookie = (session: Session) =>
    cookie(session.token, {
      expires: session.expiresAt,
      maxAge: Math.round((session.expiresAt.getTime() - auth.clock.now().getTime()) / 1000),
    })
  const clearedCookie = () => cookie('', { maxAge: 0 })

  return new Elysia({ name: 'auth-routes' })
    .use(models)
    .use(authGuard(auth))
    .model({ Account })
    .post(
      '/v1/auth/signup',
      async ({ body, set, request, server }) => {
        const account = await signUp(auth, { ...body, address: auth.clientAddress(request, server) })
        set.headers['set-cookie'] = sessionCookie(await startSession(auth.db, account.id, auth.clock.now()))
        set.status = 201
        return { data: accountView(account) }
      },
      {
        sameOriginJson: true,
        body: Credentials,
        response: { 201: Type.Object({ data: Type.Ref('Account') }), 400: 'Error', 403: 'Error', 409: 'Error', 415: 'Error', 429: 'Error' },
        detail: {
          tags: ['Account'],
          summary: 'Create an account',
          description: `New accounts are on the Free tier. Also logs in: the response sets the \`session\` cookie. At most ${SIGNUP_THROTTLE.refuseAt} sign-ups an hour from an address, whatever their outcome; beyond, 429 \`TOO_MANY_ATTEMPTS\` with \`Retry-After\`.`,
        },
      },
    )
    .post(
      '/v1/auth/login',
      async ({ body, set, request, server }) => {
        const { account, session } = await login(auth, { ...body, address: auth.clientAddress(request, server), now: auth.clock.now() })
        set.headers['set-cookie'] = sessionCookie(session)
        return { data: accountView(account) }
      },
      {
        sameOriginJson: true,
        body: Credentials,
        response: { 200: Type.Object({ data: Type.Ref('Account') }), 400: 'Error', 401: 'Error', 403: 'Error', 415: 'Error', 429: 'Error' },
        detail: {
          tags: ['Account'],
          summary: 'Log in',
          description: `Sets the \`session\` cookie (HttpOnly, SameSite=Lax, 30 days). Attempts are counted before the password is checked, in ${LOGIN_THROTTLE.windowSeconds / 60}-minute windows, per email from one address, per email and per address. Beyond ${LOGIN_THROTTLE.pair.slowAfter} for an email from one address (${LOGIN_THROTTLE.email.slowAfter} for an email, ${LOGIN_THROTTLE.address.slowAfter} for an address) each attempt waits longer; beyond ${LOGIN_THROTTLE.pair.refuseAt} for an email from one address, ${LOGIN_THROTTLE.email.refuseAt} for an email or ${LOGIN_THROTTLE.address.refuseAt} for an address they are refused with 429 \`TOO_MANY_ATTEMPTS\` and \`Retry-After\` until the window ends. A successful login forgives its email's attempts from its address.`,
        },
      },
    )
    .post(
      '/v1/auth/logout',
      async ({ session, set }) => {
        await endSession(auth.db, session.sessionId, auth.clock.now())
        set.headers['set-cookie'] = clearedCookie()
        return { data: { message: 'Logged out' } }
      },
      {
        session: true,
        response: { 200: Type.Object({ data: Message }), ...SESSION_ERRORS },
        detail: { tags: ['Account'], summary: 'Log out', description: 'Ends the session on the server and clears the cookie.' },
      },
    )
    .get('/v1/auth/me', ({ session }) => ({ data: accountView(session.account) }), {
      session: true,
      response: { 200: Type.Object({ data: Type.Ref('Account') }), 401: 'Error' },
      detail: { tags: ['Account'], summary: 'The logged-in account', description: 'The account the `session` cookie belongs to: id, email, tier, subscription and creation time.' },
    })
    .post(
      '/v1/keys',
      async ({ body, session, set }) => {
        const created = await createKey(auth.db, session.account, body.name)
        set.status = 201
        return {
          data: {
            id: created.publicId,
            key: created.key,
            key_prefix: created.keyPrefix,
            name: created.name,
            tier: session.account.tier,
            message: 'Store this key now: it is shown only once. Send it in the X-API-Key header.',
          },
        }
      },
      {
        session: true,
        body: CreateKeyBody,
        response: { 201: Type.Object({ data: CreatedKey }), 400: 'Error', 409: 'Error', ...SESSION_ERRORS },
        detail: {
          tags: ['Keys'],
          summary: 'Create an API key',
          description: `Answers the raw key once; only its SHA-256 is stored. At most ${MAX_ACTIVE_KEYS} active keys per account (409 beyond).`,
        },
      },
    )
    .get(
      '/v1/keys',
      async ({ session }) => {
        const keys = await listKeys(auth.db, session.account.id, auth.usage.pending)
        return {
          data: keys.map((key) => ({
            id: key.publicId,
            key_prefix: key.keyPrefix,
            name: key.name,
            tier: session.account.tier,
            is_active: key.isActive ? (1 as const) : (0 as const),
            total_requests: key.totalRequests,
            last_used_at: key.lastUsedAt?.toISOString() ?? null,
            created_at: key.createdAt.toISOString(),
          })),
        }
      },
      {
        session: true,
        response: { 200: Type.Object({ data: Type.Array(KeyListItem) }), 401: 'Error' },
        detail: { tags: ['Keys'], summary: "List the account's keys", description: 'Revoked keys included; never the key itself.' },
      },
    )
    .delete(
      '/v1/keys/:keyId',
      async ({ params, session }) => {
        await revokeKey(auth.db, auth.keys, session.account.id, params.keyId, auth.clock.now())
        return { data: { message: `API key ${params.keyId} revoked` } }
      },
      {
        session: true,
        params: KeyIdParams,
        response: { 200: Type.Object({ data: Message }), 400: 'Error', 404: 'Error', ...SESSION_ERRORS },
        detail: {
          tags: ['Keys'],
          summary: 'Revoke an API key',
          description:
            'Deactivates the key at once on every node; its usage history stays. `keyId` is the `key_…` id `GET /v1/keys` lists: ' +
            'an integer (the ids keys had before) or any other malformed id is a 400 saying so, and a well-formed id of no key of ' +
            "this account's is a 404.",
        },
      },
    )
    .get(
      '/v1/usage',
      async ({ apiKey }) => {
        const { identity, policy, counters } = apiKey
        const keys = await listKeys(auth.db, identity.accountId, auth.usage.pending)
        const used = counters!.used
        return {
          data: {
            account: {
              today_requests: used,
              daily_limit: policy.dailyQuota,
              daily_remaining: Math.max(0, policy.dailyQuota - used),
              rejected_today: counters!.rejected,
              live_refreshes_today: counters!.liveRefreshes,
              live_refresh_limit: policy.liveRefreshesPerDay,
            },
            keys: keys.map((key) => ({
              id: key.publicId,
              key_prefix: key.keyPrefix,
              name: key.name,
              tier: identity.tier,
              is_active: key.isActive ? (1 as const) : (0 as const),
              requests_today: counters!.byKey.get(key.id) ?? 0,
              total_requests: key.totalRequests,
              last_used_at: key.lastUsedAt?.toISOString() ?? null,
            })),
            subscription: { plan: identity.tier, status: identity.subscriptionStatus },
          },
        }
      },
      {
        apiKey: { needs: 'catalog', cost: 0 },
        response: { 200: withRateLimit(Type.Object({ data: Usage })), ...KEY_GUARD_ERRORS },
        detail: {
          tags: ['Account'],
          summary: "Today's usage of the key's account",
          description: `Free of charge and answered even over quota. Daily quotas: ${Object.values(TIER_POLICY)
            .map((p) => `${p.label} ${p.dailyQuota.toLocaleString('en-US')}`)
            .join(', ')}.`,
        },
      },
    )
}
