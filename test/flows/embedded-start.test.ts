import { afterAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Listening, ROOT, spawnUntilListening } from '../helpers/process'

// The quickstart path: `start` on a bare machine uses embedded PGlite, seeds itself and serves.
const dataDir = mkdtempSync(join(tmpdir(), 'tcg-embedded-'))
const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATA_DIR: dataDir, DEMO_SCALE: 'tiny', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' }

let server: Listening | undefined
afterAll(() => {
  server?.child.kill()
  rmSync(dataDir, { recursive: true, force: true })
})

describe('first start on embedded PGlite', () => {
  test('seeds the demo catalog with a log line per stage, then serves', async () => {
    const t0 = performance.now()
    server = await spawnUntilListening(['src/index.ts'], env)
    const started = server
    const seconds = (performance.now() - t0) / 1000
    expect(seconds).toBeLessThan(60)
    expect(started.lines.some((l) => l.msg?.includes('embedded database'))).toBe(true)
    expect(started.lines.filter((l) => l.stage === 'seed' && l.done !== undefined)).toHaveLength(57)
    expect(started.lines.some((l) => l.msg?.startsWith('seeded 57 games'))).toBe(true)

    const games = (await (await fetch(`${started.url}/v1/games?per_page=100`)).json()) as any
    expect(games.meta.total).toBe(57)
    const ready = await fetch(`${started.url}/ready`)
    expect(ready.status).toBe(200)
  }, 90_000)

  test('a second process on the same data directory is refused with a clear message', async () => {
    const second = Bun.spawn([process.execPath, 'src/cli.ts', 'sync'], { cwd: ROOT, env, stdout: 'pipe', stderr: 'pipe' })
    expect(await second.exited).toBe(1)
    const message = await new Response(second.stderr).text()
    expect(message).toContain(`is in use by process ${server!.child.pid}`)
  }, 30_000)
})
