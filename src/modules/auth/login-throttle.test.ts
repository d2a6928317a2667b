import { afterAll, describe, expect, test } from 'bun:test'
import Redis from 'ioredis'
import { testRedis, testRedisPrefix } from '../../../test/helpers/auth'
import { fakeClock } from '../../../test/helpers/clock'
import { TEST_REDIS_URL } from '../../../test/helpers/env'
import { redisOptions } from '../../deps'
import { AppError } from '../../shared/errors'
import { attemptCounter, LOGIN_THROTTLE, loginThrottle, SIGNUP_THROTTLE, throttledAddress } from './login-throttle'

// The counting rules, on each store the throttle can use, many attempts at a time (no password
// checks here: those are test/flows/login-abuse.test.ts, over HTTP).
const { pair, email: emailWide, address: addressWide } = LOGIN_THROTTLE

// Nothing listens on port 1: every command fails at once, as while Redis is down.
const downRedis = new Redis('redis://127.0.0.1:1', { ...redisOptions(testRedisPrefix()), retryStrategy: () => null })
downRedis.on('error', () => {})
afterAll(() => downRedis.disconnect())

const stores = [
  { name: 'Redis', redis: await testRedis(), skip: !TEST_REDIS_URL },
  { name: 'the process (no Redis)', redis: undefined, skip: false },
  { name: 'the process, while Redis fails', redis: downRedis, skip: false },
]

let emails = 0
const newEmail = () => `throttle${++emails}@example.com`
let addresses = 0
const newAddress = () => `198.51.100.${++addresses}`

/** How many of `attempts` were admitted; every other one must be a 429 with a Retry-After within `window`. */
async function admitted(attempts: Promise<void>[], window: number) {
  const results = await Promise.allSettled(attempts)
  for (const result of results) {
    if (result.status === 'fulfilled') continue
    const error = result.reason as AppError
    expect(error).toBeInstanceOf(AppError)
    expect(error.code).toBe('TOO_MANY_ATTEMPTS')
    const retryAfter = Number(error.headers!['retry-after'])
    expect(retryAfter).toBeGreaterThan(0)
    expect(retryAfter).toBeLessThanOrEqual(window)
  }
  return results.filter((r) => r.status === 'fulfilled').length
}

