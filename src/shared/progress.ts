import type { Clock } from './clock'
import type { Logger } from './logger'

export interface Progress {
  update(done: number, total: number, label: string): void
  done(message: string): void
}

const BAR_WIDTH = 30

/**
 * A progress bar on a terminal, a log line per step otherwise (CI logs and containers should not
 * fill with carriage returns). Durations are measured on `clock`.
 */
export function createProgress(logger: Logger, clock: Clock, stage: string, stream: NodeJS.WriteStream = process.stderr): Progress {
  const started = clock.monotonic()
  const elapsed = () => clock.monotonic() - started
  if (!stream.isTTY) {
    return {
      update: (done, total, label) => logger.info({ stage, done, total, item: label }, `${stage}: ${done}/${total} ${label}`),
      done: (message) => logger.info({ stage, ms: Math.round(elapsed()) }, message),
    }
  }
  return {
    update(done, total, label) {
      const filled = Math.round((done / Math.max(total, 1)) * BAR_WIDTH)
      const seconds = (elapsed() / 1000).toFixed(1)
      stream.write(`\r${stage} [${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}] ${done}/${total} ${seconds}s ${label.padEnd(32).slice(0, 32)}`)
    },
    done(message) {
      stream.write('\n')
      logger.info({ stage, ms: Math.round(elapsed()) }, message)
    },
  }
}
