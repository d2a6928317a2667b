import type Redis from 'ioredis'
import type { Database } from '../../db/client'
import type { Clock } from '../../shared/clock'
import type { Logger } from '../../shared/logger'
import { type KeyDirectory, type KeyDirectoryOptions, keyDirectory } from './key-directory'
import { type AttemptCounter, attemptCounter, type LoginThrottle, loginThrottle } from './login-throttle'
import { failoverQuotaStore, memoryQuotaStore, type QuotaStore } from './quota'
import { type UsageRecorder, usageRecorder } from './usage-recorder'

/** The auth module's long-lived parts, built once per app and closed when it stops. */
export interface AuthRuntime {
  db: Database
  clock: Clock
  logger: Logger
  keys: KeyDirectory
  quota: QuotaStore
  /** 'shared' on Redis, 'local' without Redis, 'degraded' while a configured Redis fails. */
  quotaMode(): 'shared' | 'local' | 'degraded'
  usage: UsageRecorder
  throttle: LoginThrottle
  /** Attempt counts shared by every node (login, sign-up and webhook test-ping limits). */
  attempts: AttemptCounter
  cookieSecure: boolean
  close(): Promise<void>
}

export interface AuthDeps {
  db: Database
  redis: Redis | undefined
  clock: Clock
  logger: Logger
  config: { cookieSecure: boolean }
  /** Tests shorten the key cache's TTL to see what happens after it, without waiting 30 s. */
  keyCache?: KeyDirectoryOptions
}

export function createAuthRuntime(deps: AuthDeps): AuthRuntime {
  const usage = usageRecorder(deps.db, deps.logger, deps.clock)
  // A day's counters the store does not have (Redis lost them, the process restarted, or a new day)
  // start from what the recorder knows of it (docs/adr/0038-quota-recovery.md).
  const failover = deps.redis ? failoverQuotaStore(deps.redis, deps.clock, deps.logger, usage.dayTotals) : undefined
  const keys = keyDirectory(deps.db, deps.redis, deps.logger, deps.clock, deps.keyCache)
  const attempts = attemptCounter(deps.redis, deps.clock)
  return {
    db: deps.db,
    clock: deps.clock,
    logger: deps.logger,
    keys,
    quota: failover ?? memoryQuotaStore({ seed: usage.dayTotals, clock: deps.clock }),
    quotaMode: () => (!failover ? 'local' : failover.degraded ? 'degraded' : 'shared'),
    usage,
    throttle: loginThrottle(attempts, deps.clock),
    attempts,
    cookieSecure: deps.config.cookieSecure,
    async close() {
      await failover?.close()
      keys.close()
      await usage.close()
    },
  }
}
