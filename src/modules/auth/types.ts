import type { Tier } from './tiers'

/** An account as the service reads it (no password hash). */
export interface AccountRow {
  id: number
  email: string
  tier: Tier
  subscriptionStatus: string
  createdAt: Date
}

/** What a request authenticated by a key needs; cached per key hash on every node. */
export interface KeyIdentity {
  keyId: number
  accountId: number
  tier: Tier
  subscriptionStatus: string
}
