import { afterAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'drizzle-orm'
import { type Database, openPglite } from '../../src/db/client'
import { findCatalogSource } from '../../src/modules/ingest/catalog-source'
import { systemClock } from '../../src/shared/clock'
import { ROOT, spawnUntilListening, stopProcess } from '../helpers/process'

const dataDir = mkdtempSync(join(tmpdir(), 'tcg-cli-'))
afterAll(() => rmSync(dataDir, { recursive: true, force: true }))
const env = { PATH: process.env.PATH ?? '', DATA_DIR: dataDir, LOG_LEVEL: 'info' }
// Each test starts `bun src/cli.ts` (on embedded PGlite) once or more: seconds on a quiet machine,
// over two minutes for a seed with the cores shared several times over. Still a bound on a hang.
const STARTS_MS = 300_000

/** `bun <script> …args` with the file's environment and `extra`, to its exit. */
async function run(script: string, args: string[], extra: Record<string, string> = {}) {
  const child = Bun.spawn([process.execPath, script, ...args], {
    cwd: ROOT,
    env: { ...env, ...extra },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [code, stdout, stderr] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()])
  return { code, stdout, stderr }
}

const cli = (...args: string[]) => run('src/cli.ts', args)

/** The embedded database, opened while no process holds it. */
async function withDatabase<T>(use: (db: Database) => Promise<T>): Promise<T> {
  const handle = await openPglite({ dataDir })
  try {
    return await use(handle.db)
  } finally {
    await handle.close()
  }
}
const recordedSource = () => withDatabase(async (db) => (await findCatalogSource(db))?.source)

describe('bun src/cli.ts', () => {
  test(
    'seed fills an empty catalog, logging each game',
    async () => {
      const { code, stdout } = await cli('seed', '--scale', 'tiny')
      expect(code).toBe(0)
      expect(stdout).toContain('seed: 57/57')
      expect(stdout).toContain('seeded 57 games')
      expect(await recordedSource()).toBe('demo')
    },
    STARTS_MS,
  )

  test(
    'seed refuses a catalog that has data, unless --fresh',
    async () => {
      const refused = await cli('seed', '--scale', 'tiny')
      expect(refused.code).toBe(1)
      expect(refused.stderr).toContain('The catalog already has data: use `seed --fresh` to replace it')
      const fresh = await cli('seed', '--scale', 'tiny', '--fresh')
      expect(fresh.code).toBe(0)
    },
    STARTS_MS,
  )

  test(
    'a catalog another source filled refuses sync, seed and a server start, naming both sources; seed --fresh takes it over',
    async () => {
      // As if the tcgcsv source had filled it: the demo source configured here may not write it.
      await withDatabase((db) => db.execute(sql`update catalog_source set source = 'tcgcsv'`))
      const conflict = /^The catalog was filled by the tcgcsv source \(recorded [^)]+\), but MARKETPLACE_SOURCE is demo: .*`bun src\/cli\.ts seed --fresh`/m
      for (const refused of [await cli('sync', '--game', 'pokemon'), await cli('seed'), await run('src/index.ts', [], { PORT: '0', HOST: '127.0.0.1' })]) {
        expect(refused.code).toBe(1)
        expect(refused.stderr).toMatch(conflict)
        // Said, not thrown: no stack trace.
        expect(refused.stderr).not.toContain('    at ')
      }
      expect(await recordedSource()).toBe('tcgcsv')
      const fresh = await cli('seed', '--scale', 'tiny', '--fresh')
      expect(fresh.code).toBe(0)
      expect(await recordedSource()).toBe('demo')
    },
    STARTS_MS,
  )

  test(
    'sync --game updates only the named games',
    async () => {
      const { code, stdout } = await cli('sync', '--game', 'pokemon', '--game', 'yugioh')
      expect(code).toBe(0)
      expect(stdout).toContain('sync: 2/2 yugioh')
      expect(stdout).toContain('synced 2 games')
    },
    STARTS_MS,
  )

  test(
    'jobs lists every job with its schedule, next run (UTC and New York) and last outcome; the CLI sync is recorded',
    async () => {
      const before = systemClock.now().getTime()
      const { code, stdout } = await cli('jobs')
      expect(code).toBe(0)
      // The table, without the JSON log lines (LOG_LEVEL=info here) around it.
      const lines = stdout
        .trim()
        .split('\n')
        .filter((line) => !line.startsWith('{'))
      expect(lines[0]).toMatch(/^JOB +SCHEDULE \(America\/New_York\) +PATTERN +NEXT RUN \(UTC\) +NEXT RUN \(NEW YORK\) +LAST RUN$/)
      const expected = [
        ['sync-tier-3', 'daily 02:00', '0 2 * * *', '02:00'],
        ['sync-tier-2', 'daily 03:00', '0 3 * * *', '03:00'],
        ['sync-tier-1', 'Monday and Thursday 04:00', '0 4 * * 1,4', '04:00'],
        ['sync-tier-0', 'Sunday 04:00', '0 4 * * 0', '04:00'],
      ]
      for (const [job, schedule, pattern, clock] of expected) {
        const line = lines.find((l) => l.startsWith(`${job} `))!
        expect(line).toContain(`${schedule}  `)
        expect(line).toContain(`  ${pattern}  `)
        const [, utc, local] = line.match(/(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z) +(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d-0[45]:00)/)!
        // The same instant twice: New York wall-clock time at the job's hour, with the offset in force then.
        expect(Date.parse(local!)).toBe(Date.parse(utc!))
        expect(local!.slice(11, 16)).toBe(clock!)
        expect(Date.parse(utc!)).toBeGreaterThan(before)
        expect(Date.parse(utc!) - before).toBeLessThanOrEqual(7 * 86_400_000)
        expect(line.endsWith('never run')).toBe(true)
      }
      const recrawl = lines.find((l) => l.startsWith('condition-recrawl '))!
      expect(recrawl).toContain('every minute')
      // The sync of the test before, recorded as a manual run.
      const manual = lines.find((l) => l.startsWith('manual-sync '))!
      expect(manual).toMatch(/ succeeded \d{4}-\d\d-\d\dT[\d:.]+Z \(for [\dT:.Z-]+, 2 games, \d+ changed\)$/)
    },
    STARTS_MS,
  )

  test(
    'sync of an unknown game fails with its name',
    async () => {
      const { code, stderr } = await cli('sync', '--game', 'nope')
      expect(code).toBe(1)
      expect(stderr).toContain("Game 'nope' not found")
      const jobs = await cli('jobs')
      expect(jobs.stdout).toMatch(/\nmanual-sync .* failed .*: Game 'nope' not found/)
    },
    STARTS_MS,
  )

  test(
    'bad usage exits 2 with the usage text',
    async () => {
      const scale = await cli('seed', '--scale', 'huge')
      expect(scale.code).toBe(2)
      expect(scale.stderr).toContain('--scale must be one of: tiny, small, medium, large')
      const unknown = await cli('explode')
      expect(unknown.code).toBe(2)
      expect(unknown.stderr).toContain('Usage: bun src/cli.ts')
      // --scale sizes the demo catalog: refused before any source is built or the database opened.
      const realSource = await run('src/cli.ts', ['seed', '--scale', 'tiny'], { MARKETPLACE_SOURCE: 'tcgcsv' })
      expect(realSource.code).toBe(2)
      expect(realSource.stderr).toContain('--scale sizes the demo catalog, but MARKETPLACE_SOURCE is tcgcsv')
    },
    STARTS_MS,
  )
})

