import { afterAll } from 'bun:test'
import Redis from 'ioredis'
import type { Database } from '../../src/db/client'
import { redisOptions } from '../../src/deps'
import { createAccount, startSession } from '../../src/modules/auth/accounts'
import { createKey } from '../../src/modules/auth/keys'
import type { Tier } from '../../src/modules/auth/tiers'
import { TEST_NOW, TEST_REDIS_URL } from './env'

let prefixes = 0

/** A private key namespace on the test Redis for one test file, for `REDIS_KEY_PREFIX`; wiped after the file. */
export function testRedisPrefix(): string {
  return `tcg:test:${process.pid}:${++prefixes}:`
}

/**
 * A connection to the test Redis in a fresh key namespace (so runs and files never see each other's
 * counters), or undefined when TEST_REDIS_URL is unset. Its keys are deleted after the file.
 */
export async function testRedis(prefix = testRedisPrefix()): Promise<Redis | undefined> {
  if (!TEST_REDIS_URL) return undefined
  const redis = new Redis(TEST_REDIS_URL, redisOptions(prefix))
  redis.on('error', () => {})
  await redis.connect()
  afterAll(async () => {
    const admin = new Redis(TEST_REDIS_URL!)
    const keys = await admin.keys(`${prefix}*`)
    if (keys.length > 0) await admin.del(...keys)
    admin.disconnect()
    redis.disconnect()
  }, 30_000)
  return redis
}

export { manualClock } from './clock'

let accounts = 0

export interface TestAccount {
  accountId: number
  email: string
  password: string
  /** The raw API key. */
  key: string
  /** The key row's own id, which quotas and usage count by; answers never show it. */
  keyId: number
  /** The key's id as the API shows it and revokes it by: `key_` and 32 hex digits. */
  publicKeyId: string
  /** A live session's cookie header value: `session=…`. */
  cookie: string
}

/** An account on `tier` with one key and one session, made through the services (not under test here). */
export async function accountWithKey(db: Database, tier: Tier = 'free', now: Date = TEST_NOW): Promise<TestAccount> {
  const email = `user${++accounts}-${process.pid}@example.com`
  const password = 'correct horse battery'
  const account = await createAccount(db, { email, password, tier })
  const key = await createKey(db, account, 'test key')
  const session = await startSession(db, account.id, now)
  return { accountId: account.id, email, password, key: key.key, keyId: key.id, publicKeyId: key.publicId, cookie: `session=${session.token}` }
}
