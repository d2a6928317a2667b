/**
 * Writes whose answer was lost (docs/adr/0125-a-quota-write-whose-answer-was-lost-is-learnt-not-guessed.md).
 * A command that timed out at the node may still have run in Redis (its reply was only late), or
 * may still run (ioredis sends it again after a reconnect). So every quota script that counts
 * carries a marker key of its own: the script does nothing when the marker exists, and records
 * what it counted in it. A node that lost an answer later asks for the marker (RESOLVE_OP_LUA):
 * what the write counted, or, when it never ran, a fence that keeps it from ever running.
 */

/** Marker keys: this prefix, the node's id, the write's number on that node. */
export const OP_KEY_PREFIX = 'quota-op:'
/** What a marker holds once a write that never ran is fenced off. */
export const FENCED = 'x'
/** Markers of answered writes deleted per charge call at most (the rest wait for the next one). */
const MAX_FORGOTTEN_PER_CALL = 64

/**
 * Whether a write issued now may reach Redis. Not connected, ioredis refuses it unsent (there is no
 * offline queue: src/deps.ts), so its failure then is certain: it never ran. Asked in the same turn
 * as the write is issued, before any I/O could change it.
 */
export const maySend = (redis: { status: string }) => redis.status === 'ready'

/**
 * A write whose outcome is unknown: it may have counted in Redis or not. `learn` asks Redis (once
 * it answers again) and gives what the write counted there, or undefined when it never ran.
 */
export class OutcomeUnknown<T> extends Error {
  constructor(
    cause: unknown,
    readonly learn: () => Promise<T | undefined>,
  ) {
    super('the quota write may or may not have run in Redis', { cause })
  }
}

/** The markers of one node's writes. */
export function writeMarkers(client: { tcgResolveQuotaWrite(numberOfKeys: 1, marker: string, ttl: number): Promise<string> }, node: string) {
  let written = 0
  let answered: string[] = []
  const learning = new Map<string, Promise<string | undefined>>()
  return {
    /** A marker key for the next write. */
    next: () => `${OP_KEY_PREFIX}${node}:${++written}`,
    /** The write's answer came: its marker is no longer needed (deleted with the next charge call). */
    answered(marker: string) {
      answered.push(marker)
    },
    /** Markers to delete now; those of writes whose answer was lost are never among them. */
    forgettable(): string[] {
      if (answered.length <= MAX_FORGOTTEN_PER_CALL) {
        const all = answered
        answered = []
        return all
      }
      return answered.splice(0, MAX_FORGOTTEN_PER_CALL)
    },
    /**
     * What the write recorded, or undefined when it never ran (and now never will). Asked once per
     * marker until Redis answers; the marker stays until it expires, so a copy sent again is a no-op.
     */
    learn(marker: string, ttl: number): Promise<string | undefined> {
      let known = learning.get(marker)
      if (!known) {
        known = client.tcgResolveQuotaWrite(1, marker, ttl).then((outcome) => (outcome === FENCED ? undefined : outcome))
        learning.set(marker, known)
        // Failed: asked again next time. Answered: callers hold the promise; the map forgets it.
        known.then(
          () => learning.delete(marker),
          () => learning.delete(marker),
        )
      }
      return known
    },
  }
}

export type WriteMarkers = ReturnType<typeof writeMarkers>
