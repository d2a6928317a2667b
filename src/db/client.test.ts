import { describe, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'drizzle-orm'
import { freshDatabase } from '../../test/helpers/db'
import { TEST_DATABASE_URL } from '../../test/helpers/env'
import { type Database, DataDirLockedError, lockDirectory, openPglite } from './client'

const EXPECTED_TABLES = [
  'accounts',
  'api_keys',
  'card_prices',
  'cards',
  'catalog_source',
  'condition_prices',
  'condition_refreshes',
  'daily_usage',
  'games',
  'job_runs',
  'marketplace_requests',
  'price_history',
  'sessions',
  'sets',
  'sync_runs',
  'webhook_attempts',
  'webhook_deliveries',
  'webhooks',
]

async function rows<T>(db: Database, query: ReturnType<typeof sql>): Promise<T[]> {
  const result = (await db.execute(query)) as unknown as T[] | { rows: T[] }
  return Array.isArray(result) ? result : result.rows
}

async function describeSchema(db: Database) {
  const tables = await rows<{ name: string }>(db, sql`select table_name as name from information_schema.tables where table_schema = 'public' order by 1`)
  const indexes = await rows<{ name: string }>(db, sql`select indexname as name from pg_indexes where schemaname = 'public' order by 1`)
  const trigram = await rows<{ s: number }>(db, sql`select similarity('charizard', 'charzard') as s`)
  return { tables: tables.map((t) => t.name), indexes: indexes.map((i) => i.name), trigram: Number(trigram[0]!.s) }
}

describe('migrations', () => {
  test(`apply on the test database (${TEST_DATABASE_URL ? 'PostgreSQL' : 'PGlite'}) with every table, index and pg_trgm`, async () => {
    const { db } = await freshDatabase('empty')
    const schema = await describeSchema(db)
    expect(schema.tables).toEqual(EXPECTED_TABLES)
    for (const index of ['cards_clean_name_trgm_idx', 'sets_game_slug_idx', 'api_keys_hash_idx', 'cards_marketplace_id_unique', 'cards_clean_name_idx']) {
      expect(schema.indexes).toContain(index)
    }
    // Search is answered from memory (docs/adr/0112-search-in-memory.md): what PostgreSQL kept only for it is gone.
    expect(schema.indexes).not.toContain('cards_clean_name_fts_idx')
    expect(schema.indexes).not.toContain('search_words_trgm_idx')
    expect(schema.trigram).toBeGreaterThan(0.3)
  }, 30_000) // the first database of a run builds its template (migrations) first

  // Booting PGlite's WASM Postgres and migrating it twice took 6.6–6.9 s on a 2-core Xeon, and up to 80 s
  // with that machine's cores shared several times over: room for a loaded machine, still a bound on a hang.
  test('apply on embedded PGlite identically', async () => {
    const embedded = await openPglite()
    try {
      await embedded.migrate()
      await embedded.migrate() // a second run finds nothing to do
      const schema = await describeSchema(embedded.db)
      const { db } = await freshDatabase('empty')
      expect(schema.tables).toEqual(EXPECTED_TABLES)
      expect(schema.indexes).toEqual((await describeSchema(db)).indexes)
    } finally {
      await embedded.close()
    }
  }, 180_000)
})

describe('the embedded data directory lock', () => {
  test('refuses a second opener while the first holds it, then lets it in', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tcg-lock-'))
    try {
      const release = lockDirectory(dir)
      expect(() => lockDirectory(dir)).toThrow(DataDirLockedError)
      release()
      lockDirectory(dir)()
      // A live other process (pid 1 is always alive) is named.
      writeFileSync(join(dir, 'pglite.lock'), '1')
      expect(() => lockDirectory(dir)).toThrow(/in use by process 1\b/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('takes over a lock left by a dead process, or by an earlier process with our pid', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tcg-lock-'))
    try {
      writeFileSync(join(dir, 'pglite.lock'), '2147483646')
      lockDirectory(dir)()
      writeFileSync(join(dir, 'pglite.lock'), String(process.pid))
      const release = lockDirectory(dir)
      expect(readFileSync(join(dir, 'pglite.lock'), 'utf8')).toBe(String(process.pid))
      release()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
