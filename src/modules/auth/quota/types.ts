/**
 * Daily quota counters (docs/adr/0036-quota-accounting.md): per account and UTC day, the units used, the requests
 * refused over quota, live refreshes, and units per key. Keys of the day vanish a while after it ends.
 */
export interface DayCounters {
  used: number
  rejected: number
  liveRefreshes: number
  /** Units charged today per key id. */
  byKey: Map<number, number>
}

export function emptyCounters(): DayCounters {
  return { used: 0, rejected: 0, liveRefreshes: 0, byKey: new Map() }
}

export interface Charge {
  accountId: number
  keyId: number
  cost: number
  limit: number
  now: Date
}

export interface ChargeResult {
  admitted: boolean
  /** Units used today after this charge (unchanged when refused). */
  used: number
}

export interface LiveRefreshClaim {
  accountId: number
  /** The tier's live refreshes per day. */
  limit: number
  now: Date
}

export interface QuotaStore {
  /** Atomically: if used + cost ≤ limit, add cost to the account and the key; else count one rejection. */
  charge(charge: Charge): Promise<ChargeResult>
  /**
   * The charge when it can be admitted without waiting (a quota lease or local counters cover it):
   * `used` after it. Undefined, with nothing counted, when it needs Redis or would be refused:
   * `charge` then judges it.
   */
  chargeAtOnce(charge: Charge): number | undefined
  read(accountId: number, now: Date): Promise<DayCounters>
  /**
   * Atomically: if today's live refreshes + 1 ≤ limit, count one (`used` = the count after it);
   * else refuse and count nothing. N concurrent claims against R left admit exactly min(N, R).
   */
  claimLiveRefresh(claim: LiveRefreshClaim): Promise<ChargeResult>
  /** Hands back a claimed live refresh that did not happen (the marketplace failed): it costs nothing. */
  refundLiveRefresh(accountId: number, now: Date): Promise<void>
  /**
   * Hands back an admitted charge whose request was then refused with a 429, and counts the
   * refusal (docs/adr/0090-a-429-never-costs-a-unit.md). Nothing on a missing day counter: the
   * seed that recreates it reads the usage recorder, which counts the hand-back too.
   */
  refund(charge: Omit<Charge, 'limit'>): Promise<void>
}

/**
 * Where a day's counters come from when Redis has none: after Redis lost its data, and on each
 * account's first request of a day. `complete` is false when only part of the day could be known
 * (the database could not be read, or was not asked: `readStored` false while it is away): the
 * hash is then provisional and seeded again later.
 */
export type DaySeed = (accountId: number, day: string, readStored: boolean) => Promise<{ used: number; rejected: number; liveRefreshes: number; complete: boolean }>

export type SeedTotals = Awaited<ReturnType<DaySeed>>

/** A day's counters per account: what local counting hands back to Redis. */
export type DayCountsByAccount = Map<number, DayCounters>
