import type { Clock } from '../../../shared/clock'
import type { ChargingRedis } from './commands'
import { HOT_CHARGES_PER_WINDOW, HOT_WINDOW_MS, leaseWorthAsking } from './lease-policy'
import type { QuotaLeases } from './leases'
import { maySend, OutcomeUnknown, type WriteMarkers } from './outcomes'
import { ADMITTED, MISSING, REFUSED, UNSEEDED, WAIT } from './status'
import type { ChargeResult } from './types'

/** A charge told to wait for a lease asks again after this long at most: leases usually end early, when used up. */
export const MAX_LEASE_WAIT_MS = 50

/** Bounds one script run, so a burst cannot hold Redis for long. */
const MAX_CHARGES_PER_CALL = 256

export interface QueuedCharge {
  key: string
  accountId: number
  day: string
  ttl: number
  /** Cost, limit and key field: the script's ARGV for this charge (lua.ts ARGS_PER_CHARGE). */
  args: [number, number, string]
  resolve(result: ChargeResult): void
  /** With OutcomeUnknown when the call carrying it may have run: its `learn` says whether Redis admitted (true) or refused (false) it. */
  reject(error: unknown): void
}

/** How a charge that found its day hash missing or provisional has it seeded (seeding.ts, for one day hash). */
export interface DayHashSeeding {
  seed(key: string, accountId: number, day: string, ttl: number): Promise<void>
  reseed(key: string, accountId: number, day: string, ttl: number): void
}

/**
 * Group commit: at most one charge call is in flight; charges made meanwhile wait for it and go
 * together in the next call (and those of one event-loop turn always go together). Each request
 * still waits for one script run that carries its charge. Why: per command, the client's
 * parsing, timer and promise and Redis's script run and socket work cost more than the rest of
 * the key guard, so under load fewer, larger calls are what keeps the guard cheap
 * (docs/adr/0037-group-commit-of-charges.md); when idle, a charge goes at the end of its own
 * turn. An account with HOT_CHARGES_PER_WINDOW admitted charges within HOT_WINDOW_MS, and enough
 * left, is charged often enough to lease its quota (leases.ts); one refused over its quota
 * never asks.
 */
export function groupCommit(client: ChargingRedis, clock: Clock, leases: QuotaLeases, seeding: DayHashSeeding, markers: WriteMarkers) {
  let queue: QueuedCharge[] = []
  /** Admitted charges per day hash since `recentSince` (a tumbling window): who is hot. */
  const recent = new Map<string, number>()
  let recentSince = 0
  let sending = false
  let scheduled = false
  /** Charges of accounts whose lease request is out, held until it is answered (see `leases.request`). */
  const parked = new Map<string, { charges: QueuedCharge[]; answered: Promise<void> }>()
  /** The account's `used` when this node's lease covers the charge; not while a lease request is out. */
  const fromLease = (key: string, field: string, cost: number, limit: number) => (parked.has(key) ? undefined : leases.take(key, field, cost, limit))
  /** Held with its account's charges while a lease request is out, else into Redis's next call. */
  const send = (queued: QueuedCharge) => {
    const waiting = parked.get(queued.key)
    if (waiting) return void waiting.charges.push(queued)
    queue.push(queued)
    if (!sending && !scheduled) {
      scheduled = true
      // The end of this event-loop turn, not a duration: the clock's timers are for time, and a
      // fake clock would hold the call until a test moved it.
      setImmediate(sendQueued)
    }
  }
  const dispatch = (queued: QueuedCharge) => {
    const [cost, limit, field] = queued.args
    const used = fromLease(queued.key, field, cost, limit)
    if (used === undefined) send(queued)
    else queued.resolve({ admitted: true, used })
  }
  const requestLease = (key: string, limit: number, ttl: number) => {
    if (parked.has(key) || leases.heldOn(key)) return
    const charges: QueuedCharge[] = []
    // Charges queued for the next call would reach Redis after the grant: they wait with the others.
    queue = queue.filter((queued) => queued.key !== key || (charges.push(queued), false))
    const answered = leases.request(key, limit, ttl).finally(() => {
      parked.delete(key)
      charges.forEach(dispatch)
    })
    parked.set(key, { charges, answered })
  }
  const sendQueued = () => {
    scheduled = false
    if (sending || queue.length === 0) return
    const batch = queue.length <= MAX_CHARGES_PER_CALL ? queue : queue.slice(0, MAX_CHARGES_PER_CALL)
    queue = batch === queue ? [] : queue.slice(MAX_CHARGES_PER_CALL)
    // The call's marker records what it counted, should its answer be lost (outcomes.ts); it also
    // deletes the markers of calls answered since the last one.
    const marker = markers.next()
    const forgotten = markers.forgettable()
    const keys: string[] = [marker, ...forgotten]
    let ttl = 0
    const args: (string | number)[] = [forgotten.length, 0]
    for (const queued of batch) {
      keys.push(queued.key)
      args.push(...queued.args)
      ttl = Math.max(ttl, queued.ttl)
    }
    args[1] = ttl
    sending = true
    const sent = maySend(client)
    client
      .tcgChargeQuotaBatch(keys.length, ...keys, ...args)
      .then(
        (pairs) => {
          markers.answered(marker)
          // Per account: its last admitted charge in this call, to see if it is worth a lease.
          const admitted = new Map<string, { used: number; queued: QueuedCharge }>()
          const now = clock.monotonic()
          if (now - recentSince >= HOT_WINDOW_MS) {
            recent.clear()
            recentSince = now
          }
          batch.forEach((queued, i) => {
            const [flagged, value] = [pairs[2 * i]!, pairs[2 * i + 1]!]
            if (flagged === MISSING) {
              return void seeding.seed(queued.key, queued.accountId, queued.day, queued.ttl).then(() => dispatch(queued), queued.reject)
            }
            if (flagged & UNSEEDED) seeding.reseed(queued.key, queued.accountId, queued.day, queued.ttl)
            const status = flagged & ~UNSEEDED
            if (status === WAIT) return void clock.after(Math.min(value, MAX_LEASE_WAIT_MS), () => dispatch(queued))
            queued.resolve({ admitted: status === ADMITTED, used: value })
            if (status !== ADMITTED) return
            recent.set(queued.key, (recent.get(queued.key) ?? 0) + 1)
            admitted.set(queued.key, { used: value, queued })
          })
          for (const [key, { used, queued }] of admitted) {
            const [, limit] = queued.args
            if (recent.get(key)! >= HOT_CHARGES_PER_WINDOW && leaseWorthAsking(used, limit)) requestLease(key, limit, queued.ttl)
          }
        },
        (error) => {
          for (const old of forgotten) markers.answered(old)
          if (!sent) return void batch.forEach((queued) => queued.reject(error))
          const statuses = () => markers.learn(marker, ttl)
          batch.forEach((queued, i) => {
            const counted = async () => {
              const status = Number((await statuses())?.[i])
              return status === ADMITTED ? true : status === REFUSED ? false : undefined
            }
            queued.reject(new OutcomeUnknown(error, counted))
          })
        },
      )
      .finally(() => {
        sending = false
        sendQueued()
      })
  }
  return {
    /** Admits the charge from this node's lease at once: the account's `used`, or undefined when it must go to Redis. */
    fromLease,
    /** Queues the charge for Redis's next call (or holds it while its account's lease request is out). */
    send,
    /** Settles once a lease request out on the day hash is answered: a lease granted meanwhile is in `used`. */
    leaseAnswered: (key: string) => parked.get(key)?.answered,
  }
}
