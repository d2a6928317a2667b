import { systemClock, withTimeout } from './shared/clock'
import type { Logger } from './shared/logger'

/** How long a start stopped by a signal may spend closing what it opened before it exits anyway. */
const CLOSE_DURING_START_MS = 10_000

export interface StopSignals {
  /** Whether SIGTERM or SIGINT has arrived: the start goes no further (its failures after that are the stop's, not errors). */
  readonly stopping: boolean
  /** Something the start opened, closed (last opened first) if a signal stops the start. */
  opened(close: () => Promise<void>): void
  /** The start is done: a signal from now on runs `shutdown`, the service's graceful stop (which exits). */
  serving(shutdown: (signal: string) => Promise<void>): void
}

/**
 * SIGTERM and SIGINT handled from the first moment of the start (docs/adr/0126-running-behind-a-load-balancer-and-an-orchestrator.md):
 * a process without a handler ignores them when it is PID 1 (a container without an init). During
 * the start a signal closes what was opened and exits with 0, the migration in flight rolled back
 * with its connection; once serving, it runs the graceful shutdown.
 */
export function stopSignals(logger: Logger): StopSignals {
  const opened: (() => Promise<void>)[] = []
  let shutdown: ((signal: string) => Promise<void>) | undefined
  let received: string | undefined
  const onSignal = (signal: string) => {
    if (received !== undefined) return
    received = signal
    if (shutdown) {
      void shutdown(signal)
      return
    }
    logger.info({ signal }, 'stopping during the start: closing what it opened')
    void (async () => {
      const closing = (async () => {
        for (const close of opened.reverse()) await close().catch((error) => logger.warn({ err: error }, 'closing during a stopped start failed'))
      })()
      await withTimeout(systemClock, closing, CLOSE_DURING_START_MS, () => new Error('closing took too long')).catch(() => {})
      logger.info({ signal }, 'stopped during the start')
      process.exit(0)
    })()
  }
  process.on('SIGINT', () => onSignal('SIGINT'))
  process.on('SIGTERM', () => onSignal('SIGTERM'))
  return {
    get stopping() {
      return received !== undefined
    },
    opened: (close) => void opened.push(close),
    serving(stop) {
      shutdown = stop
    },
  }
}
