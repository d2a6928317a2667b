import type Redis from 'ioredis'
import { ADD_BATCH_LUA, CHARGE_BATCH_LUA, CLAIM_LIVE_LUA, GRANT_LUA, REFUND_CHARGE_LUA, REFUND_LIVE_LUA, RESOLVE_WRITE_LUA, SEED_LUA, SETTLE_LUA } from './lua'

/**
 * The quota scripts as commands of an ioredis client, defined once per client. `marker` and `ttl`:
 * the write's marker key and how long it lives (outcomes.ts).
 */

export type ChargingRedis = Redis & {
  tcgRefundCharge(numberOfKeys: 2, marker: string, key: string, ttl: number, cost: number, keyField: string): Promise<number>
  tcgClaimLiveRefresh(numberOfKeys: 2, marker: string, key: string, ttl: number, limit: number): Promise<[number, number]>
  tcgRefundLiveRefresh(numberOfKeys: 2, marker: string, key: string, ttl: number): Promise<number>
  tcgResolveQuotaWrite(numberOfKeys: 1, marker: string, ttl: number): Promise<string>
  tcgChargeQuotaBatch(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<number[]>
  tcgAddQuotaBatch(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<number>
  tcgSeedQuotaDay(numberOfKeys: 1, key: string, used: number, rejected: number, live: number, ttl: number, complete: 0 | 1): Promise<number>
}

export type LeasingRedis = Redis & {
  tcgGrantQuotaLease(numberOfKeys: 2, marker: string, key: string, ttl: number, units: number, limit: number, leaseId: string): Promise<[number, number]>
  tcgSettleQuotaLease(numberOfKeys: 1, key: string, leaseId: string, unused: number, ttl: number, unknown: 0 | 1, ...keyUnits: (string | number)[]): Promise<number>
}

export function chargingCommands(redis: Redis): ChargingRedis {
  const client = redis as ChargingRedis
  if (typeof client.tcgChargeQuotaBatch !== 'function') {
    client.defineCommand('tcgChargeQuotaBatch', { lua: CHARGE_BATCH_LUA })
    client.defineCommand('tcgAddQuotaBatch', { lua: ADD_BATCH_LUA })
    client.defineCommand('tcgSeedQuotaDay', { lua: SEED_LUA })
    client.defineCommand('tcgClaimLiveRefresh', { lua: CLAIM_LIVE_LUA })
    client.defineCommand('tcgRefundLiveRefresh', { lua: REFUND_LIVE_LUA })
    client.defineCommand('tcgRefundCharge', { lua: REFUND_CHARGE_LUA })
    client.defineCommand('tcgResolveQuotaWrite', { lua: RESOLVE_WRITE_LUA })
  }
  return client
}

export function leasingCommands(redis: Redis): LeasingRedis {
  const client = redis as LeasingRedis
  if (typeof client.tcgGrantQuotaLease !== 'function') {
    client.defineCommand('tcgGrantQuotaLease', { lua: GRANT_LUA })
    client.defineCommand('tcgSettleQuotaLease', { lua: SETTLE_LUA })
  }
  return client
}
