import { afterAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ROOT } from '../helpers/process'

const dataDir = mkdtempSync(join(tmpdir(), 'tcg-cli-'))
afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

async function cli(...args: string[]) {
  const child = Bun.spawn([process.execPath, 'src/cli.ts', ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', DATA_DIR: dataDir, LOG_LEVEL: 'info' },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [code, stdout, stderr] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()])
  return { code, stdout, stderr }
}

describe('bun src/cli.ts', () => {
  test('seed fills an empty catalog, logging each game', async () => {
    const { code, stdout } = await cli('seed', '--scale', 'tiny')
    expect(code).toBe(0)
    expect(stdout).toContain('seed: 57/57')
    expect(stdout).toContain('seeded 57 games')
  }, 90_000)

  test('seed refuses a catalog that has data, unless --fresh', async () => {
    const refused = await cli('seed', '--scale', 'tiny')
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain('seed --fresh')
    const fresh = await cli('seed', '--scale', 'tiny', '--fresh')
    expect(fresh.code).toBe(0)
  }, 90_000)

  test('sync --game updates only the named games', async () => {
    const { code, stdout } = await cli('sync', '--game', 'pokemon', '--game', 'yugioh')
    expect(code).toBe(0)
    expect(stdout).toContain('sync: 2/2 yugioh')
    expect(stdout).toContain('synced 2 games')
  }, 60_000)

  test('sync of an unknown game fails with its name', async () => {
    const { code, stderr } = await cli('sync', '--game', 'nope')
    expect(code).toBe(1)
    expect(stderr).toContain("Game 'nope' not found")
  }, 60_000)

  test('bad usage exits 2 with the usage text', async () => {
    const scale = await cli('seed', '--scale', 'huge')
    expect(scale.code).toBe(2)
    expect(scale.stderr).toContain('--scale must be one of: tiny, small, medium, large')
    const unknown = await cli('explode')
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toContain('Usage: bun src/cli.ts')
  })
})
