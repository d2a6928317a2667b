/**
 * The soak's client (bench/soak.bench.ts starts it as its own process): every endpoint of the API
 * through the load balancer at a fixed arrival rate, each response recorded with when it was sent,
 * its status, its latency to the last byte, the node that answered (the balancer's
 * `X-Soak-Server`) and what it cost the account, so the soak can put every error in time against
 * the kill and compare every account's admitted units with what the service charged.
 *
 *   bun bench/soak-client.ts <plan.json>
 *
 * Requests are sent on schedule whether or not earlier ones have answered (open loop): a slow
 * service shows as latency, never as a lower rate. How late each was sent (`lag`) shows whether
 * the client kept up. Session flows (sign-up, login, keys, webhooks) run one step after another
 * in their own loop, as a person or a dashboard would.
 */
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs'

export interface SoakKey {
  /** The raw key. */
  raw: string
  /** Its row id, which Redis counts its units by (`k:<id>`). */
  id: number
}

export interface SoakAccount {
  accountId: number
  /** The account's keys, used in turn. */
  keys: SoakKey[]
  /** Its share of the keyed requests. */
  weight: number
}

export interface SoakPlan {
  /** The balancer's origin. */
  url: string
  seconds: number
  /** Requests per second of the main stream (the session flows and the Free account come on top). */
  rate: number
  /** The main stream stops at this count even if time is left. */
  maxRequests: number
  /** Business accounts the keyed reads are spread over. */
  business: SoakAccount[]
  /** A Free account asked `freeRate` times a second: it runs out of its quota early and is refused after. */
  free: { accountId: number; key: SoakKey; rate: number }
  /** The Business account whose session manages keys and webhooks (one of `business`). */
  session: { accountId: number; email: string; password: string; cycleSeconds: number; signups: number; signupEmailPrefix: string }
  /** Where webhooks point: the soak's receiver. */
  webhookUrl: string
  data: {
    cardIds: number[]
    setIds: number[]
    marketplaceIds: number[]
    gameSlugs: string[]
    names: string[]
    /** Cards whose condition prices are stale, so asking for them refreshes live. */
    conditionCardIds: number[]
  }
  /** JSON lines of SoakRecord. */
  output: string
  seed: number
}

export interface SoakRecord {
  /** The OpenAPI operation, `GET /v1/cards/{id}/prices`. */
  kind: string
  /** Epoch ms (fractional) when the request was sent. */
  at: number
  /** ms from sending to the last byte of the body. */
  ms: number
  /** ms it was sent after its planned time. */
  lag: number
  /** 0: no HTTP answer (`error` says why). */
  status: number
  error?: string
  /** The node that answered, from the balancer's header. */
  server?: string
  /** The account charged when the answer is admitted, and the key's row id. */
  account?: number
  keyId?: number
  /** Units the request costs its account when admitted (0 for a route that costs none). */
  units: number
  /** Whether the status is one this request may get. */
  expected: boolean
  /** A condition-price answer that refreshed live (`meta.cached` false). */
  live?: boolean
}

/** Statuses that cost nothing though the key was valid (docs/adr/0036-quota-accounting.md); 5xx and no answer cost nothing the client can see. */
export const UNCHARGED = new Set([401, 403, 429])

interface Request {
  kind: string
  method?: string
  path: string
  key?: SoakKey
  cookie?: string
  body?: unknown
  headers?: Record<string, string>
  account?: number
  units: number
  expect: number[]
  /** Read the body as JSON and hand it back. */
  json?: boolean
}

/** A small seeded generator, so a soak's mix can be repeated. */
function random(seed: number) {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (below: number) => Math.floor(next() * below)
  const pick = <T>(list: T[]) => list[int(list.length)]!
  const some = <T>(list: T[], count: number) => Array.from({ length: count }, () => pick(list))
  return { next, int, pick, some }
}

type Random = ReturnType<typeof random>

