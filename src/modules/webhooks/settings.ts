import type { SecretBox } from './secret-box'
import type { TargetPolicy } from './target-guard'

/** What webhook management and delivery take from the configuration. */
export interface WebhookSettings {
  /** Seals and opens signing secrets; absent when no key is configured (creation answers 503). */
  secrets: SecretBox | undefined
  targets: TargetPolicy
}

/** Where no settings are given (tests of other modules): no key, and only public targets. */
export const NO_WEBHOOK_SETTINGS: WebhookSettings = { secrets: undefined, targets: { allowPrivateTargets: false } }
