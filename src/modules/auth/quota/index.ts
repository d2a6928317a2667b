/**
 * Daily quotas per account (docs/adr/0036-quota-accounting.md): what the rest of the service
 * uses. Which file owns what: docs/architecture.md.
 */
export { nextUtcMidnight } from './day'
export { failoverQuotaStore } from './failover-store'
export { HOT_CHARGES_PER_WINDOW } from './lease-policy'
export { memoryQuotaStore } from './memory-store'
export { redisQuotaStore } from './redis-store'
export type { Charge, ChargeResult, DayCounters, DaySeed, LiveRefreshClaim, QuotaStore } from './types'
