import { afterAll, describe, expect, test } from 'bun:test'
import Redis from 'ioredis'
import { redisOptions } from '../../src/deps'
import { PROBE_INTERVAL_MS } from '../../src/modules/auth/quota/failover-store'
import { utcDate } from '../../src/shared/clock'
import { accountWithKey, testRedis, testRedisPrefix } from '../helpers/auth'
import { fakeClock } from '../helpers/clock'
import { freshDatabase, testLogger } from '../helpers/db'
import { TEST_DATABASE_URL, TEST_NOW, TEST_REDIS_URL } from '../helpers/env'
import { eventually } from '../helpers/eventually'
import { withProbes } from '../helpers/probes'
import { startServer } from '../helpers/server'
import { startTcpProxy } from '../helpers/tcp-proxy'

// A charge Redis ran whose reply reached the node too late (its event loop stalled, or the network
// held the reply): the node's Redis client gives up after its command timeout and the node counts
// the request locally. Real HTTP, real PostgreSQL, real Redis behind a TCP proxy that holds the
// server's replies; docs/adr/0125-a-quota-write-whose-answer-was-lost-is-learnt-not-guessed.md.
const runnable = Boolean(TEST_DATABASE_URL && TEST_REDIS_URL)

describe.skipIf(!runnable)('a quota charge whose reply was lost', async () => {
  const database = runnable ? await freshDatabase('empty') : undefined

  test('is charged once: the units in Redis are exactly the requests answered 200', async () => {
    const target = new URL(TEST_REDIS_URL!)
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 6379) })
    const prefix = testRedisPrefix()
    const admin = (await testRedis(prefix))! // straight to Redis, never through the proxy
    const client = new Redis(proxy.via(TEST_REDIS_URL!), redisOptions(prefix))
    client.on('error', () => {})
    await client.connect()
    afterAll(async () => {
      client.disconnect()
      await proxy.close()
    })
    // The failover store's probe runs on this clock: Redis is asked again only when the test says.
    const clock = fakeClock()
    const server = startServer({ db: database!.db, redis: client, logger: testLogger, clock }, withProbes)
    const { accountId, keyId, key } = await accountWithKey(database!.db, 'free')
    const hash = `quota:${utcDate(TEST_NOW)}:${accountId}`
    const request = () => server.get('/probe/catalog', { headers: { 'x-api-key': key } })
    const statuses: number[] = []

    // Fewer than a lease takes: every charge is its own script call in Redis.
    for (let i = 0; i < 5; i++) statuses.push((await request()).status)
    expect(await admin.hgetall(hash)).toMatchObject({ used: '5', [`k:${keyId}`]: '5' })

    proxy.holdReplies()
    const late = request()
    // Redis ran the charge; its reply waits in the proxy until the client's command timeout fires.
    await eventually(async () => (await admin.hget(hash, 'used')) === '6', { what: 'the charge run in Redis' })
    statuses.push((await late).status)
    proxy.releaseReplies()
    expect((await server.json('/ready')).body.checks).toMatchObject({ quota: 'degraded' })
    // Counted locally meanwhile, from the last count Redis gave.
    for (let i = 0; i < 2; i++) statuses.push((await request()).status)

    await clock.advance(PROBE_INTERVAL_MS)
    await eventually(async () => (await server.json('/ready')).body.checks?.quota === 'shared', { what: 'the quota shared again' })
    expect(statuses).toEqual(Array(8).fill(200))
    expect(await admin.hgetall(hash)).toMatchObject({ used: '8', [`k:${keyId}`]: '8' })
    expect((await server.json('/v1/usage', key)).body.data.account).toMatchObject({ today_requests: 8, daily_remaining: 92 })
    // Redis decides again, from the exact count.
    expect((await request()).status).toBe(200)
    expect(await admin.hget(hash, 'used')).toBe('9')
  }, 60_000)
})
