import { afterAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'drizzle-orm'
import { openPglite } from '../../src/db/client'
import { findCatalogSource } from '../../src/modules/ingest/catalog-source'
import { systemClock } from '../../src/shared/clock'
import { freshDatabase, selectRows } from '../helpers/db'
import { TEST_DATABASE_URL } from '../helpers/env'
import { eventually } from '../helpers/eventually'
import { type Listening, ROOT, spawnUntilListening, stopProcess } from '../helpers/process'

// The quickstart path: `start` on a bare machine uses embedded PGlite, seeds itself and serves.
const dataDir = mkdtempSync(join(tmpdir(), 'tcg-embedded-'))
const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATA_DIR: dataDir, DEMO_SCALE: 'tiny', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' }

// A start seeds or opens PGlite: seconds on a quiet machine, nearly two minutes for the first start
// with the cores shared several times over. Still a bound on a hang.
const START_MS = 300_000

let server: Listening | undefined
// Stopped first: a server still shutting down writes into the directory being removed.
afterAll(async () => {
  if (server) await stopProcess(server.child)
  rmSync(dataDir, { recursive: true, force: true })
}, 30_000)

async function stop(listening: Listening) {
  listening.child.kill('SIGTERM')
  await listening.child.exited
}

interface Printed {
  key: string
  email: string
  password: string
}

/** The DEMO-ONLY block's secrets, or undefined when the start printed none. */
function printedDemo(started: Listening): Printed | undefined {
  const text = started.text.join('\n')
  const key = /API key \(Business tier\): +(\S+)/.exec(text)?.[1]
  const email = /Demo account email: +(\S+)/.exec(text)?.[1]
  const password = /Demo account password: +(\S+)/.exec(text)?.[1]
  return key && email && password ? { key, email, password } : undefined
}

const json = (body: unknown) => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
const sessionOf = (response: Response) => /^session=([^;]+)/.exec(response.headers.get('set-cookie') ?? '')?.[1]

/** A Business-only read (docs/adr/0033-tier-access.md) with this key: set export of the first set. */
async function exportFirstSet(base: string, key: string) {
  const sets = (await (await fetch(`${base}/v1/sets?per_page=1`, { headers: { 'x-api-key': key } })).json()) as any
  return fetch(`${base}/v1/export/set/${sets.data[0].id}`, { headers: { 'x-api-key': key } })
}

let firstDemo: Printed | undefined

describe('first start on embedded PGlite', () => {
  test(
    'seeds the demo catalog with a log line per stage, then serves',
    async () => {
      const t0 = systemClock.monotonic()
      server = await spawnUntilListening(['src/index.ts'], env)
      const started = server
      const seconds = (systemClock.monotonic() - t0) / 1000
      // Room for a loaded machine, yet a bound on a start that hangs or crawls (bench/README.md
      // "Budgets" holds the real one: 60 s for the `small` demo on a quiet machine).
      expect(seconds).toBeLessThan(240)
      expect(started.lines.some((l) => l.msg?.includes('embedded database'))).toBe(true)
      expect(started.lines.filter((l) => l.stage === 'seed' && l.done !== undefined)).toHaveLength(57)
      expect(started.lines.some((l) => l.msg?.startsWith('seeded 57 games'))).toBe(true)

      const games = (await (await fetch(`${started.url}/v1/games?per_page=100`)).json()) as any
      expect(games.meta.total).toBe(57)
      const ready = await fetch(`${started.url}/ready`)
      expect(ready.status).toBe(200)
    },
    START_MS,
  )

  test('prints a DEMO-ONLY Business key and login once, in plain text, and in no log line', () => {
    const started = server!
    const text = started.text.join('\n')
    expect(text).toContain('DEMO-ONLY')
    expect(text).toContain(`open ${started.url}/docs, click "Authorize"`)
    expect(text).toContain('paste the key under ApiKey (X-API-Key)')
    firstDemo = printedDemo(started)
    expect(firstDemo?.key).toMatch(/^tcg_live_[0-9A-Za-z]{32}$/)
    expect(firstDemo?.email).toBe('demo@example.com')
    expect(firstDemo!.password.length).toBeGreaterThanOrEqual(20)
    expect(text).toContain(`curl -H 'X-API-Key: ${firstDemo!.key}' ${started.url}/v1/usage`)

    const logs = JSON.stringify(started.lines)
    expect(logs).not.toContain(firstDemo!.key)
    expect(logs).not.toContain(firstDemo!.password)
    const created = started.lines.find((l) => l.msg?.includes('DEMO-ONLY'))
    expect(created).toMatchObject({ email: 'demo@example.com', tier: 'business', keyPrefix: firstDemo!.key.slice(0, 13) })
  })

  test('the printed key reads Business-only endpoints over HTTP, where a new Free key is refused', async () => {
    const { url } = server!
    const key = firstDemo!.key
    const usage = (await (await fetch(`${url}/v1/usage`, { headers: { 'x-api-key': key } })).json()) as any
    expect(usage.data.subscription.plan).toBe('business')

    expect((await exportFirstSet(url, key)).status).toBe(200)
    const sets = (await (await fetch(`${url}/v1/sets?per_page=1`, { headers: { 'x-api-key': key } })).json()) as any
    const cards = (await (await fetch(`${url}/v1/sets/${sets.data[0].id}/cards?per_page=1`, { headers: { 'x-api-key': key } })).json()) as any
    const cardId = cards.data[0].id
    const history = await fetch(`${url}/v1/bulk/history?ids=${cardId}`, { headers: { 'x-api-key': key } })
    expect(history.status).toBe(200)
    expect(Object.keys(((await history.json()) as any).data)).toEqual([String(cardId)])

    // The recipe for more keys, as a new user: sign up (Free), then POST /v1/keys with the cookie.
    const signup = await fetch(`${url}/v1/auth/signup`, json({ email: 'newcomer@example.com', password: 'newcomer password' }))
    expect(signup.status).toBe(201)
    const created = await fetch(`${url}/v1/keys`, {
      ...json({ name: 'my app' }),
      headers: { 'content-type': 'application/json', cookie: `session=${sessionOf(signup)}` },
    })
    expect(created.status).toBe(201)
    const freeKey = ((await created.json()) as any).data.key
    expect((await exportFirstSet(url, freeKey)).status).toBe(403)
  }, 60_000)

  test('the printed email and password log in, and the session creates more Business keys', async () => {
    const { url } = server!
    const login = await fetch(`${url}/v1/auth/login`, json({ email: firstDemo!.email, password: firstDemo!.password }))
    expect(login.status).toBe(200)
    expect(((await login.json()) as any).data.tier).toBe('business')
    const created = await fetch(`${url}/v1/keys`, {
      ...json({ name: 'second' }),
      headers: { 'content-type': 'application/json', cookie: `session=${sessionOf(login)}` },
    })
    expect(created.status).toBe(201)
    const body = (await created.json()) as any
    expect(body.data.tier).toBe('business')
    expect((await exportFirstSet(url, body.data.key)).status).toBe(200)
  }, 60_000)

  test(
    'a second process on the same data directory is refused with a clear message',
    async () => {
      const second = Bun.spawn([process.execPath, 'src/cli.ts', 'sync'], { cwd: ROOT, env, stdout: 'pipe', stderr: 'pipe' })
      expect(await second.exited).toBe(1)
      const message = await new Response(second.stderr).text()
      expect(message).toContain(`is in use by process ${server!.child.pid}`)
    },
    START_MS,
  )
})

describe('later starts of the same data directory', () => {
  test(
    'print no secrets, only how to get a key; the first key still works',
    async () => {
      await stop(server!)
      server = await spawnUntilListening(['src/index.ts'], env)
      expect(server.text.join('\n')).not.toContain('tcg_live_')
      expect(printedDemo(server)).toBeUndefined()
      expect(JSON.stringify(server.lines)).not.toContain(firstDemo!.password)
      const hint = server.lines.find((l) => l.msg?.startsWith('need an API key?'))
      expect(hint?.msg).toContain(`log in as demo@example.com (the password was printed at the first start) with POST ${server.url}/v1/auth/login`)
      expect(hint?.msg).toContain('then POST /v1/keys')
      expect((await exportFirstSet(server.url, firstDemo!.key)).status).toBe(200)
    },
    START_MS,
  )

  test(
    'a start that finds the catalog but no account (the first start died after seeding) creates the demo account',
    async () => {
      await stop(server!)
      const handle = await openPglite({ dataDir })
      // The first start recorded the source that filled the catalog.
      expect((await findCatalogSource(handle.db))?.source).toBe('demo')
      await handle.db.execute(sql`truncate accounts cascade`)
      await handle.close()
      server = await spawnUntilListening(['src/index.ts'], env)
      expect(server.lines.some((l) => l.msg?.startsWith('seeded'))).toBe(false)
      const demo = printedDemo(server)
      expect(demo?.key).toMatch(/^tcg_live_[0-9A-Za-z]{32}$/)
      expect(demo!.key).not.toBe(firstDemo!.key)
      expect((await exportFirstSet(server.url, demo!.key)).status).toBe(200)
      expect((await fetch(`${server.url}/v1/usage`, { headers: { 'x-api-key': firstDemo!.key } })).status).toBe(401)
    },
    START_MS,
  )
})

/** `bun src/index.ts` with every stdout line it writes collected, to its exit and not only up to listening. */
function startCollecting(extra: Record<string, string>) {
  const child = Bun.spawn([process.execPath, 'src/index.ts'], { cwd: ROOT, env: { ...env, ...extra }, stdout: 'pipe', stderr: 'pipe' })
  const lines: Record<string, any>[] = []
  const read = (async () => {
    const decoder = new TextDecoder()
    let buffered = ''
    for await (const chunk of child.stdout) {
      buffered += decoder.decode(chunk, { stream: true })
      const complete = buffered.split('\n')
      buffered = complete.pop()!
      for (const line of complete) if (line.startsWith('{')) lines.push(JSON.parse(line))
    }
  })()
  return { child, lines, read }
}

// A real deployment: no demo account, no key, nothing printed, even when it seeds an empty catalog.
describe.skipIf(!TEST_DATABASE_URL)('a start with DATABASE_URL', async () => {
  // Bun runs this callback even when the block is skipped: nothing may be set up then.
  let deployed: Listening | undefined
  let bare: ReturnType<typeof startCollecting> | undefined
  // Registered before freshDatabase's hook: the server lets go of the database before it is dropped.
  afterAll(async () => {
    if (deployed) await stopProcess(deployed.child)
    if (bare) await stopProcess(bare.child)
  }, 30_000)
  const database = TEST_DATABASE_URL ? await freshDatabase('empty') : undefined

  test(
    'with the demo source and no DEMO_DATA, leaves the empty catalog alone, says what to do and runs no jobs',
    async () => {
      bare = startCollecting({ DATABASE_URL: database!.url! })
      const { child, lines, read } = bare
      const exitedEarly = child.exited.then(async (code) => {
        throw new Error(`exited (${code}) before listening: ${await new Response(child.stderr).text()}`)
      })
      const listening = await Promise.race([
        eventually(() => lines.find((l) => l.msg?.startsWith('listening')), { timeout: START_MS - 30_000, what: 'the server listening' }),
        exitedEarly,
      ])
      exitedEarly.catch(() => {})
      const warning = lines.find((l) => l.level === 40 && l.msg?.includes('empty catalog'))
      expect(warning?.msg).toContain('set MARKETPLACE_SOURCE=tcgcsv for real prices, or run `bun src/cli.ts seed` (or start with DEMO_DATA=true)')
      const ready = await fetch(`${listening.url}/ready`)
      expect(ready.status).toBe(503)
      expect(((await ready.json()) as any).checks.data).toBe('empty')
      // Its whole output, up to the stop: the scheduled jobs were never registered.
      child.kill('SIGTERM')
      expect(await child.exited).toBe(0)
      await read
      expect(lines.some((l) => l.msg === 'shutting down')).toBe(true)
      expect(lines.some((l) => l.msg?.startsWith('scheduled jobs registered'))).toBe(false)
      const [state] = await selectRows<{ games: number; runs: number; recorded: number }>(
        database!.db,
        sql`select (select count(*)::int from games) as games, (select count(*)::int from job_runs) as runs,
                 (select count(*)::int from catalog_source) as recorded`,
      )
      expect(state).toEqual({ games: 0, runs: 0, recorded: 0 })
    },
    START_MS,
  )

  test(
    'with DEMO_DATA=true, seeds the empty catalog but creates no demo account or key and prints nothing',
    async () => {
      deployed = await spawnUntilListening(['src/index.ts'], { ...env, DATABASE_URL: database!.url, DEMO_DATA: 'true' })
      expect(deployed.lines.some((l) => l.msg?.startsWith('seeded 57 games'))).toBe(true)
      expect(deployed.text.filter((line) => line.trim() !== '')).toEqual([])
      expect(deployed.lines.some((l) => /DEMO-ONLY|API key/.test(l.msg ?? ''))).toBe(false)
      const [counts] = await selectRows<{ accounts: number; keys: number }>(
        database!.db,
        sql`select (select count(*)::int from accounts) as accounts, (select count(*)::int from api_keys) as keys`,
      )
      expect(counts).toEqual({ accounts: 0, keys: 0 })
      expect((await findCatalogSource(database!.db))?.source).toBe('demo')
    },
    START_MS,
  )
})
