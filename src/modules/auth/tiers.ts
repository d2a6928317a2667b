/**
 * The one tier-policy table (docs/adr/0033-tier-access.md). Routes declare the capability they need; quotas,
 * history windows, resolve limits and live-refresh allowances are read from here. Nothing else in
 * the code base names a tier.
 */

export const TIERS = ['free', 'hobby', 'starter', 'pro', 'business'] as const
export type Tier = (typeof TIERS)[number]

/**
 * What a route may need beyond a valid key. `catalog` is everything the spec gives every tier:
 * sets, cards, card prices, search, top movers, marketplace lookup and (windowed) history.
 */
export const CAPABILITIES = [
  'catalog',
  'bulk_resolve',
  'set_prices',
  'condition_prices',
  'detailed_history',
  'bulk_read',
  'webhooks',
  'bulk_history',
  'set_export',
  'bulk_conditions',
] as const
export type Capability = (typeof CAPABILITIES)[number]

export interface TierPolicy {
  label: string
  dailyQuota: number
  monthlyPriceUsd: number
  /** Days of price history visible; null = full history. */
  historyDays: number | null
  /** Bulk resolve: items per request and quota credits per item; null = no access. */
  resolve: { maxItems: number; creditPerItem: number } | null
  /** Live refreshes of condition prices per account per day. */
  liveRefreshesPerDay: number
  capabilities: ReadonlySet<Capability>
}

const FREE: Capability[] = ['catalog']
const STARTER: Capability[] = [...FREE, 'bulk_resolve']
// docs/adr/0033-tier-access.md: set prices follow the sets reference (Pro), bulk history and set export the
// bulk reference (Business), where the spec's tier guide says Starter and Pro.
const PRO: Capability[] = [...STARTER, 'set_prices', 'condition_prices', 'detailed_history', 'bulk_read', 'bulk_conditions', 'webhooks']
const BUSINESS: Capability[] = [...PRO, 'bulk_history', 'set_export']

export const TIER_POLICY: Readonly<Record<Tier, Readonly<TierPolicy>>> = {
  free: {
    label: 'Free',
    dailyQuota: 100,
    monthlyPriceUsd: 0,
    historyDays: 7,
    resolve: null,
    liveRefreshesPerDay: 0,
    capabilities: new Set(FREE),
  },
  hobby: {
    label: 'Hobby',
    dailyQuota: 1_000,
    monthlyPriceUsd: 9.99,
    historyDays: 30,
    resolve: null,
    liveRefreshesPerDay: 0,
    capabilities: new Set(FREE),
  },
  starter: {
    label: 'Starter',
    dailyQuota: 2_500,
    monthlyPriceUsd: 19.99,
    historyDays: 90,
    resolve: { maxItems: 100, creditPerItem: 1 },
    liveRefreshesPerDay: 0,
    capabilities: new Set(STARTER),
  },
  pro: {
    label: 'Pro',
    dailyQuota: 10_000,
    monthlyPriceUsd: 49.99,
    historyDays: null,
    resolve: { maxItems: 500, creditPerItem: 0.5 },
    liveRefreshesPerDay: 200,
    capabilities: new Set(PRO),
  },
  business: {
    label: 'Business',
    dailyQuota: 50_000,
    monthlyPriceUsd: 99.99,
    historyDays: null,
    resolve: { maxItems: 1_000, creditPerItem: 0.1 },
    liveRefreshesPerDay: 1_000,
    capabilities: new Set(BUSINESS),
  },
}

export function isTier(value: string): value is Tier {
  return (TIERS as readonly string[]).includes(value)
}

/** The cheapest tier that has the capability (every capability belongs to some tier). */
export function minimumTier(capability: Capability): Tier {
  return TIERS.find((tier) => TIER_POLICY[tier].capabilities.has(capability))!
}

/** Quota credits a bulk resolve of `items` costs on this tier: ceil(items × multiplier). */
export function resolveCredits(tier: Tier, items: number): number {
  const resolve = TIER_POLICY[tier].resolve
  if (!resolve) throw new Error(`tier ${tier} has no bulk resolve`)
  // Round before ceil so 0.1 × 30 (= 3.0000000000000004 in floating point) costs 3, not 4.
  return Math.ceil(Math.round(items * resolve.creditPerItem * 1e6) / 1e6)
}
