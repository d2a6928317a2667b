import { afterAll } from 'bun:test'
import { sql } from 'drizzle-orm'
import type { DatabaseHandle } from '../../src/db/client'
import { openPglite, openPostgres } from '../../src/db/client'
import { PRINTINGS_BY_KIND } from '../../src/modules/catalog/printings'
import { DEFAULT_BACKFILL } from '../../src/modules/ingest/normalize'
import { syncGames } from '../../src/modules/ingest/service'
import { createDemoSource } from '../../src/modules/ingest/sources/demo'
import { createLogger } from '../../src/shared/logger'
import { TEST_DATABASE_URL, TEST_NOW } from './env'

/** A migrated database with nothing in it, or with the tiny demo catalog seeded at TEST_NOW. */
export type Template = 'empty' | 'seeded'

export const testLogger = createLogger('silent')

import { testClock } from './clock'

export { testClock }
export const tinySource = () => createDemoSource({ scale: 'tiny', now: () => TEST_NOW })

export { selectRows } from '../../src/db/client'

/**
 * The test oracle for docs/adr/0011-primary-printing.md, written apart from the code under test: an ORDER BY that
 * puts a card's primary printing first among its `card_prices cp`, the game being aliased `g`.
 */
export const PRIMARY_PRINTING_FIRST = sql.raw(
  "case when cp.printing = 'Normal' then 0 else 1 end, array_position(case g.kind " +
    Object.entries(PRINTINGS_BY_KIND)
      .map(([kind, names]) => `when '${kind}' then array[${names.map((name) => `'${name}'`).join(',')}]`)
      .join(' ') +
    ' end, cp.printing)',
)

type Built = { kind: 'postgres'; name: string } | { kind: 'pglite'; dump: Blob }
const templates = new Map<Template, Promise<Built>>()

async function fill(handle: DatabaseHandle, template: Template) {
  await handle.migrate()
  if (template === 'seeded') {
    await syncGames({ db: handle.db, source: tinySource(), clock: testClock, logger: testLogger }, { backfill: DEFAULT_BACKFILL })
  }
}

function urlFor(database: string): string {
  const url = new URL(TEST_DATABASE_URL!)
  url.pathname = `/${database}`
  return url.toString()
}

async function admin<T>(run: (sql: import('postgres').Sql) => Promise<T>): Promise<T> {
  const { default: postgres } = await import('postgres')
  const client = postgres(TEST_DATABASE_URL!, { max: 1, onnotice: () => {} })
  try {
    return await run(client)
  } finally {
    await client.end({ timeout: 5 })
  }
}

async function build(template: Template): Promise<Built> {
  if (!TEST_DATABASE_URL) {
    const handle = await openPglite()
    await fill(handle, template)
    const dump = await handle.dumpDataDir!()
    await handle.close()
    return { kind: 'pglite', dump }
  }
  // One template per test process: a stale template from an older schema is never reused.
  const name = `tcg_tpl_${template}_${process.pid}`
  await admin(async (sql) => {
    await sql.unsafe(`drop database if exists ${name}`)
    await sql.unsafe(`create database ${name}`)
  })
  const handle = await openPostgres(urlFor(name), { max: 4 })
  await fill(handle, template)
  await handle.close()
  return { kind: 'postgres', name }
}

/** Drops this process's templates; test/setup.ts calls it once after every file has run. */
export async function dropTemplates() {
  for (const [template, built] of templates) {
    templates.delete(template)
    const source = await built.catch(() => undefined)
    if (source?.kind === 'postgres') await admin((sql) => sql.unsafe(`drop database if exists ${source.name}`))
  }
}

let counter = 0

/** Closing and dropping a database waits on PostgreSQL, which a loaded machine slows. */
const CLEANUP_MS = 60_000

/** A test database; `url` (PostgreSQL only) lets child processes (`DATABASE_URL`) open the same one. */
export type TestDatabase = DatabaseHandle & { url?: string }

/**
 * A private database for one test file, cloned from a template, dropped after the file's tests.
 * Tests may write freely: nothing leaks into other files.
 */
export async function freshDatabase(template: Template = 'seeded'): Promise<TestDatabase> {
  let built = templates.get(template)
  if (!built) templates.set(template, (built = build(template)))
  const source = await built
  if (source.kind === 'pglite') {
    const handle = await openPglite({ loadDataDir: source.dump })
    afterAll(() => handle.close(), CLEANUP_MS)
    return handle
  }
  const name = `tcg_test_${process.pid}_${++counter}`
  await admin((sql) => sql.unsafe(`create database ${name} template ${source.name}`))
  const url = urlFor(name)
  const handle = await openPostgres(url, { max: 8 })
  afterAll(async () => {
    await handle.close()
    // Forced: a child process a test killed may still hold a connection the server has not reaped.
    await admin((sql) => sql.unsafe(`drop database if exists ${name} with (force)`))
  }, CLEANUP_MS)
  return { ...handle, url }
}
