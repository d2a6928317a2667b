import type { Clock, Timer } from '../shared/clock'
import type { Logger } from '../shared/logger'
import { type LockSession, statementBound } from './leader-repo'

export interface LeaderElection {
  /** Starts competing (at once, then every retry interval). */
  start(): void
  /** Stops competing and releases the lock if held. */
  stop(): Promise<void>
  isLeader(): boolean
}

export interface LeaderElectionOptions {
  openSession: () => Promise<LockSession>
  /** How often a follower tries to take the lock, and how often the leader checks it still holds it. */
  retryMs: number
  /** Runs the retry interval and the statement bound. */
  clock: Clock
  logger: Logger
  /** Called when this node starts leading (catch-up runs from here). */
  onLead?: () => void
  /** Called when this node stops leading because its lock session was lost. */
  onLoseLead?: () => void
}

/**
 * Leadership through a session-level advisory lock: a follower tries `pg_try_advisory_lock` every
 * `retryMs`; the leader checks every `retryMs` that its session is alive and still holds the
 * lock, and stops leading the moment it does not (then competes again on a fresh session).
 */
export function leaderElection(options: LeaderElectionOptions): LeaderElection {
  const { logger, clock } = options
  let session: LockSession | undefined
  let leading = false
  let stopped = true
  let timer: Timer | undefined
  let checking: Promise<void> | undefined

  async function dropSession() {
    const closing = session
    session = undefined
    await closing?.close().catch(() => {})
  }

  async function check() {
    if (stopped) return
    try {
      if (leading) {
        if (!(await statementBound(clock, session!.holdsLock()))) throw new Error('the leader lock is no longer held through this lock session')
        return
      }
      session ??= await options.openSession()
      if (await statementBound(clock, session.tryLock())) {
        if (stopped) return
        leading = true
        logger.info('this node now leads the scheduled jobs')
        options.onLead?.()
      }
    } catch (error) {
      if (leading) {
        leading = false
        logger.warn({ err: error }, 'lost the leader lock: this node stops running scheduled jobs')
        options.onLoseLead?.()
      } else {
        logger.warn({ err: error }, 'could not try the leader lock; trying again')
      }
      await dropSession()
    }
  }

  function schedule() {
    if (stopped) return
    timer = clock.after(
      options.retryMs,
      () => {
        checking = check().finally(schedule)
      },
      { unref: true },
    )
  }

  return {
    start() {
      if (!stopped) return
      stopped = false
      checking = check().finally(schedule)
    },
    async stop() {
      stopped = true
      timer?.cancel()
      await checking?.catch(() => {})
      if (leading) logger.info('released the leader lock')
      leading = false
      await dropSession()
    },
    isLeader: () => leading,
  }
}