describe('accounts and keys from the CLI', () => {
  test(
    'account:create, account:set-tier and key:create; the printed key works on the server',
    async () => {
      const created = await cli('account:create', '--email', 'Ops@Example.com', '--password', 'operator password')
      expect(created.code).toBe(0)
      expect(created.stdout).toContain('ops@example.com (free)')
      const duplicate = await cli('account:create', '--email', 'ops@example.com', '--password', 'operator password')
      expect(duplicate.code).toBe(1)
      expect(duplicate.stderr).toContain('already exists')

      const tier = await cli('account:set-tier', '--email', 'ops@example.com', '--tier', 'pro')
      expect(tier.code).toBe(0)
      expect(tier.stdout).toContain('is now on pro')

      const key = await cli('key:create', '--email', 'ops@example.com', '--name', 'store sync')
      expect(key.code).toBe(0)
      const raw = key.stdout.trim().split('\n').at(-1)!
      expect(raw).toMatch(/^tcg_live_[0-9A-Za-z]{32}$/)
      expect(key.stdout).toMatch(/^key key_[0-9a-f]{32} \(tcg_live_/m) // the id the API shows and revokes by

      const server = await spawnUntilListening(['src/index.ts'], { ...env, PORT: '0', HOST: '127.0.0.1' })
      try {
        const usage = await fetch(`${server.url}/v1/usage`, { headers: { 'x-api-key': raw } })
        expect(usage.status).toBe(200)
        const body = (await usage.json()) as any
        expect(body.data.subscription.plan).toBe('pro')
        expect(body.data.keys).toMatchObject([{ name: 'store sync', is_active: 1 }])
        expect(body.rate_limit.daily_limit).toBe(10_000)
      } finally {
        await stopProcess(server.child)
      }
    },
    STARTS_MS,
  )

  test(
    'bad account commands: missing options and unknown tiers exit 2, unknown emails and weak passwords 1',
    async () => {
      const missing = await cli('account:create', '--email', 'x@example.com')
      expect(missing.code).toBe(2)
      expect(missing.stderr).toContain('account:create needs --password')
      const badTier = await cli('account:set-tier', '--email', 'ops@example.com', '--tier', 'gold')
      expect(badTier.code).toBe(2)
      expect(badTier.stderr).toContain('--tier must be one of: free, hobby, starter, pro, business')
      const nobody = await cli('key:create', '--email', 'nobody@example.com')
      expect(nobody.code).toBe(1)
      expect(nobody.stderr).toContain('No account with email nobody@example.com')
      const weak = await cli('account:create', '--email', 'weak@example.com', '--password', 'short')
      expect(weak.code).toBe(1)
      expect(weak.stderr).toContain('at least 10 characters')
    },
    STARTS_MS,
  )
})
