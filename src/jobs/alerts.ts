import type { PriceChange } from '../modules/ingest/service'

export type { PriceChange }

/** What a finished sync hands to alert evaluation. */
export interface PriceChangeBatch {
  /** The job that ran the sync (`sync-tier-3`, `manual-sync`, …) and its row in `job_runs`. */
  job: string
  runId: number
  changes: PriceChange[]
}

/**
 * The one place price alerts are evaluated after a sync, once the new prices are committed and
 * the snapshot rebuilt. A failure is logged by the caller and never fails the sync: the prices
 * are already written.
 */
export type AlertHook = (batch: PriceChangeBatch) => Promise<void>
