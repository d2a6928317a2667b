import pino, { type Logger } from 'pino'
import type { LogLevel } from '../config'

export type { Logger }

/**
 * JSON logs to stdout. Credentials are redacted at the logger, so a careless `log.info({ headers })`
 * can never write a key, cookie or password.
 */
export function createLogger(level: LogLevel, destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: undefined,
    redact: {
      paths: [
        'password',
        '*.password',
        'key',
        '*.key',
        'token',
        '*.token',
        'headers["x-api-key"]',
        'headers.cookie',
        '*.headers["x-api-key"]',
        '*.headers.cookie',
      ],
      censor: '[redacted]',
    },
  }
  return destination ? pino(options, destination) : pino(options)
}
