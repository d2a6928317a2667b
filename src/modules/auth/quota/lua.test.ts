import { describe, expect, test } from 'bun:test'
import { testRedis } from '../../../../test/helpers/auth'
import { chargingCommands, leasingCommands } from './commands'
import { dayKey } from './day'
import { FIELD, keyField, LAPSED_LEASE, LEASE_FIELD_PREFIX, parseCounters } from './fields'
import { FENCED, OP_KEY_PREFIX } from './outcomes'
import { ADMITTED, MISSING, REFUSED, UNSEEDED, WAIT } from './status'

// The scripts are built from the constants the stores read their answers with: these check that
// Redis answers in exactly those statuses and writes the fields TypeScript reads.
const redis = await testRedis()
const TTL = 3_600

describe.skipIf(!redis)('quota scripts speak the TypeScript constants', () => {
  const client = chargingCommands(redis!)
  let markers = 0
  const marker = () => `${OP_KEY_PREFIX}test:${++markers}`
  const charge = (key: string, cost: number, limit: number, keyId = 1) => client.tcgChargeQuotaBatch(2, marker(), key, 0, TTL, cost, limit, keyField(keyId))
  const claim = (key: string, limit: number) => client.tcgClaimLiveRefresh(2, marker(), key, TTL, limit)

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
    expect(await claim(key, 1)).toEqual([MISSING, 0])
    await client.tcgSeedQuotaDay(1, key, 0, 0, 0, TTL, 0)
    expect(await claim(key, 1)).toEqual([ADMITTED + UNSEEDED, 1])
    expect(await claim(key, 1)).toEqual([REFUSED + UNSEEDED, 1])
    await client.tcgSeedQuotaDay(1, key, 0, 0, 0, TTL, 1)
    expect(await claim(key, 2)).toEqual([ADMITTED, 2])
    expect(await claim(key, 2)).toEqual([REFUSED, 2])
    expect(parseCounters(await redis!.hgetall(key)).liveRefreshes).toBe(2)
  })

  test('a write records what it counted in its marker; once a marker exists the write does nothing; resolving fences off one that never ran', async () => {
    const key = dayKey(4, '2026-11-20')
    await client.tcgSeedQuotaDay(1, key, 0, 0, 0, TTL, 1)
    const [first, second, old] = [marker(), marker(), marker()]
    await redis!.set(old, '1')
    // One call, two charges of which the second is refused, deleting an old marker on the way.
    expect(await client.tcgChargeQuotaBatch(4, first, old, key, key, 1, TTL, 2, 2, keyField(1), 1, 2, keyField(1))).toEqual([ADMITTED, 2, REFUSED, 2])
    expect(await redis!.get(first)).toBe(`${ADMITTED}${REFUSED}`)
    expect(await redis!.exists(old)).toBe(0)
    expect(await redis!.ttl(first)).toBeGreaterThan(TTL - 60)
    // The same call again (a copy sent after a reconnect): nothing counted twice.
    expect(await client.tcgChargeQuotaBatch(2, first, key, 0, TTL, 2, 2, keyField(1))).toEqual([])
    expect(await client.tcgResolveQuotaWrite(1, first, TTL)).toBe(`${ADMITTED}${REFUSED}`)
    // A call resolved before it ran is fenced off: when it arrives, it does nothing.
    expect(await client.tcgResolveQuotaWrite(1, second, TTL)).toBe(FENCED)
    expect(await client.tcgResolveQuotaWrite(1, second, TTL)).toBe(FENCED)
    expect(await client.tcgChargeQuotaBatch(2, second, key, 0, TTL, 0, 100, keyField(1))).toEqual([])
    expect(await redis!.hgetall(key)).toEqual({ used: '2', rejected: '1', 'k:1': '2' })

    // Refunds, claims and grants alike.
    const refund = marker()
    expect(await client.tcgRefundCharge(2, refund, key, TTL, 2, keyField(1))).toBe(1)
    expect(await client.tcgRefundCharge(2, refund, key, TTL, 2, keyField(1))).toBe(0)
    expect(await client.tcgResolveQuotaWrite(1, refund, TTL)).toBe('1')
    const missing = marker()
    expect(await client.tcgRefundCharge(2, missing, dayKey(5, '2026-11-20'), TTL, 2, keyField(1))).toBe(0)
    expect(await client.tcgResolveQuotaWrite(1, missing, TTL)).toBe('0')
    const claimed = marker()
    expect(await client.tcgClaimLiveRefresh(2, claimed, key, TTL, 1)).toEqual([ADMITTED, 1])
    expect(await client.tcgClaimLiveRefresh(2, claimed, key, TTL, 1)).toEqual([MISSING, 0])
    expect(await client.tcgResolveQuotaWrite(1, claimed, TTL)).toBe(String(ADMITTED))
    const refundLive = marker()
    expect(await client.tcgRefundLiveRefresh(2, refundLive, key, TTL)).toBe(1)
    expect(await client.tcgRefundLiveRefresh(2, refundLive, key, TTL)).toBe(0)
    expect(await redis!.hgetall(key)).toEqual({ used: '0', rejected: '2', 'k:1': '0', live: '0' })

    const leasing = leasingCommands(redis!)
    const granted = marker()
    expect(await leasing.tcgGrantQuotaLease(2, granted, key, TTL, 16, 1_000, 'n:1')).toEqual([16, 16])
    expect(await leasing.tcgGrantQuotaLease(2, granted, key, TTL, 16, 1_000, 'n:1')).toEqual([0, 0])
    expect(await client.tcgResolveQuotaWrite(1, granted, TTL)).toBe('16')
    // A lease its node never knew of goes back whole, even lapsed.
    await redis!.hset(key, `${LEASE_FIELD_PREFIX}n:1`, LAPSED_LEASE)
    expect(await leasing.tcgSettleQuotaLease(1, key, 'n:1', 16, TTL, 1)).toBe(1)
    expect(await leasing.tcgSettleQuotaLease(1, key, 'n:1', 16, TTL, 1)).toBe(0)
    expect(parseCounters(await redis!.hgetall(key)).used).toBe(0)
  })
})
