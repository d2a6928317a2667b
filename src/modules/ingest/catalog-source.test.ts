import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { freshDatabase, selectRows, testClock, testLogger } from '../../../test/helpers/db'
import { TEST_NOW } from '../../../test/helpers/env'
import { declaredSource, FULL_CAPABILITIES, NO_LISTINGS } from '../../../test/helpers/sources'
import type { Database } from '../../db/client'
import { createLogger } from '../../shared/logger'
import { CatalogSourceConflict, claimCatalog, findCatalogSource, mayShareCatalog, recordCatalogSource } from './catalog-source'
import { prepareCatalog, seedCatalog, syncCatalog } from './seed'
import { wipeCatalog } from './service'
import type { SourceName } from './source'

const TODAY = TEST_NOW.toISOString().slice(0, 10)
const LATER = new Date(TEST_NOW.getTime() + 3_600_000)
/** One game keeps each fill to seconds. */
const ONE_GAME = { gameSlugs: ['pokemon'] }

const recorded = async (db: Database) => (await findCatalogSource(db))?.source
const counts = async (db: Database) =>
  (
    await selectRows<{ games: number; runs: number; history_days: number; earliest: string | null }>(
      db,
      sql`select (select count(*)::int from games) as games, (select count(*)::int from sync_runs) as runs,
                 (select count(distinct date)::int from price_history) as history_days, (select min(date)::text from price_history) as earliest`,
    )
  )[0]!

async function refusal(run: Promise<unknown>): Promise<CatalogSourceConflict> {
  const error = await run.then(
    () => undefined,
    (caught: unknown) => caught,
  )
  expect(error).toBeInstanceOf(CatalogSourceConflict)
  return error as CatalogSourceConflict
}

describe('which sources may share a catalog', () => {
  test('demo and http are interchangeable; tcgcsv shares with itself only', () => {
    const pairs: [SourceName, SourceName, boolean][] = [
      ['demo', 'demo', true],
      ['demo', 'http', true],
      ['http', 'demo', true],
      ['http', 'http', true],
      ['tcgcsv', 'tcgcsv', true],
      ['demo', 'tcgcsv', false],
      ['tcgcsv', 'demo', false],
      ['http', 'tcgcsv', false],
      ['tcgcsv', 'http', false],
    ]
    for (const [recordedSource, configured, shared] of pairs)
      expect([recordedSource, configured, mayShareCatalog(recordedSource, configured)]).toEqual([recordedSource, configured, shared])
  })
})

describe('the catalog keeps the source that filled it', async () => {
  const seeded = await freshDatabase('seeded')

  test('a filled catalog without a record (filled before sources were recorded) is taken by the first claim', async () => {
    expect(await recorded(seeded.db)).toBeUndefined()
    await claimCatalog(seeded.db, 'demo', TEST_NOW)
    expect(await findCatalogSource(seeded.db)).toEqual({ source: 'demo', recordedAt: TEST_NOW })
  })

  test('another source is refused with a message naming both and the way out; the record stays', async () => {
    const conflict = await refusal(claimCatalog(seeded.db, 'tcgcsv', LATER))
    expect(conflict.message).toBe(
      `The catalog was filled by the demo source (recorded ${TEST_NOW.toISOString()}), but MARKETPLACE_SOURCE is tcgcsv: prices of the two ` +
        'would mix. Start with MARKETPLACE_SOURCE=demo to keep this catalog, or replace it with `bun src/cli.ts seed --fresh` under ' +
        'tcgcsv (it wipes the catalog, prices, history and webhooks; accounts and keys stay).',
    )
    expect(await findCatalogSource(seeded.db)).toEqual({ source: 'demo', recordedAt: TEST_NOW })
  })

  test('the same source and http, which has carried the demo catalog, are accepted without changing the record', async () => {
    await claimCatalog(seeded.db, 'demo', LATER)
    await claimCatalog(seeded.db, 'http', LATER)
    expect(await findCatalogSource(seeded.db)).toEqual({ source: 'demo', recordedAt: TEST_NOW })
  })

  test('a sync or a seed by another source is refused before it writes anything', async () => {
    const before = await counts(seeded.db)
    const { source } = declaredSource('tcgcsv', NO_LISTINGS, ONE_GAME)
    const deps = { db: seeded.db, source, clock: testClock, logger: testLogger }
    await refusal(syncCatalog(deps))
    await refusal(seedCatalog(deps))
    expect(await counts(seeded.db)).toEqual(before)
  })

  test('a server start refuses it too, whether DEMO_DATA is on or off', async () => {
    const { source } = declaredSource('tcgcsv', NO_LISTINGS, ONE_GAME)
    for (const demoData of [true, false]) {
      await refusal(prepareCatalog({ db: seeded.db, source, clock: testClock, logger: testLogger }, { demoData }))
    }
    const { source: http } = declaredSource('http', FULL_CAPABILITIES, ONE_GAME)
    expect(await prepareCatalog({ db: seeded.db, source: http, clock: testClock, logger: testLogger }, { demoData: false })).toBe('filled')
  })

  test('a record this version does not know conflicts with every source', async () => {
    await seeded.db.execute(sql`update catalog_source set source = 'someday'`)
    for (const source of ['demo', 'http', 'tcgcsv'] as const) await refusal(claimCatalog(seeded.db, source, LATER))
    await recordCatalogSource(seeded.db, 'demo', TEST_NOW)
  })
})

