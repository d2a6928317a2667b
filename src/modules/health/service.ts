import type Redis from 'ioredis'
import type { Executor } from '../../db/client'
import type { Clock } from '../../shared/clock'
import { isCatalogEmpty, lastSyncPerTier } from '../ingest/service'
import type { MarketplaceSource } from '../ingest/source'
import { pingDatabase } from './repo'

/** What the health routes read: the database, Redis when configured, the clock and the marketplace source. */
export interface HealthDeps {
  db: Executor
  redis: Redis | undefined
  clock: Clock
  source: MarketplaceSource
}

/** What /ready reads from the database: that it answers, whether the catalog is empty, and each tier's last sync. */
export async function readDataState(db: Executor) {
  await pingDatabase(db)
  const [empty, lastSync] = await Promise.all([isCatalogEmpty(db), lastSyncPerTier(db)])
  return { empty, lastSync }
}
