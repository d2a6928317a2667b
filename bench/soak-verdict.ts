/**
 * What the soak (bench/soak.bench.ts) concludes from the client's records, the kill's instants and
 * the service's counters: which errors the kill explains, the latency of the first and last
 * minute, RSS growth, and each account's admitted units against what the service charged. Pure
 * functions, so the rules are tested apart from a run (soak-verdict.test.ts).
 */
import { type SoakRecord, UNCHARGED } from './soak-client'

/** The kill as the soak saw it, in epoch ms. */
export interface Kill {
  /** The balancer's name of the node killed. */
  server: string
  at: number
  /** When the balancer first showed it DOWN. */
  downAt: number
}

/** Errors the balancer makes when a node fails under a request: 502 (the node closed), 503 (no node), 504 (timeout). */
const BALANCER_ERRORS = new Set([502, 503, 504])

/**
 * An answer that is not one its request may get is explained by the kill only when all of these
 * hold: it is the balancer's error or no answer at all; the killed node was serving it (the
 * balancer names it, or named nothing); and the request was in flight when the node died, sent
 * before the balancer took the node out and ended after the kill. Anything else is unexplained.
 */
export function explainedByKill(record: SoakRecord, kill: Kill | undefined): boolean {
  if (!kill) return false
  if (record.status !== 0 && !BALANCER_ERRORS.has(record.status)) return false
  if (record.server !== undefined && record.server !== kill.server) return false
  return record.at <= kill.downAt && record.at + record.ms >= kill.at
}

export interface ErrorTally {
  /** `502 on node-a, GET /v1/search` or `no answer (ECONNRESET …)`: count. */
  explained: Map<string, number>
  unexplained: Map<string, number>
  /** The first few unexplained records, for the report. */
  examples: SoakRecord[]
}

const errorLabel = (record: SoakRecord) =>
  `${record.status === 0 ? `no answer (${record.error ?? 'unknown'})` : `${record.status}`}${record.server ? ` from ${record.server}` : ''}: ${record.kind}`

export function tallyErrors(records: SoakRecord[], kill: Kill | undefined): ErrorTally {
  const tally: ErrorTally = { explained: new Map(), unexplained: new Map(), examples: [] }
  for (const record of records) {
    if (record.expected) continue
    const into = explainedByKill(record, kill) ? tally.explained : tally.unexplained
    into.set(errorLabel(record), (into.get(errorLabel(record)) ?? 0) + 1)
    if (into === tally.unexplained && tally.examples.length < 5) tally.examples.push(record)
  }
  return tally
}

/** The value below which `share` (0–1) of the values lie (nearest rank). */
export function percentile(values: number[], share: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = values.toSorted((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(share * sorted.length) - 1)]!
}

/** p99 latency of the answered requests sent within [from, to) (epoch ms). */
export function p99Between(records: SoakRecord[], from: number, to: number): { p99: number; count: number } {
  const latencies = records.filter((record) => record.status !== 0 && record.at >= from && record.at < to).map((record) => record.ms)
  return { p99: percentile(latencies, 0.99), count: latencies.length }
}

/** One account's day as the client counted it and as the service charged it. */
export interface AccountCheck {
  accountId: number
  /** Units of the answers the client got that cost units (not 401/403/429, not a balancer error). */
  admitted: number
  /** 429 answers the client got. */
  refused: number
  /** Units of the requests of this account lost to the kill (charged or not, the client cannot tell). */
  lostUnits: number
  /** Units the killed node answered in the last second before it died: a lease lives at most a second (docs/adr/0024-quota-leases.md). */
  lastSecondOnKilled: number
  /** Redis's day hash: `used`, `rejected`, the sum of the per-key `k:` fields, and leases never handed back. */
  used: number
  rejected: number
  perKey: number
  danglingLeases: number
}

/** What the client saw for each account: admitted units, 429s, units lost to the kill, and the killed node's last second. */
export function clientCounts(records: SoakRecord[], kill: Kill | undefined) {
  const counts = new Map<number, { admitted: number; refused: number; lostUnits: number; lastSecondOnKilled: number }>()
  for (const record of records) {
    if (record.account === undefined) continue
    let entry = counts.get(record.account)
    if (!entry) counts.set(record.account, (entry = { admitted: 0, refused: 0, lostUnits: 0, lastSecondOnKilled: 0 }))
    if (record.status === 429) entry.refused++
    else if (record.status === 0 || BALANCER_ERRORS.has(record.status)) entry.lostUnits += record.units
    else if (!UNCHARGED.has(record.status)) {
      entry.admitted += record.units
      if (kill && record.server === kill.server && record.at <= kill.at && record.at >= kill.at - 1_000) entry.lastSecondOnKilled += record.units
    }
  }
  return counts
}

/**
 * Whether an account's charges add up. Without a lost request or a lease left by the killed node,
 * exactly: Redis's `used` equals the units the client was admitted, the per-key counts add up to
 * it, and Redis's `rejected` equals the 429s. With them, within what the kill can explain:
 * - `used` ≥ admitted: no answer went out uncharged;
 * - per-key counts ≤ admitted + lost: nothing was charged to a key that was neither answered nor lost;
 * - per-key counts ≥ admitted − what the killed node answered in its last second: only a dead
 *   lease's per-key counts are missing (a lease's units are in `used` from its grant, its per-key
 *   counts come with its hand-back).
 */
export function quotaVerdict(check: AccountCheck): { exact: boolean; pass: boolean; why: string } {
  const touched = check.lostUnits > 0 || check.danglingLeases > 0
  const exact = check.used === check.admitted && check.perKey === check.used && check.rejected === check.refused
  if (!touched) {
    return {
      exact,
      pass: exact,
      why: exact ? 'exact' : `used ${check.used}, per-key ${check.perKey}, rejected ${check.rejected}: expected ${check.admitted} admitted, ${check.refused} refused`,
    }
  }
  const failures: string[] = []
  if (check.used < check.admitted) failures.push(`used ${check.used} < admitted ${check.admitted}`)
  if (check.perKey > check.admitted + check.lostUnits) failures.push(`per-key ${check.perKey} > admitted ${check.admitted} + lost ${check.lostUnits}`)
  if (check.perKey < check.admitted - check.lastSecondOnKilled)
    failures.push(`per-key ${check.perKey} < admitted ${check.admitted} − ${check.lastSecondOnKilled} answered by the killed node in its last second`)
  // A refusal lost to the kill may have been counted.
  if (check.rejected < check.refused || check.rejected > check.refused + check.lostUnits) failures.push(`rejected ${check.rejected} against ${check.refused} refused`)
  const share = `${check.used - check.admitted} units charged beyond the answers: ${check.danglingLeases} lease(s) of the killed node (${check.used - check.perKey} units in use at its death), ${check.lostUnits} lost unit(s)`
  return { exact, pass: failures.length === 0, why: failures.length === 0 ? (exact ? 'exact' : share) : failures.join('; ') }
}

/** RSS growth of one node's life from after its warm-up to its end, judged against `bound`. */
export interface RssLife {
  node: string
  warmMb: number
  endMb: number
  peakMb: number
}
