import { describe, expect, test } from 'bun:test'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'drizzle-orm'
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
})
