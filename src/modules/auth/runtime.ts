import type Redis from 'ioredis'
import type { Database } from '../../db/client'
import { type ClientAddress, clientAddress } from '../../shared/client-address'
import type { Clock } from '../../shared/clock'
import type { Logger } from '../../shared/logger'
import { type CounterSeries, createMetrics, type Metrics } from '../../shared/metrics'
import { type KeyDirectory, type KeyDirectoryOptions, keyDirectory } from './key-directory'
import { type AttemptCounter, attemptCounter, type LoginThrottle, loginThrottle } from './login-throttle'
import { failoverQuotaStore, memoryQuotaStore, type QuotaStore } from './quota'
import { TIERS, type Tier } from './tiers'
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
  /** The address a request is counted under by the login and sign-up throttles (TRUSTED_PROXIES). */
  clientAddress: ClientAddress
  /** Per tier, the requests the quota admitted and those it refused (429), counted by the guard. */
  quotaCounts: { admitted: Record<Tier, CounterSeries>; rejected: Record<Tier, CounterSeries> }
  /** Key cache hits and misses: `lookup` counts its own, the guard a key admitted at once (from `known`). */
  keyLookups: { hit: CounterSeries; miss: CounterSeries }
  close(): Promise<void>
}

export interface AuthDeps {
  db: Database
  redis: Redis | undefined
  clock: Clock
  logger: Logger
  config: { cookieSecure: boolean; trustedProxies: readonly string[] }
  /** Tests shorten the key cache's TTL to see what happens after it, without waiting 30 s. */
  keyCache?: KeyDirectoryOptions
  /** Where the quota and the key cache are counted (default: a registry of their own, unread). */
  metrics?: Metrics
}

const perTier = (series: (tier: Tier) => CounterSeries) => Object.fromEntries(TIERS.map((tier) => [tier, series(tier)])) as Record<Tier, CounterSeries>

export function createAuthRuntime(deps: AuthDeps): AuthRuntime {
  const usage = usageRecorder(deps.db, deps.logger, deps.clock)
  // A day's counters the store does not have (Redis lost them, the process restarted, or a new day)
  // start from what the recorder knows of it (docs/adr/0038-quota-recovery.md).
  const failover = deps.redis ? failoverQuotaStore(deps.redis, deps.clock, deps.logger, usage.dayTotals) : undefined
  const metrics = deps.metrics ?? createMetrics()
  const lookups = { hit: metrics.keyCache.series('hit'), miss: metrics.keyCache.series('miss') }
  const keys = keyDirectory(deps.db, deps.redis, deps.logger, deps.clock, { ...deps.keyCache, lookups })
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
    clientAddress: clientAddress(deps.config.trustedProxies),
    keyLookups: lookups,
    quotaCounts: { admitted: perTier((tier) => metrics.quotaAdmitted.series(tier)), rejected: perTier((tier) => metrics.quotaRejected.series(tier)) },
    async close() {
      await failover?.close()
      keys.close()
      await usage.close()
    },
  }
}
