import type Redis from 'ioredis'
import type { Clock, Timer } from '../../../shared/clock'
import type { Logger } from '../../../shared/logger'
import { leasingCommands } from './commands'
import { FIRST_LEASE_UNITS, LEASE_LIFETIME_MS, LOCAL_MARGIN_MS, MAX_LEASE_UNITS, MIN_LEASE_UNITS } from './lease-policy'
import { maySend, type WriteMarkers } from './outcomes'

/**
 * Quota leases: a node that charges one account many times a second takes a block of that
 * account's quota from Redis in one call and admits from it locally, with no Redis round trip per
 * request; what it did not use goes back when the lease ends. Why: waiting for Redis sends the
 * answer on a later event-loop turn, uncorked, which cost a busy route about half its throughput
 * (docs/adr/0024-quota-leases.md).
 *
 * Exactness (docs/adr/0036-quota-accounting.md: N concurrent requests against a quota of Q admit exactly min(N, Q),
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
 * as used for everyone but the node that holds it. When a node leases and how much: lease-policy.ts.
 */

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

/** A hand-back whose answer did not come: sent again (it applies once) until Redis answers. */
type HandBack = () => Promise<unknown>

/** The leases this node holds, by day hash key. `node` names this node's leases (and markers). */
export function quotaLeases(redis: Redis, clock: Clock, markers: WriteMarkers, node: string, logger?: Logger) {
  const client = leasingCommands(redis)
  let leaseCount = 0
  const held = new Map<string, Lease>()
  /** The size to ask for next per day hash: grows while leases run out, shrinks while they come back half unused. */
  const nextSize = new Map<string, number>()
  const settling = new Set<Promise<unknown>>()
  /** Grants whose answer was lost, until what they took is known and handed back. */
  const unknownGrants = new Set<HandBack>()

  /** Sends a hand-back now; `onFailure` says what a failure leaves. */
  function handBack(send: HandBack, onFailure: (error: unknown) => void) {
    const sent = send()
      .catch(onFailure)
      .finally(() => settling.delete(sent))
    settling.add(sent)
    return sent
  }

  function settle(key: string, lease: Lease) {
    lease.timer?.cancel()
    held.delete(key)
    const used = lease.size - lease.unused
    nextSize.set(key, Math.min(MAX_LEASE_UNITS, Math.max(MIN_LEASE_UNITS, lease.unused === 0 ? lease.size * 2 : used * 2)))
    const keyUnits = [...lease.byKeyField].flat()
    // Sent at once, before any charge queued after it: Redis sees the units back before those charges.
    // If it fails (Redis away), the unused units stay counted as used: never more than the quota.
    handBack(
      () => client.tcgSettleQuotaLease(1, key, lease.id, lease.unused, lease.ttl, 0, ...keyUnits),
      (error) => logger?.warn({ err: error }, 'quota lease hand-back failed: its unused units stay counted as used'),
    )
  }

  /** Learns what a grant whose answer was lost took (or fences it off) and hands that back; kept while Redis does not answer. */
  function sendUnknownGrant(returnAll: HandBack) {
    unknownGrants.delete(returnAll)
    return handBack(returnAll, () => unknownGrants.add(returnAll))
  }

  /** Sends again what unknown grants are still to hand back; rejects while any is left. */
  async function finish() {
    await Promise.all([...unknownGrants].map(sendUnknownGrant))
    if (unknownGrants.size > 0) throw new Error('quota lease grants whose answer was lost are not handed back yet')
  }

  /**
   * A grant whose answer was lost may have run (docs/adr/0125-a-quota-write-whose-answer-was-lost-is-learnt-not-guessed.md):
   * its marker says how many units it took, and those go back whole, lapsed or not, as the node never admitted from them.
   */
  function unknownGrant(key: string, id: string, marker: string, ttl: number) {
    sendUnknownGrant(async () => {
      const units = Number((await markers.learn(marker, ttl)) ?? 0)
      if (units > 0) await client.tcgSettleQuotaLease(1, key, id, units, ttl, 1)
    })
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
      if (unknownGrants.size > 0) finish().catch(() => {}) // Redis answers again: what a lost grant took goes back first
      const id = `${node}:${++leaseCount}`
      const marker = markers.next()
      const localEnd = clock.monotonic() + LEASE_LIFETIME_MS - LOCAL_MARGIN_MS
      const sent = maySend(client)
      try {
        const [units, usedAfterGrant] = await client.tcgGrantQuotaLease(2, marker, key, ttl, nextSize.get(key) ?? FIRST_LEASE_UNITS, limit, id)
        markers.answered(marker)
        if (units === 0) return
        const lease: Lease = { id, size: units, unused: units, usedAfterGrant, byKeyField: new Map(), localEnd, ttl }
        lease.timer = clock.after(Math.max(0, localEnd - clock.monotonic()), () => held.get(key) === lease && settle(key, lease), { unref: true })
        held.set(key, lease)
      } catch {
        // No lease: charges keep going to Redis, which reports its own failures.
        if (sent) unknownGrant(key, id, marker, ttl)
      }
    },

    /** Hands back what grants whose answer was lost took; rejects while Redis does not answer. */
    finish,

    /** This node's live lease on a day hash, if any: what it changes in counters read from Redis. */
    heldOn(key: string): { unused: number; byKeyField: Map<string, number> } | undefined {
      return held.get(key)
    },

    /** Hands back every lease held (on shutdown), and what grants whose answer was lost took, and waits for Redis to take them. */
    async settleAll() {
      for (const [key, lease] of held) settle(key, lease)
      await Promise.all([...settling, finish().catch(() => {})])
    },
  }
}

export type QuotaLeases = ReturnType<typeof quotaLeases>
