import { randomBytes } from 'node:crypto'
import type Redis from 'ioredis'
import type { Clock, Timer } from '../../shared/clock'
import type { Logger } from '../../shared/logger'

/**
 * Quota leases: a node that charges one account many times a second takes a block of that
 * account's quota from Redis in one call and admits from it locally, with no Redis round trip per
 * request; what it did not use goes back when the lease ends. Why: waiting for Redis sends the
 * answer on a later event-loop turn, uncorked, which cost a busy route about half its throughput
 * (a keyed fixed-body route served 0.49 of the open route's req/s with a Redis call per request and
 * 0.80 with leases, 2-core VM, 50 connections; docs/decisions.md, "Quota leases").
 *
 * Exactness (docs/decisions.md "Quota accounting": N concurrent requests against a quota of Q admit exactly min(N, Q),
 * across nodes) holds because:
 * - a lease's units are added to `used` in Redis when it is granted, so they are never admitted twice;
 * - a lease is granted only while at most a quarter of what is left goes to it: near the limit
 *   every charge goes to Redis one by one, as without leases;
 * - a charge that would be refused while another lease of the account is still live waits for it
 *   to end and hand back its unused units (the charge script answers "wait"), then is judged;
 * - a node stops admitting from a lease before its deadline in Redis, and a lease whose node never
 *   settled it (a crash) counts as wholly used once its deadline passes: refusals never wait on it
 *   again, and no unit is admitted twice. A crash costs the account at most that lease's unused units.
 *
 * What other nodes see: until a lease is settled (within LEASE_LIFETIME_MS) its unused units count
 * as used for everyone but the node that holds it.
 */

/** How long a lease lives in Redis: its deadline, by Redis's clock, from when it is granted. */
export const LEASE_LIFETIME_MS = 1_000
/** A node stops admitting from a lease this much before the deadline: its clock started earlier, and it needs time to settle. */
export const LOCAL_MARGIN_MS = 200
/**
 * An account with this many admitted charges on this node within HOT_WINDOW_MS is charged often
 * enough to lease: from there a lease (two Redis calls, a grant and a hand-back) replaces at least
 * as many charges, each a share of a script call and a wait for Redis.
 */
export const HOT_CHARGES_PER_WINDOW = 16
export const HOT_WINDOW_MS = 1_000
/** Bounds of a lease's size; the first asks for FIRST_LEASE_UNITS, later ones follow what the last one used. */
const MIN_LEASE_UNITS = 16
const FIRST_LEASE_UNITS = 256
const MAX_LEASE_UNITS = 8_192

/** Whether Redis would grant a lease with this much used: it grants a quarter of what is left, at least MIN_LEASE_UNITS. */
export const leaseWorthAsking = (used: number, limit: number) => limit - used >= 4 * MIN_LEASE_UNITS

/** The hash field of a lease: its deadline (ms, Redis clock), or -1 once lapsed unsettled (wholly used). */
export const LEASE_FIELD_PREFIX = 'L:'

/**
 * Part of the charge script: when a charge would be refused, the wait (ms) until the nearest live
 * lease of the account ends, or false when none is live. Lapsed leases are marked wholly used.
 */
export const LEASE_WAIT_LUA = `
local function lease_wait(key)
  local fields = redis.call('HGETALL', key)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local wait = false
  for j = 1, #fields, 2 do
    if string.sub(fields[j], 1, 2) == '${LEASE_FIELD_PREFIX}' then
      local deadline = tonumber(fields[j + 1])
      if deadline >= 0 then
        if deadline <= now then
          redis.call('HSET', key, fields[j], -1)
        elseif not wait or deadline - now < wait then
          wait = deadline - now
        end
      end
    end
  end
  return wait
end
`

// KEYS[1] the day hash; ARGV: units wanted, limit, TTL, lease id. Grants at most a quarter of
// what is left, and nothing under MIN_LEASE_UNITS; answers { units granted, used after }. Nothing
// on a hash not seeded (quota.ts): a missing one (Redis lost it since the charge) would start from
// zero, and a provisional one may still be raised to what the database says.
const GRANT_LUA = `
local state = redis.call('HMGET', KEYS[1], 'used', 'unseeded')
if not state[1] or state[2] then return { 0, 0 } end
local used = tonumber(state[1])
local units = math.min(tonumber(ARGV[1]), math.floor((tonumber(ARGV[2]) - used) / 4))
if units < ${MIN_LEASE_UNITS} then return { 0, used } end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
used = redis.call('HINCRBY', KEYS[1], 'used', units)
redis.call('HSET', KEYS[1], '${LEASE_FIELD_PREFIX}' .. ARGV[4], now + ${LEASE_LIFETIME_MS})
redis.call('EXPIRE', KEYS[1], ARGV[3])
return { units, used }
`

