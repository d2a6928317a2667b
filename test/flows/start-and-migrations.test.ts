import { afterAll, describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { sql } from 'drizzle-orm'
import { MIGRATION_LOCK } from '../../src/db/client'
import { systemClock, withTimeout } from '../../src/shared/clock'
import { freshDatabase, selectRows } from '../helpers/db'
import { TEST_DATABASE_URL } from '../helpers/env'
import { eventually } from '../helpers/eventually'
import { ROOT } from '../helpers/process'

// Processes starting together on one PostgreSQL database: migrations one at a time under their
// advisory lock, and a start held there (by this test holding the lock) stopped by SIGTERM.

type Child = ReturnType<typeof Bun.spawn>

/** Every stdout line of `child`, JSON log lines parsed, read as they come. */
function linesOf(child: Child): Record<string, any>[] {
  const lines: Record<string, any>[] = []
  void (async () => {
    let buffered = ''
    for await (const chunk of child.stdout as ReadableStream<Uint8Array>) {
      buffered += new TextDecoder().decode(chunk)
      const parts = buffered.split('\n')
      buffered = parts.pop()!
      for (const raw of parts) lines.push(raw.startsWith('{') ? JSON.parse(raw) : { text: raw })
    }
  })()
  return lines
}

const children: Child[] = []
// Registered before the database, so the processes are gone before its own clean-up drops it.
afterAll(async () => {
  for (const child of children) child.kill('SIGKILL')
  await Promise.all(children.map((child) => child.exited))
}, 30_000)
const database = TEST_DATABASE_URL ? await freshDatabase('empty') : undefined

describe.skipIf(!TEST_DATABASE_URL)('starting on one PostgreSQL database', () => {
  const spawn = (args: string[], env: Record<string, string> = {}, prefix: string[] = []) => {
    const child = Bun.spawn([...prefix, process.execPath, ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, DATABASE_URL: database!.url, METRICS_PORT: '0', LOG_LEVEL: 'info', ...env },
      stdout: 'pipe',
      stderr: 'pipe',
    })
    children.push(child)
    return child
  }
  const exitOf = async (child: Child) => {
    const [code, stderr] = await withTimeout(systemClock, Promise.all([child.exited, new Response(child.stderr as ReadableStream).text()]), 60_000, () => new Error('no exit'))
    return { code, signal: child.signalCode, stderr }
  }
  /** Connections of other processes that have asked for the migration lock (and wait, asking again). */
  const waiters = async () =>
    (
      await selectRows<{ waiting: number }>(
        database!.db,
        sql`select count(*)::int as waiting from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and query like 'select pg_try_advisory_lock(%'`,
      )
    )[0]!.waiting
  /** The migration lock taken by this test on a connection of its own, as another node migrating would hold it. */
  const holdMigrationLock = async () => {
    const { default: postgres } = await import('postgres')
    const holder = postgres(database!.url!, { max: 1, onnotice: () => {} })
    await holder`select pg_advisory_lock(${MIGRATION_LOCK.classId}, ${MIGRATION_LOCK.objectId})`
    return () => holder.end({ timeout: 5 })
  }

  test('two `cli migrate` at once on an empty database: both succeed, one after the other, and the schema is complete', async () => {
    // Nothing migrated, not even the extension.
    await database!.db.execute(sql.raw('drop schema if exists drizzle cascade; drop schema public cascade; create schema public'))
    // Held first, so both processes are certainly waiting at the same point when it is let go.
    const release = await holdMigrationLock()
    const migrators = [spawn(['src/cli.ts', 'migrate']), spawn(['src/cli.ts', 'migrate'])]
    await eventually(async () => (await waiters()) === 2, { timeout: 30_000, what: 'both migrations asking for the lock' })
    await release()
    for (const migrator of migrators) expect(await exitOf(migrator)).toMatchObject({ code: 0, signal: null })
    const journal = JSON.parse(readFileSync(join(ROOT, 'drizzle/meta/_journal.json'), 'utf8')) as { entries: unknown[] }
    const [applied] = await selectRows<{ count: number }>(database!.db, sql`select count(*)::int as count from drizzle.__drizzle_migrations`)
    expect(applied!.count).toBe(journal.entries.length)
    const [tables] = await selectRows<{ cards: string | null; accounts: string | null }>(
      database!.db,
      sql`select to_regclass('public.cards')::text as cards, to_regclass('public.accounts')::text as accounts`,
    )
    expect(tables).toEqual({ cards: 'cards', accounts: 'accounts' })
  }, 120_000)

  const NODE_ENV = { HOST: '127.0.0.1', PORT: '0', DEMO_DATA: 'true', DEMO_SCALE: 'tiny', CONDITION_RECRAWL_PER_MINUTE: '0' }
  const startWaitingForTheLock = async (node: Child) => {
    const lines = linesOf(node)
    await eventually(() => lines.some((line) => line.msg?.startsWith('another process is applying the migrations')), { timeout: 60_000, what: 'the start waiting for the lock' })
    expect(await waiters()).toBe(1)
    return lines
  }

  test('SIGTERM during the start (held waiting for the migration lock) stops it: exit code 0, its connections closed', async () => {
    const release = await holdMigrationLock()
    try {
      const node = spawn(['src/index.ts'], NODE_ENV)
      const lines = await startWaitingForTheLock(node)
      node.kill('SIGTERM')
      expect(await exitOf(node)).toEqual({ code: 0, signal: null, stderr: '' })
      expect(lines.map((line) => line.msg)).toContain('stopped during the start')
      expect(lines.some((line) => line.msg?.startsWith('listening'))).toBe(false)
      // Its connection went with it.
      await eventually(async () => (await waiters()) === 0, { what: 'its connection gone' })
    } finally {
      await release()
    }
  }, 120_000)

  // A container without an init: the kernel delivers SIGTERM to a namespace's PID 1 only if it has a handler.
  const pidNamespaces = Bun.spawnSync(['unshare', '--user', '--map-root-user', '--pid', '--fork', 'true'], { stderr: 'ignore' }).exitCode === 0
  test.skipIf(!pidNamespaces)(
    'as PID 1 of its own PID namespace, SIGTERM during the start still stops it with exit code 0',
    async () => {
      const release = await holdMigrationLock()
      try {
        const wrapper = spawn(['src/index.ts'], NODE_ENV, ['unshare', '--user', '--map-root-user', '--pid', '--fork', '--kill-child'])
        const lines = await startWaitingForTheLock(wrapper)
        // unshare's only child is the bun that is PID 1 inside.
        const [bun] = readFileSync(`/proc/${wrapper.pid}/task/${wrapper.pid}/children`, 'utf8').trim().split(' ').map(Number)
        process.kill(bun!, 'SIGTERM')
        expect(await exitOf(wrapper)).toEqual({ code: 0, signal: null, stderr: '' })
        expect(lines.map((line) => line.msg)).toContain('stopped during the start')
      } finally {
        await release()
      }
    },
    120_000,
  )
})
