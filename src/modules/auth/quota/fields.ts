import { type DayCounters, emptyCounters } from './types'

/**
 * The fields of an account's day hash in Redis (day.ts `dayKey`). The Lua scripts are built from
 * these names (lua.ts), so TypeScript and Redis cannot come to disagree on them.
 */
export const FIELD = {
  /** Units used today; a quota lease's units count from when it is granted. */
  used: 'used',
  /** Requests refused over quota. */
  rejected: 'rejected',
  /** Live refreshes claimed. */
  live: 'live',
  /** Present while the hash is provisional: seeded while the database was away, to be seeded again. */
  unseeded: 'unseeded',
} as const

/** Units charged per API key: one field per key, this prefix then the key id. */
export const KEY_FIELD_PREFIX = 'k:'
export const keyField = (keyId: number) => `${KEY_FIELD_PREFIX}${keyId}`
export const keyIdOfField = (field: string) => Number(field.slice(KEY_FIELD_PREFIX.length))

/** The hash field of a lease: this prefix then the lease id; its deadline (ms, Redis clock), or LAPSED_LEASE once lapsed unsettled. */
export const LEASE_FIELD_PREFIX = 'L:'
/** A lease whose node never settled it counts as wholly used. Negative: a deadline ≥ 0 is a live lease. */
export const LAPSED_LEASE = -1

export function parseCounters(hash: Record<string, string>): DayCounters {
  const counters = emptyCounters()
  for (const [field, value] of Object.entries(hash)) {
    const n = Number(value)
    if (field === FIELD.used) counters.used = n
    else if (field === FIELD.rejected) counters.rejected = n
    else if (field === FIELD.live) counters.liveRefreshes = n
    else if (field.startsWith(KEY_FIELD_PREFIX)) counters.byKey.set(keyIdOfField(field), n)
  }
  return counters
}