// KEYS[1] the day hash; ARGV: lease id, unused units, TTL, then (key field, units) pairs. Applies
// once: the lease field goes with it. A lapsed lease's units stay used (refusals already counted
// them so); its per-key counts are still added.
const SETTLE_LUA = `
local field = '${LEASE_FIELD_PREFIX}' .. ARGV[1]
local deadline = redis.call('HGET', KEYS[1], field)
if not deadline then return 0 end
redis.call('HDEL', KEYS[1], field)
if tonumber(deadline) >= 0 and ARGV[2] ~= '0' then redis.call('HINCRBY', KEYS[1], 'used', '-' .. ARGV[2]) end
for j = 4, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], ARGV[j], ARGV[j + 1]) end
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
`

type LeasingRedis = Redis & {
  tcgGrantQuotaLease(numberOfKeys: 1, key: string, units: number, limit: number, ttl: number, leaseId: string): Promise<[number, number]>
  tcgSettleQuotaLease(numberOfKeys: 1, key: string, leaseId: string, unused: number, ttl: number, ...keyUnits: (string | number)[]): Promise<number>
}

interface Lease {
  id: string
  size: number
  unused: number
  /** The account's `used` in Redis right after the grant, the whole lease included. */
  usedAfterGrant: number
  /** Units admitted from the lease per key field. */
  byKeyField: Map<string, number>
  /** The clock's monotonic time after which the node no longer admits from it. */
  localEnd: number
  ttl: number
  timer?: Timer
}

/** The leases this node holds, by day hash key. */
export function quotaLeases(redis: Redis, clock: Clock, logger?: Logger) {
  const client = redis as LeasingRedis
  if (typeof client.tcgGrantQuotaLease !== 'function') {
    client.defineCommand('tcgGrantQuotaLease', { lua: GRANT_LUA })
    client.defineCommand('tcgSettleQuotaLease', { lua: SETTLE_LUA })
  }
  const node = randomBytes(6).toString('base64url')
  let leaseCount = 0
  const held = new Map<string, Lease>()
  /** The size to ask for next per day hash: grows while leases run out, shrinks while they come back half unused. */
  const nextSize = new Map<string, number>()
  const settling = new Set<Promise<unknown>>()

  function settle(key: string, lease: Lease) {
    lease.timer?.cancel()
    held.delete(key)
    const used = lease.size - lease.unused
    nextSize.set(key, Math.min(MAX_LEASE_UNITS, Math.max(MIN_LEASE_UNITS, lease.unused === 0 ? lease.size * 2 : used * 2)))
    const keyUnits = [...lease.byKeyField].flat()
    // Sent at once, before any charge queued after it: Redis sees the units back before those charges.
    // If it fails (Redis away), the unused units stay counted as used: never more than the quota.
    const sent = client
      .tcgSettleQuotaLease(1, key, lease.id, lease.unused, lease.ttl, ...keyUnits)
      .catch((error) => logger?.warn({ err: error }, 'quota lease hand-back failed: its unused units stay counted as used'))
      .finally(() => settling.delete(sent))
    settling.add(sent)
  }

  return {
    /**
     * Admits the charge from this node's lease on the account's day when one is live and holds
     * enough: the account's `used` as this node knows it, or undefined to go to Redis.
     */
    take(key: string, keyField: string, cost: number, limit: number): number | undefined {
      const lease = held.get(key)
      if (lease === undefined) return undefined
      const used = lease.usedAfterGrant - lease.unused + cost
      if (clock.monotonic() >= lease.localEnd || lease.unused < cost || used > limit) {
        // Handed back first, so the charge Redis judges instead never counts this lease's unused units.
        settle(key, lease)
        return undefined
      }
      lease.unused -= cost
      lease.byKeyField.set(keyField, (lease.byKeyField.get(keyField) ?? 0) + cost)
      if (lease.unused === 0) settle(key, lease)
      return used
    },

    /**
     * Asks Redis for a lease on a day hash this node charges often; settles when the answer is in,
     * granted or not. The caller holds the account's charges until then: one that reached Redis
     * after the grant would be told a `used` that counts this lease's unused units.
     */
    async request(key: string, limit: number, ttl: number): Promise<void> {
      if (nextSize.size > 10_000) nextSize.clear() // sizes are hints; a long-running node forgets old days'
      const id = `${node}:${++leaseCount}`
      const localEnd = clock.monotonic() + LEASE_LIFETIME_MS - LOCAL_MARGIN_MS
      try {
        const [units, usedAfterGrant] = await client.tcgGrantQuotaLease(1, key, nextSize.get(key) ?? FIRST_LEASE_UNITS, limit, ttl, id)
        if (units === 0) return
        const lease: Lease = { id, size: units, unused: units, usedAfterGrant, byKeyField: new Map(), localEnd, ttl }
        lease.timer = clock.after(Math.max(0, localEnd - clock.monotonic()), () => held.get(key) === lease && settle(key, lease), { unref: true })
        held.set(key, lease)
      } catch {
        // No lease: charges keep going to Redis, which reports its own failures.
      }
    },

    /** This node's live lease on a day hash, if any: what it changes in counters read from Redis. */
    heldOn(key: string): { unused: number; byKeyField: Map<string, number> } | undefined {
      return held.get(key)
    },

    /** Hands back every lease held (on shutdown) and waits for Redis to take them. */
    async settleAll() {
      for (const [key, lease] of held) settle(key, lease)
      await Promise.all(settling)
    },
  }
}
