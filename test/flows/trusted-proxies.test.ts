import { afterAll, describe, expect, test } from 'bun:test'
import { mkdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SIGNUP_THROTTLE } from '../../src/modules/auth/login-throttle'
import { fetchFrom, freshAddress } from '../helpers/client-address'
import { freshDatabase, testLogger } from '../helpers/db'
import { eventually } from '../helpers/eventually'
import { ROOT, stopProcess } from '../helpers/process'
import { freePort } from '../helpers/redis-server'
import { startServer } from '../helpers/server'

// TRUSTED_PROXIES over real HTTP, seen through the sign-up throttle (SIGNUP_THROTTLE.refuseAt a
// client an hour): which address a request is counted under. fetch connects from 127.0.0.1;
// fetchFrom from any other loopback address, which no server here trusts.
const { db } = await freshDatabase('seeded')
const trusting = startServer({ db, redis: undefined, logger: testLogger, config: { trustedProxies: ['127.0.0.1/32', '10.0.0.0/8'] } })
const trustingNone = startServer({ db, redis: undefined, logger: testLogger })

let emails = 0
let clients = 0
/** A client address (in 198.18.0.0/15, the benchmarking range) no other case uses. */
const clientIp = () => {
  const n = ++clients
  return `198.${18 + (n >> 16)}.${(n >> 8) & 0xff}.${n & 0xff}`
}

/** A sign-up through `base` from `from` (default 127.0.0.1, plain fetch) with the given X-Forwarded-For; its status. */
async function signUp(base: string, forwardedFor: string | undefined, from?: string): Promise<number> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(forwardedFor !== undefined && { 'x-forwarded-for': forwardedFor }) }
  const body = JSON.stringify({ email: `proxied${++emails}-${process.pid}@example.com`, password: 'a long enough password' })
  const url = `${base}/v1/auth/signup`
  const response = from ? await fetchFrom(from, url, { method: 'POST', headers, body }) : await fetch(url, { method: 'POST', headers, body })
  if (response.status === 429) expect(((await response.json()) as { error: { code: string } }).error.code).toBe('TOO_MANY_ATTEMPTS')
  return response.status
}

/** Signs up `refuseAt` times, each request made by `nth(i)`: all admitted. Then the same client once more: refused. */
async function exhaust(nth: (index: number) => Promise<number>): Promise<void> {
  const statuses: number[] = []
  for (let index = 0; index < SIGNUP_THROTTLE.refuseAt; index++) statuses.push(await nth(index))
  expect(statuses).toEqual(Array(SIGNUP_THROTTLE.refuseAt).fill(201))
  expect(await nth(SIGNUP_THROTTLE.refuseAt)).toBe(429)
}

describe('behind a trusted proxy', () => {
  test("each client is counted under the address the proxy forwards, not under the proxy's", async () => {
    const [client, other] = [clientIp(), clientIp()]
    await exhaust(() => signUp(trusting.base, client))
    // Another client behind the same proxy is a client of its own.
    expect(await signUp(trusting.base, other)).toBe(201)
  })

  test('the right-most untrusted entry of a chain: what a client wrote left of it changes nothing', async () => {
    const client = clientIp()
    // The client's own X-Forwarded-For, then what the balancer (127.0.0.1) and a TLS proxy (10.1.2.3) appended.
    await exhaust(() => signUp(trusting.base, `${clientIp()}, ${client}, 10.1.2.3`))
    expect(await signUp(trusting.base, `${client}, 10.1.2.3`)).toBe(429)
  })

  test('a malformed entry counts the request under the trusted proxy that wrote it', async () => {
    const proxy = `10.${++clients & 0xff}.0.1`
    await exhaust((index) => signUp(trusting.base, `${clientIp()}, garbage-${index}, ${proxy}`))
    expect(await signUp(trusting.base, proxy)).toBe(429)
  })

  test('from a peer that is not trusted, X-Forwarded-For is ignored: the peer is the client', async () => {
    const peer = freshAddress()
    await exhaust(() => signUp(trusting.base, clientIp(), peer))
  })
})

describe('trusting no proxy (the default)', () => {
  test('every X-Forwarded-For is ignored, even from loopback', async () => {
    await exhaust(() => signUp(trustingNone.base, clientIp()))
  })
})

// The shipped HAProxy config with only its addresses changed: loopback ports, api-1 the trusting server, api-2 a closed port.
const haproxy = Bun.which('haproxy')
describe.skipIf(!haproxy)('behind deploy/haproxy.cfg', () => {
  const dir = join(tmpdir(), `tcg-trusted-proxies-${process.pid}`)
  let balancer: ReturnType<typeof Bun.spawn> | undefined
  afterAll(async () => {
    if (balancer) await stopProcess(balancer)
    rmSync(dir, { recursive: true, force: true })
  }, 30_000)

  test("clients are told apart through the balancer, and one cannot take another's address by sending X-Forwarded-For", async () => {
    await trusting.ready()
    const [front, monitor, closed] = [await freePort(), await freePort(), await freePort()]
    const config = readFileSync(join(ROOT, 'deploy/haproxy.cfg'), 'utf8')
      .replace('bind :8080', `bind 127.0.0.1:${front}`)
      .replace('bind :8404', `bind 127.0.0.1:${monitor}`)
      .replace('api-1:3000', new URL(trusting.base).host)
      .replace('api-2:3000', `127.0.0.1:${closed}`)
    mkdirSync(dir, { recursive: true })
    await Bun.write(join(dir, 'haproxy.cfg'), config)
    balancer = Bun.spawn([haproxy!, '-db', '-f', join(dir, 'haproxy.cfg')], { stdout: 'ignore', stderr: 'ignore' })
    await eventually(async () => (await fetch(`http://127.0.0.1:${monitor}/healthz`)).status === 200, { timeout: 30_000, what: 'the balancer seeing its node up' })
    const base = `http://127.0.0.1:${front}`
    const [attacker, victim] = [freshAddress(), freshAddress()]
    // The attacker claims to be the victim (and others) in X-Forwarded-For: the balancer's own entry wins.
    await exhaust(() => signUp(base, `${victim}, ${clientIp()}`, attacker))
    expect(await signUp(base, undefined, victim)).toBe(201)
  }, 60_000)
})
