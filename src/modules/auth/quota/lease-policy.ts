/**
 * When a node leases an account's quota, for how long and how much (leases.ts says why leases
 * exist and why they stay exact). The lease scripts are built from these (lua.ts).
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
export const MIN_LEASE_UNITS = 16
export const FIRST_LEASE_UNITS = 256
export const MAX_LEASE_UNITS = 8_192
/** A lease takes at most 1 / LEASE_SHARE_DIVISOR (a quarter) of what is left of the quota. */
export const LEASE_SHARE_DIVISOR = 4

/** Whether Redis would grant a lease with this much used: it grants a quarter of what is left, at least MIN_LEASE_UNITS. */
export const leaseWorthAsking = (used: number, limit: number) => limit - used >= LEASE_SHARE_DIVISOR * MIN_LEASE_UNITS
