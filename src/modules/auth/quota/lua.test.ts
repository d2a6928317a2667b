import { describe, expect, test } from 'bun:test'
import { testRedis } from '../../../../test/helpers/auth'
import { chargingCommands } from './commands'
import { dayKey } from './day'
import { FIELD, keyField, LAPSED_LEASE, LEASE_FIELD_PREFIX, parseCounters } from './fields'
import { ADMITTED, MISSING, REFUSED, UNSEEDED, WAIT } from './status'

// The scripts are built from the constants the stores read their answers with: these check that
// Redis answers in exactly those statuses and writes the fields TypeScript reads.
const redis = await testRedis()
const TTL = 3_600

describe.skipIf(!redis)('quota scripts speak the TypeScript constants', () => {
  const client = chargingCommands(redis!)
  const charge = (key: string, cost: number, limit: number, keyId = 1) => client.tcgChargeQuotaBatch(1, key, cost, limit, keyField(keyId))

  test('charges: MISSING, ADMITTED, REFUSED, WAIT on a live lease, a lapsed lease marked LAPSED_LEASE, + UNSEEDED on a provisional hash', async () => {
    const key = dayKey(1, '2026-11-20')
    expect(await charge(key, 1, 2)).toEqual([MISSING, 0])
    await client.tcgSeedQuotaDay(1, key, 0, 0, 0, TTL, 1)
    expect(await charge(key, 1, 2, 7)).toEqual([ADMITTED, 1])
    expect(await charge(key, 2, 2)).toEqual([REFUSED, 1])
    expect(parseCounters(await redis!.hgetall(key))).toEqual({ used: 1, rejected: 1, liveRefreshes: 0, byKey: new Map([[7, 1]]) })

    const [seconds] = await redis!.time()
    await redis!.hset(key, `${LEASE_FIELD_PREFIX}live`, Number(seconds) * 1000 + 60_000)
    const [status, wait] = (await charge(key, 2, 2)) as [number, number]
    expect(status).toBe(WAIT)
    expect(wait).toBeGreaterThan(0)
    await redis!.hset(key, `${LEASE_FIELD_PREFIX}live`, 1)
    expect(await charge(key, 2, 2)).toEqual([REFUSED, 1])
    expect(await redis!.hget(key, `${LEASE_FIELD_PREFIX}live`)).toBe(String(LAPSED_LEASE))

    const provisional = dayKey(2, '2026-11-20')
    await client.tcgSeedQuotaDay(1, provisional, 5, 0, 0, TTL, 0)
    expect(await redis!.hget(provisional, FIELD.unseeded)).not.toBeNull()
    expect(await charge(provisional, 1, 6)).toEqual([ADMITTED + UNSEEDED, 6])
    expect(await charge(provisional, 1, 6)).toEqual([REFUSED + UNSEEDED, 6])
  })

  test('live refresh claims: MISSING, then ADMITTED and REFUSED, + UNSEEDED on a provisional hash', async () => {
    const key = dayKey(3, '2026-11-20')
    expect(await client.tcgClaimLiveRefresh(1, key, 1)).toEqual([MISSING, 0])
    await client.tcgSeedQuotaDay(1, key, 0, 0, 0, TTL, 0)
    expect(await client.tcgClaimLiveRefresh(1, key, 1)).toEqual([ADMITTED + UNSEEDED, 1])
    expect(await client.tcgClaimLiveRefresh(1, key, 1)).toEqual([REFUSED + UNSEEDED, 1])
    await client.tcgSeedQuotaDay(1, key, 0, 0, 0, TTL, 1)
    expect(await client.tcgClaimLiveRefresh(1, key, 2)).toEqual([ADMITTED, 2])
    expect(await client.tcgClaimLiveRefresh(1, key, 2)).toEqual([REFUSED, 2])
    expect(parseCounters(await redis!.hgetall(key)).liveRefreshes).toBe(2)
  })
})
