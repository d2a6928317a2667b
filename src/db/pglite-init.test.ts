import { describe, expect, test } from 'bun:test'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { sql } from 'drizzle-orm'
import { eventually } from '../../test/helpers/eventually'
import { openPglite, selectRows } from './client'

// A loaded CI machine runs initdb in the child for tens of seconds; still a bound on a hang.
const INIT_MS = 180_000

describe('an embedded data directory without a cluster', () => {
  test(
    'gets one from a child process, whose exit is awaited and whose peak RSS is reported; later openings reuse it',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'tcg-pglite-init-'))
      try {
        const first = await openPglite({ dataDir: dir })
        try {
          expect(first.created?.peakRssBytes).toBeGreaterThan(0)
          expect(existsSync(join(dir, 'pg', 'PG_VERSION'))).toBe(true)
          expect(existsSync(join(dir, 'pg.init'))).toBe(false)
          await first.db.execute(sql`create table kept (n int)`)
          await first.db.execute(sql`insert into kept values (7)`)
        } finally {
          await first.close()
        }
        const again = await openPglite({ dataDir: dir })
        try {
          expect(again.created).toBeUndefined()
          expect(await selectRows(again.db, sql`select n from kept`)).toEqual([{ n: 7 }])
        } finally {
          await again.close()
        }
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    },
    INIT_MS,
  )

  test(
    'left half-made by a start that died (a pg without PG_VERSION, a stale pg.init) is created afresh',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'tcg-pglite-init-'))
      try {
        mkdirSync(join(dir, 'pg', 'base'), { recursive: true })
        mkdirSync(join(dir, 'pg.init'))
        writeFileSync(join(dir, 'pg.init', 'PG_VERSION'), 'not a cluster')
        const handle = await openPglite({ dataDir: dir })
        try {
          expect(handle.created).toBeDefined()
          expect(readFileSync(join(dir, 'pg', 'PG_VERSION'), 'utf8').trim()).toMatch(/^\d+$/)
          expect(await selectRows(handle.db, sql`select 1 as one`)).toEqual([{ one: 1 }])
        } finally {
          await handle.close()
        }
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    },
    INIT_MS,
  )

  test(
    'whose child fails to write its files (exits non-zero): the open fails naming the exit and the cause, leaves nothing half-made and no lock; the next open creates it',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'tcg-pglite-init-'))
      try {
        // A file size limit, inherited by the child: initdb writes PG_VERSION and more, then a write
        // past the limit fails and PGlite aborts, leaving pg.init half-made.
        const opener = `import { openPglite } from ${JSON.stringify(resolve(import.meta.dir, 'client.ts'))}
try { await openPglite({ dataDir: ${JSON.stringify(dir)} }); process.exit(0) } catch (error) { console.error(error.message); process.exit(3) }`
        const child = Bun.spawn(['sh', '-c', 'ulimit -f 256 && exec "$0" -e "$1"', process.execPath, opener], { stdout: 'ignore', stderr: 'pipe' })
        const [code, stderr] = await Promise.all([child.exited, new Response(child.stderr).text()])
        expect(code).toBe(3)
        expect(stderr).toContain(`could not create the embedded database in ${join(dir, 'pg')}: the process creating it (src/db/pglite-init.ts) exited with code 1`)
        expect(stderr).toContain('a failed write')
        expect(readdirSync(dir)).toEqual([])
        await expectCreatedAfresh(dir)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    },
    INIT_MS,
  )

  test(
    'whose child is killed by a signal midway: the open fails naming the signal, leaves nothing half-made and no lock; the next open creates it',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'tcg-pglite-init-'))
      try {
        const opening = openPglite({ dataDir: dir })
        const failed = opening.then(
          () => undefined,
          (error: Error) => error,
        )
        // The child is ours and builds in pg.init (it exists from the child's start until initdb's end).
        const pid = await eventually(() => existsSync(join(dir, 'pg.init')) && initChildOf(process.pid, dir), { timeout: INIT_MS, what: 'the child creating the cluster' })
        process.kill(pid, 'SIGKILL')
        const error = await failed
        expect(error?.message).toBe(`could not create the embedded database in ${join(dir, 'pg')}: the process creating it (src/db/pglite-init.ts) was killed by SIGKILL`)
        expect(readdirSync(dir)).toEqual([])
        await expectCreatedAfresh(dir)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    },
    INIT_MS,
  )
})

/** The pid of `parent`'s child running src/db/pglite-init.ts for `dir`, from /proc; undefined when there is none. */
function initChildOf(parent: number, dir: string): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0')
      if (ppid === parent && args.some((arg) => arg.endsWith('pglite-init.ts')) && args.includes(join(dir, 'pg.init'))) return Number(entry)
    } catch {
      // The process ended meanwhile.
    }
  }
  return undefined
}

/** A failed creation left the directory as a next start needs it: that start creates the cluster, which works. */
async function expectCreatedAfresh(dir: string) {
  const handle = await openPglite({ dataDir: dir })
  try {
    expect(handle.created).toBeDefined()
    expect(await selectRows(handle.db, sql`select 1 as one`)).toEqual([{ one: 1 }])
  } finally {
    await handle.close()
  }
}
