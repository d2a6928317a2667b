import type { Logger } from './logger'

export interface Progress {
  update(done: number, total: number, label: string): void
  done(message: string): void
}

const BAR_WIDTH = 30

/**
 * A progress bar on a terminal, a log line per step otherwise (CI logs and containers should not
 * fill with carriage returns).
 */
export function createProgress(logger: Logger, stage: string, stream: NodeJS.WriteStream = process.stderr): Progress {
  const started = performance.now()
  if (!stream.isTTY) {
    return {
      update: (done, total, label) => logger.info({ stage, done, total, item: label }, `${stage}: ${done}/${total} ${label}`),
      done: (message) => logger.info({ stage, ms: Math.round(performance.now() - started) }, message),
    }
  }
  return {
    update(done, total, label) {
      const filled = Math.round((done / Math.max(total, 1)) * BAR_WIDTH)
      const seconds = ((performance.now() - started) / 1000).toFixed(1)
      stream.write(`\r${stage} [${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}] ${done}/${total} ${seconds}s ${label.padEnd(32).slice(0, 32)}`)
    },
    done(message) {
      stream.write('\n')
      logger.info({ stage, ms: Math.round(performance.now() - started) }, message)
    },
  }
}