/** The main stream: what a Business integration asks for, by weight per 1,000 requests. */
function streamMix(plan: SoakPlan, rng: Random) {
  const { data } = plan
  const etags = new Map<string, string>()
  const totalWeight = plan.business.reduce((sum, account) => sum + account.weight, 0)
  let turn = 0
  const account = () => {
    let draw = rng.next() * totalWeight
    const chosen = plan.business.find((candidate) => (draw -= candidate.weight) < 0) ?? plan.business[0]!
    return { account: chosen.accountId, key: chosen.keys[turn++ % chosen.keys.length]! }
  }
  const keyed = (kind: string, path: string, extra: Partial<Request> = {}): Request => ({ kind, path, units: 1, expect: [200], ...account(), ...extra })
  const open = (kind: string, path: string): Request => ({ kind, path, units: 0, expect: [200] })
  const ids = (count: number) => [...new Set(rng.some(data.cardIds, count))].join(',')
  const since = () => new Date(Date.now() - (1 + rng.int(72)) * 3_600_000).toISOString()
  const word = () => rng.pick(data.names).split(' ')[0]!
  const entries: [number, () => Request][] = [
    [
      300,
      () => {
        const path = `/v1/cards/${rng.pick(data.cardIds)}/prices`
        const etag = etags.get(path)
        // A client that kept the ETag asks again with it: 304 until prices change.
        const headers: Record<string, string> = etag && rng.next() < 0.3 ? { 'if-none-match': etag } : {}
        return keyed('GET /v1/cards/{id}/prices', path, { headers, expect: [200, 304] })
      },
    ],
    [60, () => keyed('GET /v1/prices/top-movers', `/v1/prices/top-movers?period=${rng.pick(['24h', '7d', '30d'])}&direction=${rng.pick(['up', 'down'])}&limit=${1 + rng.int(50)}`)],
    [40, () => keyed('GET /v1/bulk/prices', `/v1/bulk/prices?ids=${ids(100 + rng.int(400))}`)],
    [75, () => keyed('GET /v1/cards/{id}', `/v1/cards/${rng.pick(data.cardIds)}`)],
    // An id no card has: a 404 that costs a unit like any answer after a valid key.
    [5, () => keyed('GET /v1/cards/{id}', `/v1/cards/${2_000_000_000 + rng.int(1000)}`, { expect: [404] })],
    [
      100,
      () => keyed('GET /v1/search', `/v1/search?q=${encodeURIComponent(rng.next() < 0.5 ? rng.pick(data.names) : word().slice(0, 2 + rng.int(4)))}&per_page=${10 + rng.int(40)}`),
    ],
    [80, () => keyed('GET /v1/cards/autocomplete', `/v1/cards/autocomplete?q=${encodeURIComponent(word().slice(0, 2 + rng.int(4)))}`)],
    [50, () => keyed('GET /v1/cards/{id}/history', `/v1/cards/${rng.pick(data.cardIds)}/history?range=${rng.pick(['month', 'quarter', 'year', 'all'])}`)],
    [20, () => keyed('GET /v1/cards/{id}/history/detailed', `/v1/cards/${rng.pick(data.cardIds)}/history/detailed`)],
    [20, () => keyed('GET /v1/sets', `/v1/sets?game=${rng.pick(data.gameSlugs)}&per_page=${10 + rng.int(90)}`)],
    [20, () => keyed('GET /v1/sets/{id}', `/v1/sets/${rng.pick(data.setIds)}`)],
    [20, () => keyed('GET /v1/sets/{id}/cards', `/v1/sets/${rng.pick(data.setIds)}/cards?sort=${rng.pick(['number', 'name', 'price_asc', 'price_desc'])}`)],
    [15, () => keyed('GET /v1/sets/{id}/prices', `/v1/sets/${rng.pick(data.setIds)}/prices`)],
    [30, () => keyed('GET /v1/cards/marketplace/{marketplaceId}', `/v1/cards/marketplace/${rng.pick(data.marketplaceIds)}`)],
    [20, () => keyed('GET /v1/prices/changes', `/v1/prices/changes?since=${since()}&limit=${1 + rng.int(500)}`)],
    [15, () => keyed('GET /v1/bulk/cards', `/v1/bulk/cards?ids=${ids(10 + rng.int(90))}`)],
    [10, () => keyed('GET /v1/bulk/history', `/v1/bulk/history?ids=${ids(5 + rng.int(45))}`)],
    [5, () => keyed('GET /v1/export/set/{id}', `/v1/export/set/${rng.pick(data.setIds)}?format=${rng.pick(['json', 'csv'])}`)],
    [
      10,
      () => {
        const marketplaceIds = rng.some(data.marketplaceIds, 1 + rng.int(200))
        // docs/adr/0051: a valid body costs ceil(items × 0.1) on Business.
        return keyed('POST /v1/bulk/resolve/marketplace', '/v1/bulk/resolve/marketplace', {
          method: 'POST',
          body: { ids: marketplaceIds },
          units: Math.ceil(marketplaceIds.length / 10),
        })
      },
    ],
    [
      10,
      () => {
        const names = rng.some(data.names, 1 + rng.int(100))
        return keyed('POST /v1/bulk/resolve/name', '/v1/bulk/resolve/name', { method: 'POST', body: { names }, units: Math.ceil(names.length / 10) })
      },
    ],
    [10, () => keyed('GET /v1/cards/{id}/prices/conditions', `/v1/cards/${rng.pick(data.conditionCardIds)}/prices/conditions`, { json: true })],
    [10, () => keyed('GET /v1/bulk/conditions', `/v1/bulk/conditions?ids=${[...new Set(rng.some(data.conditionCardIds, 20 + rng.int(200)))].join(',')}`)],
    // The usage read costs nothing (docs/adr/0036-quota-accounting.md).
    [10, () => keyed('GET /v1/usage', '/v1/usage', { units: 0 })],
    [20, () => open('GET /v1/games', `/v1/games?per_page=${rng.pick([5, 20, 50])}`)],
    [10, () => open('GET /v1/games/{slug}', `/v1/games/${rng.pick(data.gameSlugs)}`)],
    [10, () => open('GET /v1/games/{slug}/sets', `/v1/games/${rng.pick(data.gameSlugs)}/sets`)],
    [4, () => open('GET /health', '/health')],
    [4, () => open('GET /ready', '/ready')],
    [2, () => open('GET /', '/')],
    [1, () => open('GET /docs', '/docs')],
    [1, () => open('GET /openapi.json', '/openapi.json')],
  ]
  const total = entries.reduce((sum, [weight]) => sum + weight, 0)
  return {
    next(): Request {
      let draw = rng.next() * total
      for (const [weight, make] of entries) if ((draw -= weight) < 0) return make()
      return entries[0]![1]()
    },
    /** Keeps a 200's ETag for the next ask of the same path. */
    answered(request: Request, response: Response) {
      const etag = response.headers.get('etag')
      if (etag && request.kind === 'GET /v1/cards/{id}/prices') etags.set(request.path, etag)
    },
  }
}

