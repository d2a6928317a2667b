import { describe, expect, spyOn, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { createAccount } from '../../src/modules/auth/accounts'
import { LOGIN_THROTTLE, SIGNUP_THROTTLE } from '../../src/modules/auth/login-throttle'
import { testRedis } from '../helpers/auth'
import { fetchFrom, freshAddress } from '../helpers/client-address'
import { freshDatabase, selectRows, testLogger } from '../helpers/db'
import { TEST_REDIS_URL } from '../helpers/env'
import { startServer } from '../helpers/server'

// Login and sign-up abuse over real HTTP and PostgreSQL, with the counts in Redis and in the
// process (no Redis configured). Every client is its own loopback source address, the address the
// server sees: no header decides it. Each argon2id check costs about 100 ms of CPU, so the limits
// are sized for a loaded 2-core machine: up to 100 checks in a test.
const { db } = await freshDatabase('empty')
const PASSWORD = 'the right password'
const WRONG = 'a wrong guess, again'
const { pair } = LOGIN_THROTTLE

let emails = 0
const newEmail = () => `abuse${++emails}-${process.pid}@example.com`

async function owner() {
  const email = newEmail()
  await createAccount(db, { email, password: PASSWORD })
  return email
}

/**
 * The password hashes verified and made while `run` ran. The server runs in this process, so this
 * counts the argon2id checks it really made: work counted, not timed (docs/testing.md).
 */
async function passwordWorkOf<T>(run: () => Promise<T>): Promise<{ result: T; verified: number; hashed: number }> {
  const verify = spyOn(Bun.password, 'verify')
  const hash = spyOn(Bun.password, 'hash')
  try {
    const result = await run()
    return { result, verified: verify.mock.calls.length, hashed: hash.mock.calls.length }
  } finally {
    verify.mockRestore()
    hash.mockRestore()
  }
}

async function expectRefusal(response: Response, windowSeconds: number) {
  expect(response.status).toBe(429)
  expect(((await response.json()) as any).error.code).toBe('TOO_MANY_ATTEMPTS')
  const retryAfter = Number(response.headers.get('retry-after'))
  expect(retryAfter).toBeGreaterThan(0)
  expect(retryAfter).toBeLessThanOrEqual(windowSeconds)
}

const modes = [
  { name: 'counts in Redis', redis: await testRedis(), skip: !TEST_REDIS_URL },
  { name: 'counts in the process (no Redis)', redis: undefined, skip: false },
]

for (const mode of modes) {
  describe.skipIf(mode.skip)(mode.name, () => {
    const server = startServer({ db, redis: mode.redis, logger: testLogger })
    const post = (from: string, path: string, body: unknown) =>
      fetchFrom(from, server.base + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
    const login = (from: string, email: string, password: string) => post(from, '/v1/auth/login', { email, password })
    const guesses = (from: string, email: string, count: number) => Promise.all(Array.from({ length: count }, () => login(from, email, WRONG)))

    test('25 wrong guesses at once: only the limit get a password check, the rest 429 with Retry-After', async () => {
      const email = await owner()
      // The first login of a process also makes the decoy hash: not one of the guesses' checks.
      expect((await login(freshAddress(), email, WRONG)).status).toBe(401)

      const { result: responses, verified, hashed } = await passwordWorkOf(() => guesses(freshAddress(), email, 25))
      const statuses = responses.map((r) => r.status)
      expect(statuses.filter((s) => s === 401)).toHaveLength(pair.refuseAt)
      for (const response of responses.filter((r) => r.status !== 401)) await expectRefusal(response, LOGIN_THROTTLE.windowSeconds)
      // Exactly `refuseAt` argon2id checks were made for the 25 guesses, and no other hashing.
      expect({ verified, hashed }).toEqual({ verified: pair.refuseAt, hashed: 0 })
    }, 120_000)

    test('the right password sent while 24 wrong guesses are in flight is refused like a 25th guess', async () => {
      const email = await owner()
      const from = freshAddress()
      const wrong = Array.from({ length: 24 }, () => login(from, email, WRONG))
      // Each guess is counted on arrival, before its password check: by the time the first check
      // has answered, all 24 are counted, and only the limit of them get checked at all.
      await Promise.race(wrong)
      await expectRefusal(await login(from, email, PASSWORD), LOGIN_THROTTLE.windowSeconds)
      expect((await Promise.all(wrong)).filter((r) => r.status === 401)).toHaveLength(pair.refuseAt)
    }, 120_000)

    test("a stranger's guesses lock the email out from the stranger's address only", async () => {
      const email = await owner()
      const stranger = freshAddress()
      expect((await guesses(stranger, email, pair.refuseAt)).map((r) => r.status)).toEqual(Array(pair.refuseAt).fill(401))
      await expectRefusal(await login(stranger, email, PASSWORD), LOGIN_THROTTLE.windowSeconds)
      expect((await login(freshAddress(), email, PASSWORD)).status).toBe(200)
      // The owner's success elsewhere forgives nothing at the stranger's address.
      await expectRefusal(await login(stranger, email, PASSWORD), LOGIN_THROTTLE.windowSeconds)
    }, 120_000)

    test("a success forgives the owner's own failures from that address", async () => {
      const email = await owner()
      const home = freshAddress()
      expect((await guesses(home, email, pair.refuseAt - 1)).every((r) => r.status === 401)).toBe(true)
      expect((await login(home, email, PASSWORD)).status).toBe(200)
      // Counted, the success would have been the limit's last attempt.
      expect((await login(home, email, WRONG)).status).toBe(401)
    }, 120_000)

    test('guesses spread over many addresses still stop at the email-wide ceiling', async () => {
      const email = await owner()
      const addresses = Array.from({ length: Math.ceil(LOGIN_THROTTLE.email.refuseAt / pair.refuseAt) }, freshAddress)
      // One address's guesses at a time: the ceiling is what is tested, and 100 password checks at once
      // on a loaded 2-core machine kept some connections silent past the server's timeout.
      const spread: Response[] = []
      for (const from of addresses) spread.push(...(await guesses(from, email, pair.refuseAt)))
      expect(spread.filter((r) => r.status === 401)).toHaveLength(LOGIN_THROTTLE.email.refuseAt)
      await expectRefusal(await login(freshAddress(), email, PASSWORD), LOGIN_THROTTLE.windowSeconds)
    }, 300_000)

    test('sign-ups are limited per address, whatever their outcome, so 409 cannot be probed at speed', async () => {
      const taken = await owner()
      const from = freshAddress()
      const signup = (email: string, address = from) => post(address, '/v1/auth/signup', { email, password: PASSWORD })
      const statuses: number[] = []
      for (let i = 0; i < SIGNUP_THROTTLE.refuseAt; i++) statuses.push((await signup(i % 2 ? taken : newEmail())).status)
      expect(statuses).toEqual(Array.from({ length: SIGNUP_THROTTLE.refuseAt }, (_, i) => (i % 2 ? 409 : 201)))
      await expectRefusal(await signup(taken), SIGNUP_THROTTLE.windowSeconds)
      const refused = newEmail()
      await expectRefusal(await signup(refused), SIGNUP_THROTTLE.windowSeconds)
      expect(await selectRows(db, sql`select id from accounts where email = ${refused}`)).toEqual([])
      expect((await signup(refused, freshAddress())).status).toBe(201)
    }, 60_000)

    test('sign-ups at once from one address: exactly the limit get through', async () => {
      const from = freshAddress()
      const responses = await Promise.all(Array.from({ length: 3 * SIGNUP_THROTTLE.refuseAt }, () => post(from, '/v1/auth/signup', { email: newEmail(), password: PASSWORD })))
      expect(responses.filter((r) => r.status === 201)).toHaveLength(SIGNUP_THROTTLE.refuseAt)
      for (const response of responses.filter((r) => r.status !== 201)) await expectRefusal(response, SIGNUP_THROTTLE.windowSeconds)
    }, 60_000)
  })
}