describe('filling an empty catalog', async () => {
  const database = await freshDatabase('empty')
  const { db } = database

  test('with the demo source and DEMO_DATA off, a start leaves it empty and says what to do', async () => {
    const lines: string[] = []
    const logger = createLogger('info', { write: (line: string) => void lines.push(line) })
    const { source } = declaredSource('demo', FULL_CAPABILITIES, ONE_GAME)
    expect(await prepareCatalog({ db, source, clock: testClock, logger }, { demoData: false })).toBe('left-empty')
    expect(await counts(db)).toEqual({ games: 0, runs: 0, history_days: 0, earliest: null })
    expect(await recorded(db)).toBeUndefined()
    const warning = lines.map((line) => JSON.parse(line)).find((line) => line.level === 40)
    expect(warning?.msg).toContain('MARKETPLACE_SOURCE=tcgcsv')
    expect(warning?.msg).toContain('`bun src/cli.ts seed`')
    expect(warning?.msg).toContain('DEMO_DATA=true')
  })

  test('with DEMO_DATA on, the start seeds it with its history and records the demo source', async () => {
    const { source } = declaredSource('demo', FULL_CAPABILITIES, ONE_GAME)
    expect(await prepareCatalog({ db, source, clock: testClock, logger: testLogger }, { demoData: true })).toBe('seeded')
    const after = await counts(db)
    expect(after.games).toBe(1)
    // History before today: backfilled (from each set's release, 2025-03-02 at the earliest).
    expect(after.history_days).toBeGreaterThan(1)
    expect(after.earliest! < TODAY).toBe(true)
    expect(await findCatalogSource(db)).toEqual({ source: 'demo', recordedAt: TEST_NOW })
  })

  test('a source without past prices fills a wiped catalog with today only, and takes its record', async () => {
    await wipeCatalog(db)
    const { source } = declaredSource('tcgcsv', NO_LISTINGS, ONE_GAME)
    // DEMO_DATA speaks of the demo source only.
    expect(await prepareCatalog({ db, source, clock: testClock, logger: testLogger }, { demoData: false })).toBe('seeded')
    const after = await counts(db)
    expect({ games: after.games, history_days: after.history_days, earliest: after.earliest }).toEqual({ games: 1, history_days: 1, earliest: TODAY })
    expect(await recorded(db)).toBe('tcgcsv')
  })

  test('the first sync of a wiped catalog records its source', async () => {
    await wipeCatalog(db)
    const { source } = declaredSource('http', FULL_CAPABILITIES, ONE_GAME)
    await syncCatalog({ db, source, clock: testClock, logger: testLogger })
    expect((await counts(db)).games).toBe(1)
    expect(await recorded(db)).toBe('http')
  })
})