/** Sends one request and records it; answers the parsed body when asked for. */
async function send(plan: SoakPlan, request: Request, planned: number, records: SoakRecord[]): Promise<{ status: number; body?: any; response?: Response }> {
  const sent = performance.now()
  const record: SoakRecord = {
    kind: request.kind,
    at: performance.timeOrigin + sent,
    ms: 0,
    lag: Math.max(0, sent - planned),
    status: 0,
    units: request.units,
    expected: false,
    ...(request.account === undefined ? {} : { account: request.account }),
    ...(request.key === undefined ? {} : { keyId: request.key.id }),
  }
  const headers: Record<string, string> = { ...request.headers }
  if (request.key) headers['x-api-key'] = request.key.raw
  if (request.cookie) headers.cookie = request.cookie
  if (request.body !== undefined) headers['content-type'] = 'application/json'
  try {
    const response = await fetch(plan.url + request.path, {
      method: request.method ?? 'GET',
      headers,
      body: request.body === undefined ? undefined : JSON.stringify(request.body),
      redirect: 'manual',
      // A request on a kept-alive connection that the balancer closes unanswered (its node died
      // under it) is sent again by fetch, unseen, to the other node: charged twice, seen once. On a
      // connection of its own, a charged request's cut answer is a 502 the verdict sees
      // (docs/adr/0124-the-soak-behind-a-real-load-balancer.md).
      keepalive: request.account === undefined,
    })
    const text = await response.text()
    record.ms = performance.now() - sent
    record.status = response.status
    const server = response.headers.get('x-soak-server')
    if (server) record.server = server
    record.expected = request.expect.includes(response.status)
    let body: any
    if (request.json && response.status < 300) {
      body = JSON.parse(text)
      if (request.kind === 'GET /v1/cards/{id}/prices/conditions' && body?.meta?.cached === false) record.live = true
    }
    records.push(record)
    return { status: response.status, body, response }
  } catch (error) {
    record.ms = performance.now() - sent
    record.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
    records.push(record)
    return { status: 0 }
  }
}

