/**
 * What the charge and live-refresh scripts answer per charge: a status and a value. The scripts
 * are built from these constants (lua.ts), and the stores read the answers with them.
 */

/** Refused over quota (and one rejection counted); value: `used`. */
export const REFUSED = 0
/** Admitted and counted; value: `used` after it. */
export const ADMITTED = 1
/** Not judged yet: a live lease of the account may still hand units back. Value: ms until the nearest one ends. */
export const WAIT = 2
/** Not judged: the day hash is missing (Redis lost it, or the day has just begun). Seed it, then ask again. */
export const MISSING = 3
/** Added to a status: the hash is provisional (seeded while the database was away), so seed it again when possible. */
export const UNSEEDED = 4
