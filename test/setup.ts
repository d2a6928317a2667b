import { afterAll } from 'bun:test'
import { dropTemplates } from './helpers/db'
import { TEST_DATABASE_URL, TEST_REDIS_URL } from './helpers/env'

// Fail loudly, before any test, when a configured service is unreachable: a CI run against a
// missing PostgreSQL or Redis must be red, never quietly skipped.
if (TEST_DATABASE_URL) {
  const { default: postgres } = await import('postgres')
  const client = postgres(TEST_DATABASE_URL, { max: 1, connect_timeout: 5, onnotice: () => {} })
  try {
    await client`select 1`
  } catch (error) {
    throw new Error(`TEST_DATABASE_URL is set but PostgreSQL is unreachable (${TEST_DATABASE_URL}): ${error}`)
  } finally {
    await client.end({ timeout: 1 })
  }
}
if (TEST_REDIS_URL) {
  const { default: Redis } = await import('ioredis')
  const redis = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  try {
    await redis.connect()
    await redis.ping()
  } catch (error) {
    throw new Error(`TEST_REDIS_URL is set but Redis is unreachable (${TEST_REDIS_URL}): ${error}`)
  } finally {
    redis.disconnect()
  }
}
console.error(
  `[tests] database: ${TEST_DATABASE_URL ? `PostgreSQL (${TEST_DATABASE_URL})` : 'embedded PGlite (set TEST_DATABASE_URL for PostgreSQL)'}; ` +
    `redis: ${TEST_REDIS_URL ? TEST_REDIS_URL : 'NOT CONFIGURED: Redis-backed tests will be reported as skipped (set TEST_REDIS_URL)'}`,
)

// A preload's afterAll runs once, after the last file (process exit hooks do not fire under bun test).
afterAll(dropTemplates)