for (const store of stores) {
  describe.skipIf(store.skip)(`counted in ${store.name}`, () => {
    const delays: number[] = []
    // The process's windows run on a clock that stays put; the waits are recorded, not slept.
    const throttle = loginThrottle(attemptCounter(store.redis, fakeClock()), { sleep: async (ms) => void delays.push(ms) })
    const attempts = (email: string, address: string, count: number) => Array.from({ length: count }, () => throttle.attempt(email, address))

    test('attempts at once for an email from an address: exactly the limit are admitted', async () => {
      expect(await admitted(attempts(newEmail(), newAddress(), 3 * pair.refuseAt), LOGIN_THROTTLE.windowSeconds)).toBe(pair.refuseAt)
    })

    test('attempts past the soft limit wait a step longer each, up to the maximum', async () => {
      delays.length = 0
      const email = newEmail()
      const address = newAddress()
      for (let i = 0; i < pair.refuseAt; i++) await throttle.attempt(email, address)
      const steps = Array.from({ length: pair.refuseAt - pair.slowAfter - 1 }, (_, k) => Math.min((k + 1) * LOGIN_THROTTLE.stepDelayMs, LOGIN_THROTTLE.maxDelayMs))
      expect(delays).toEqual(steps)
    })

    test("a success forgives its email's attempts from its address, and nothing else", async () => {
      const address = newAddress()
      const owner = newEmail()
      // The address at its limit: 5 attempts at the owner's email, the rest at others'.
      const others = addressWide.refuseAt - 5
      for (let i = 0; i < others; i++) await throttle.attempt(newEmail(), address)
      expect(await admitted(attempts(owner, address, 5), LOGIN_THROTTLE.windowSeconds)).toBe(5)
      expect(await admitted(attempts(newEmail(), address, 1), LOGIN_THROTTLE.windowSeconds)).toBe(0)
      await throttle.succeeded(owner, address)
      // Only the owner's 5 were taken off the address's count.
      expect(await admitted(attempts(newEmail(), address, pair.refuseAt), LOGIN_THROTTLE.windowSeconds)).toBe(5)
      // The owner starts again from zero at this address.
      const fresh = newAddress()
      for (let i = 0; i < pair.refuseAt - 1; i++) await throttle.attempt(owner, fresh)
      await throttle.succeeded(owner, fresh)
      expect(await admitted(attempts(owner, fresh, 2 * pair.refuseAt), LOGIN_THROTTLE.windowSeconds)).toBe(pair.refuseAt)
    })

    test('attempts at one email from many addresses stop at the email-wide ceiling', async () => {
      const email = newEmail()
      const spread = Array.from({ length: 2 * Math.ceil(emailWide.refuseAt / pair.refuseAt) }, newAddress).flatMap((address) => attempts(email, address, pair.refuseAt))
      expect(await admitted(spread, LOGIN_THROTTLE.windowSeconds)).toBe(emailWide.refuseAt)
      expect(await admitted(attempts(email, newAddress(), 1), LOGIN_THROTTLE.windowSeconds)).toBe(0)
    })

    test('an IPv6 client is counted per /64, an IPv4-mapped one as its IPv4 address', async () => {
      const email = newEmail()
      const networks = Array.from({ length: 2 * pair.refuseAt }, () => throttle.attempt(email, `2001:db8:${addresses++}:7::1`))
      expect(await admitted(networks, LOGIN_THROTTLE.windowSeconds)).toBe(2 * pair.refuseAt)
      const network = `2001:db8:${addresses++}:7`
      const sameNetwork = Array.from({ length: 2 * pair.refuseAt }, (_, i) => throttle.attempt(email, `${network}:${i.toString(16)}::1`))
      expect(await admitted(sameNetwork, LOGIN_THROTTLE.windowSeconds)).toBe(pair.refuseAt)
      const v4 = newAddress()
      await admitted(attempts(email, `::ffff:${v4}`, pair.refuseAt), LOGIN_THROTTLE.windowSeconds)
      expect(await admitted(attempts(email, v4, 1), LOGIN_THROTTLE.windowSeconds)).toBe(0)
    })

    test('sign-ups from an address: exactly the limit are admitted, per address', async () => {
      const address = newAddress()
      const signups = Array.from({ length: 3 * SIGNUP_THROTTLE.refuseAt }, () => throttle.signup(address))
      expect(await admitted(signups, SIGNUP_THROTTLE.windowSeconds)).toBe(SIGNUP_THROTTLE.refuseAt)
      expect(await admitted([throttle.signup(newAddress())], SIGNUP_THROTTLE.windowSeconds)).toBe(1)
    })
  })
}

test("the process's counts last one window: refused until it ends, counted afresh after", async () => {
  const clock = fakeClock()
  const throttle = loginThrottle(attemptCounter(undefined, clock), { sleep: async () => {} })
  const [email, address] = [newEmail(), newAddress()]
  const once = () => [throttle.attempt(email, address)]
  for (let i = 0; i < pair.refuseAt; i++) await throttle.attempt(email, address)
  const refused = (await throttle.attempt(email, address).catch((error) => error)) as AppError
  expect(refused.headers!['retry-after']).toBe(String(LOGIN_THROTTLE.windowSeconds))
  await clock.advance(LOGIN_THROTTLE.windowSeconds * 1000 - 1)
  expect(await admitted(once(), LOGIN_THROTTLE.windowSeconds)).toBe(0)
  await clock.advance(1)
  expect(await admitted(once(), LOGIN_THROTTLE.windowSeconds)).toBe(1)
})

test('throttledAddress: IPv6 to its /64 in one spelling, IPv4 and IPv4-mapped to the IPv4 address', () => {
  expect(throttledAddress('203.0.113.9')).toBe('203.0.113.9')
  expect(throttledAddress('::ffff:203.0.113.9')).toBe('203.0.113.9')
  expect(throttledAddress('::FFFF:203.0.113.9')).toBe('203.0.113.9')
  expect(throttledAddress('2001:db8:a:b:1:2:3:4')).toBe('2001:db8:a:b::/64')
  expect(throttledAddress('2001:0db8:000a:000b::4')).toBe('2001:db8:a:b::/64')
  expect(throttledAddress('2001:db8::1')).toBe('2001:db8:0:0::/64')
  expect(throttledAddress('::1')).toBe('0:0:0:0::/64')
  expect(throttledAddress('fe80::1%eth0')).toBe('fe80:0:0:0::/64')
  expect(throttledAddress('unknown')).toBe('unknown')
})
