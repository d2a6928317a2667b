import { afterEach, describe, expect, test } from 'bun:test'
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { createLogger } from '../../shared/logger'
import { createSecretBox, EMBEDDED_KEY_FILE, loadSecretBox } from './secret-box'

const KEY = Buffer.alloc(32, 1).toString('base64')
const OTHER_KEY = Buffer.alloc(32, 2).toString('base64')

function capturingLogger() {
  const lines: string[] = []
  const logger = createLogger(
    'info',
    new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk))
        done()
      },
    }),
  )
  return { lines, logger }
}

const dirs: string[] = []
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true })
})
const tempDir = async () => {
  const dir = await mkdtemp(join(tmpdir(), 'secret-box-'))
  dirs.push(dir)
  return dir
}

describe('secret box', () => {
  test('opens what it sealed; the sealed text does not contain the secret and differs every time', async () => {
    const box = await createSecretBox(KEY)
    const secret = 'whsec_c2VjcmV0IHNpZ25pbmcgbWF0ZXJpYWwgb2YgMzIgYnl0ZXM='
    const first = await box.seal(secret)
    const second = await box.seal(secret)
    expect(first).not.toBe(second)
    expect(first).not.toContain(secret)
    expect(first).not.toContain(secret.slice(6, 30))
    expect(await box.open(first)).toBe(secret)
    expect(await box.open(second)).toBe(secret)
  })

  test('refuses a sealed text that was altered, or sealed under another key', async () => {
    const box = await createSecretBox(KEY)
    const sealed = await box.seal('whsec_abc')
    const [version, iv, data] = sealed.split(':') as [string, string, string]
    const flipped = Buffer.from(data, 'base64')
    flipped[0]! ^= 1
    await expect(box.open(`${version}:${iv}:${flipped.toString('base64')}`)).rejects.toThrow()
    await expect(box.open('not sealed')).rejects.toThrow()
    await expect((await createSecretBox(OTHER_KEY)).open(sealed)).rejects.toThrow()
  })

  test('a key that is not 32 bytes is refused', async () => {
    await expect(createSecretBox(Buffer.alloc(16).toString('base64'))).rejects.toThrow(/32 bytes/)
  })
})

describe('loadSecretBox', () => {
  test('the configured key wins, and writes nothing to DATA_DIR', async () => {
    const dataDir = await tempDir()
    const box = await loadSecretBox({ webhookSecretKey: KEY, databaseUrl: undefined, dataDir }, createLogger('silent'))
    expect(await (await createSecretBox(KEY)).open(await box!.seal('x'))).toBe('x')
    await expect(stat(join(dataDir, EMBEDDED_KEY_FILE))).rejects.toThrow()
  })

  test('embedded: generates a key into DATA_DIR once (mode 600) and keeps using it', async () => {
    const dataDir = join(await tempDir(), 'nested')
    const { lines, logger } = capturingLogger()
    const first = await loadSecretBox({ webhookSecretKey: undefined, databaseUrl: undefined, dataDir }, logger)
    const sealed = await first!.seal('whsec_kept')
    const file = join(dataDir, EMBEDDED_KEY_FILE)
    expect((await stat(file)).mode & 0o777).toBe(0o600)
    const key = (await readFile(file, 'utf8')).trim()
    expect(Buffer.from(key, 'base64')).toHaveLength(32)
    expect(lines.join('')).not.toContain(key)
    const second = await loadSecretBox({ webhookSecretKey: undefined, databaseUrl: undefined, dataDir }, logger)
    expect(await second!.open(sealed)).toBe('whsec_kept')
  })

  test('embedded: a damaged key file stops the start with a message naming it', async () => {
    const dataDir = await tempDir()
    await writeFile(join(dataDir, EMBEDDED_KEY_FILE), 'not a key\n')
    await expect(loadSecretBox({ webhookSecretKey: undefined, databaseUrl: undefined, dataDir }, createLogger('silent'))).rejects.toThrow(EMBEDDED_KEY_FILE)
  })

  test('PostgreSQL without a key: no box, and a warning naming WEBHOOK_SECRET_KEY', async () => {
    const dataDir = await tempDir()
    const { lines, logger } = capturingLogger()
    const box = await loadSecretBox({ webhookSecretKey: undefined, databaseUrl: 'postgres://db/tcg', dataDir }, logger)
    expect(box).toBeUndefined()
    expect(lines.join('')).toContain('WEBHOOK_SECRET_KEY')
    await expect(stat(join(dataDir, EMBEDDED_KEY_FILE))).rejects.toThrow()
  })

  test('WEBHOOK_SECRET_KEY_FILE: the key read from the file, its trailing newline dropped; nothing written to DATA_DIR', async () => {
    const dir = await tempDir()
    const file = join(dir, 'webhook_secret_key')
    await writeFile(file, `${KEY}\n`)
    const box = await loadSecretBox({ webhookSecretKey: undefined, webhookSecretKeyFile: file, databaseUrl: 'postgres://db/tcg', dataDir: dir }, createLogger('silent'))
    expect(await (await createSecretBox(KEY)).open(await box!.seal('x'))).toBe('x')
    await expect(stat(join(dir, EMBEDDED_KEY_FILE))).rejects.toThrow()
  })

  test('WEBHOOK_SECRET_KEY_FILE unreadable or not a key: the start is refused naming the file, never showing its content', async () => {
    const dir = await tempDir()
    const load = (file: string) => loadSecretBox({ webhookSecretKey: undefined, webhookSecretKeyFile: file, databaseUrl: undefined, dataDir: dir }, createLogger('silent'))
    const missing = join(dir, 'missing')
    await expect(load(missing)).rejects.toThrow(`WEBHOOK_SECRET_KEY_FILE ${missing} cannot be read (ENOENT)`)
    await expect(load(dir)).rejects.toThrow(`WEBHOOK_SECRET_KEY_FILE ${dir} cannot be read (EISDIR)`)
    const wrong = join(dir, 'wrong')
    const content = 'hunter2-not-a-key'
    await writeFile(wrong, `${content}\n`)
    const error = await load(wrong).catch((caught: Error) => caught)
    expect((error as Error).message).toBe(
      `WEBHOOK_SECRET_KEY_FILE ${wrong} must hold 32 random bytes in base64 (44 characters), as \`openssl rand -base64 32\` prints; it holds ${content.length} characters (not shown)`,
    )
    expect((error as Error).message).not.toContain(content)
    await expect(stat(join(dir, EMBEDDED_KEY_FILE))).rejects.toThrow()
  })
})