/**
 * A person's session, round after round: log in, read the account and its keys, make a key, use
 * it, revoke it and check it is refused everywhere, manage a webhook (create, list, its
 * deliveries, a test ping, delete), log out. The first rounds also sign up a new account.
 */
async function sessionFlows(plan: SoakPlan, rng: Random, until: number, records: SoakRecord[]) {
  const { session } = plan
  let round = 0
  while (performance.now() < until) {
    const started = performance.now()
    const step = (request: Omit<Request, 'units'> & { units?: number }) => send(plan, { units: 0, ...request }, performance.now(), records)
    if (round < session.signups) {
      await step({
        kind: 'POST /v1/auth/signup',
        method: 'POST',
        path: '/v1/auth/signup',
        body: { email: `${session.signupEmailPrefix}${round}@example.com`, password: 'soak password 1' },
        expect: [201],
      })
    }
    const login = await step({ kind: 'POST /v1/auth/login', method: 'POST', path: '/v1/auth/login', body: { email: session.email, password: session.password }, expect: [200] })
    const cookie = login.response?.headers
      .getSetCookie()
      .find((line) => line.startsWith('session='))
      ?.split(';')[0]
    if (cookie) {
      await step({ kind: 'GET /v1/auth/me', path: '/v1/auth/me', cookie, expect: [200] })
      await step({ kind: 'GET /v1/keys', path: '/v1/keys', cookie, expect: [200] })
      const made = await step({ kind: 'POST /v1/keys', method: 'POST', path: '/v1/keys', cookie, body: { name: `soak round ${round}` }, expect: [201], json: true })
      const key = made.body?.data
      if (key) {
        const cardPath = `/v1/cards/${rng.pick(plan.data.cardIds)}/prices`
        await step({ kind: 'GET /v1/cards/{id}/prices', path: cardPath, key: { raw: key.key, id: -1 }, account: session.accountId, units: 1, expect: [200] })
        await step({ kind: 'DELETE /v1/keys/{keyId}', method: 'DELETE', path: `/v1/keys/${key.id}`, cookie, expect: [200] })
        // A revocation reaches every node within a second (docs/operations.md); asked after two, on either node, it is refused.
        await Bun.sleep(2_000)
        for (let i = 0; i < 2; i++)
          await step({ kind: 'GET /v1/cards/{id}/prices', path: cardPath, key: { raw: key.key, id: -1 }, account: session.accountId, units: 1, expect: [401] })
      }
      const hook = await step({
        kind: 'POST /v1/webhooks',
        method: 'POST',
        path: '/v1/webhooks',
        cookie,
        body: { url: plan.webhookUrl, card_id: rng.pick(plan.data.cardIds), condition: rng.pick(['above', 'below']), threshold: 1 + rng.int(100) },
        expect: [201],
        json: true,
      })
      await step({ kind: 'GET /v1/webhooks', path: '/v1/webhooks', cookie, expect: [200] })
      const webhookId = hook.body?.data?.id
      if (webhookId !== undefined) {
        await step({ kind: 'POST /v1/webhooks/{webhookId}/test', method: 'POST', path: `/v1/webhooks/${webhookId}/test`, cookie, expect: [200] })
        await step({ kind: 'GET /v1/webhooks/{webhookId}/deliveries', path: `/v1/webhooks/${webhookId}/deliveries`, cookie, expect: [200] })
        await step({ kind: 'DELETE /v1/webhooks/{webhookId}', method: 'DELETE', path: `/v1/webhooks/${webhookId}`, cookie, expect: [200] })
      }
      await step({ kind: 'POST /v1/auth/logout', method: 'POST', path: '/v1/auth/logout', cookie, expect: [200] })
    }
    round++
    const next = started + session.cycleSeconds * 1000
    if (next > until) break
    await Bun.sleep(Math.max(0, next - performance.now()))
  }
}

