import type { Database } from '../../db/client'
import { ConfigError } from '../../shared/errors'
import { findCatalogSourceRow, upsertCatalogSource } from './repo'
import { isCatalogEmpty } from './service'
import type { SourceName } from './source'

/**
 * Which source filled the catalog, so that prices of two sources never mix in it
 * (docs/adr/0099-the-catalog-keeps-its-source.md). One row, id 1.
 */
export interface CatalogSourceRecord {
  source: SourceName
  recordedAt: Date
}

/**
 * Sources that may write one catalog. The http protocol has carried the demo catalog (its only
 * server in this project serves a MarketplaceSource, the demo one in tests and benches), and catalogs
 * filled before sources were recorded are recorded as demo whichever of the two filled them.
 */
const INTERCHANGEABLE: ReadonlySet<SourceName> = new Set(['demo', 'http'])

export function mayShareCatalog(recorded: SourceName, configured: SourceName): boolean {
  return recorded === configured || (INTERCHANGEABLE.has(recorded) && INTERCHANGEABLE.has(configured))
}

/** A start or CLI command with a source the filled catalog was not filled by. */
export class CatalogSourceConflict extends ConfigError {
  override name = 'CatalogSourceConflict'

  constructor(
    readonly recorded: CatalogSourceRecord,
    readonly configured: SourceName,
  ) {
    super(
      `The catalog was filled by the ${recorded.source} source (recorded ${recorded.recordedAt.toISOString()}), but MARKETPLACE_SOURCE is ` +
        `${configured}: prices of the two would mix. Start with MARKETPLACE_SOURCE=${recorded.source} to keep this catalog, or replace it ` +
        `with \`bun src/cli.ts seed --fresh\` under ${configured} (it wipes the catalog, prices, history and webhooks; accounts and keys stay).`,
    )
  }
}

export async function findCatalogSource(db: Database): Promise<CatalogSourceRecord | undefined> {
  const row = await findCatalogSourceRow(db)
  // A name this version does not know (a later version's source) equals no configured one: it conflicts.
  return row && { source: row.source as SourceName, recordedAt: row.recordedAt }
}

export async function recordCatalogSource(db: Database, source: SourceName, at: Date): Promise<void> {
  await upsertCatalogSource(db, source, at)
}

/**
 * Before `source` writes the catalog: refuses it on a catalog another source filled, and records
 * it as the catalog's source when the catalog is empty (a wiped or never filled one takes the new
 * source) or has no record yet (filled before sources were recorded, by the syncs of a test).
 */
export async function claimCatalog(db: Database, source: SourceName, now: Date): Promise<void> {
  if (await isCatalogEmpty(db)) return recordCatalogSource(db, source, now)
  const recorded = await findCatalogSource(db)
  if (!recorded) return recordCatalogSource(db, source, now)
  if (!mayShareCatalog(recorded.source, source)) throw new CatalogSourceConflict(recorded, source)
}