/** The Free account at its own rate: its first 100 a day are admitted, the rest refused with 429. */
async function freeAccount(plan: SoakPlan, rng: Random, until: number, records: SoakRecord[]) {
  const { free } = plan
  const inFlight = new Set<Promise<unknown>>()
  const interval = 1000 / free.rate
  const start = performance.now()
  for (let i = 0; ; i++) {
    const planned = start + i * interval
    if (planned >= until) break
    const wait = planned - performance.now()
    if (wait > 0) await Bun.sleep(wait)
    const search = i % 2 === 1
    const request: Request = search
      ? { kind: 'GET /v1/search', path: `/v1/search?q=${encodeURIComponent(rng.pick(plan.data.names))}`, key: free.key, account: free.accountId, units: 1, expect: [200, 429] }
      : { kind: 'GET /v1/cards/{id}/prices', path: `/v1/cards/${rng.pick(plan.data.cardIds)}/prices`, key: free.key, account: free.accountId, units: 1, expect: [200, 429] }
    const sending = send(plan, request, planned, records)
    inFlight.add(sending)
    void sending.finally(() => inFlight.delete(sending))
  }
  await Promise.all(inFlight)
}

async function stream(plan: SoakPlan, rng: Random, until: number, records: SoakRecord[]) {
  const mix = streamMix(plan, rng)
  const inFlight = new Set<Promise<unknown>>()
  const interval = 1000 / plan.rate
  const start = performance.now()
  for (let i = 0; i < plan.maxRequests; i++) {
    const planned = start + i * interval
    if (planned >= until) break
    const wait = planned - performance.now()
    // Sleeping under a millisecond overshoots; those requests go out in this turn.
    if (wait >= 1) await Bun.sleep(wait)
    const request = mix.next()
    const sending = send(plan, request, planned, records).then(({ response }) => {
      if (response?.status === 200) mix.answered(request, response)
    })
    inFlight.add(sending)
    void sending.finally(() => inFlight.delete(sending))
  }
  await Promise.all(inFlight)
}

/** The operations a soak covers: the stream's, the session flows' and the Free account's. */
export const COVERED_BY_FLOWS = [
  'POST /v1/auth/signup',
  'POST /v1/auth/login',
  'POST /v1/auth/logout',
  'GET /v1/auth/me',
  'POST /v1/keys',
  'GET /v1/keys',
  'DELETE /v1/keys/{keyId}',
  'POST /v1/webhooks',
  'GET /v1/webhooks',
  'DELETE /v1/webhooks/{webhookId}',
  'GET /v1/webhooks/{webhookId}/deliveries',
  'POST /v1/webhooks/{webhookId}/test',
]

/** The operations the main stream asks for, from one draw of many requests. */
export function streamOperations(plan: SoakPlan): Set<string> {
  const mix = streamMix(plan, random(1))
  return new Set(Array.from({ length: 20_000 }, () => mix.next().kind))
}

async function main() {
  const plan = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as SoakPlan
  const rng = random(plan.seed)
  const records: SoakRecord[] = []
  writeFileSync(plan.output, '')
  // Written out every few seconds, so the file holds what was answered even if this process dies.
  let flushed = 0
  const flush = () => {
    const batch = records.slice(flushed)
    flushed = records.length
    if (batch.length > 0) appendFileSync(plan.output, batch.map((record) => `${JSON.stringify(record)}\n`).join(''))
  }
  const timer = setInterval(flush, 2_000)
  const until = performance.now() + plan.seconds * 1000
  await Promise.all([stream(plan, rng, until, records), freeAccount(plan, random(plan.seed + 1), until, records), sessionFlows(plan, random(plan.seed + 2), until, records)])
  clearInterval(timer)
  flush()
}

if (import.meta.main) await main()
