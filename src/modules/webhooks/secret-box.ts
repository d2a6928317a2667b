import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { Logger } from '../../shared/logger'

/**
 * Webhook signing secrets at rest. Signing needs the secret itself, so unlike keys and sessions it
 * cannot be hashed: it is sealed with AES-256-GCM (Web Crypto) under WEBHOOK_SECRET_KEY.
 */
export interface SecretBox {
  seal(plaintext: string): Promise<string>
  /** Throws when the sealed text was not sealed under this key or was altered. */
  open(sealed: string): Promise<string>
}

/** A key as WEBHOOK_SECRET_KEY (or its file) must hold it: 32 bytes in base64 are 44 characters ending in one '='. */
export const SECRET_KEY_BASE64 = /^[A-Za-z0-9+/]{43}=$/

const VERSION = 'v1'
const IV_BYTES = 12
/** Where the embedded default keeps the key it generated. */
export const EMBEDDED_KEY_FILE = 'webhook-secret.key'

/** A secret box under a 32-byte key given in base64. */
export async function createSecretBox(keyBase64: string): Promise<SecretBox> {
  const raw = Buffer.from(keyBase64, 'base64')
  if (raw.length !== 32) throw new Error('the webhook secret key must be 32 bytes in base64')
  const key = await crypto.subtle.importKey('raw', raw, 'AES-GCM', false, ['encrypt', 'decrypt'])
  return {
    async seal(plaintext) {
      const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES))
      const sealed = await crypto.subtle.encrypt({ name: 'AES-GCM', iv }, key, new TextEncoder().encode(plaintext))
      return `${VERSION}:${Buffer.from(iv).toString('base64')}:${Buffer.from(sealed).toString('base64')}`
    },
    async open(sealed) {
      const [version, iv, data] = sealed.split(':')
      if (version !== VERSION || !iv || !data) throw new Error('not a sealed webhook secret')
      const plain = await crypto.subtle.decrypt({ name: 'AES-GCM', iv: Buffer.from(iv, 'base64') }, key, Buffer.from(data, 'base64'))
      return new TextDecoder().decode(plain)
    },
  }
}

/**
 * The configured key (WEBHOOK_SECRET_KEY, or the file WEBHOOK_SECRET_KEY_FILE names); else, embedded (no DATABASE_URL), a key generated once into DATA_DIR and
 * kept there (mode 600); else none: the service runs, and creating a webhook answers 503.
 */
export async function loadSecretBox(
  config: { webhookSecretKey: string | undefined; webhookSecretKeyFile?: string | undefined; databaseUrl: string | undefined; dataDir: string },
  logger: Logger,
): Promise<SecretBox | undefined> {
  if (config.webhookSecretKey) return createSecretBox(config.webhookSecretKey)
  if (config.webhookSecretKeyFile) return createSecretBox(await readKeyFile(config.webhookSecretKeyFile))
  if (config.databaseUrl) {
    logger.warn(
      'WEBHOOK_SECRET_KEY is not set: webhooks cannot be created and queued alerts are not sent; set it (or WEBHOOK_SECRET_KEY_FILE) to 32 random bytes in base64 (openssl rand -base64 32)',
    )
    return undefined
  }
  const path = join(config.dataDir, EMBEDDED_KEY_FILE)
  let key = await readFile(path, 'utf8').then(
    (text) => text.trim(),
    () => undefined,
  )
  if (key === undefined) {
    key = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64')
    await mkdir(config.dataDir, { recursive: true })
    // 'wx': never overwrite a key another start wrote meanwhile (the secrets sealed under it would be lost).
    await writeFile(path, `${key}\n`, { flag: 'wx', mode: 0o600 }).catch(async (error) => {
      if (error?.code !== 'EEXIST') throw error
      key = (await readFile(path, 'utf8')).trim()
    })
    await chmod(path, 0o600)
    logger.info(`generated the webhook secret key into ${path}; keep it with the data: webhook secrets cannot be read without it`)
  }
  try {
    return await createSecretBox(key)
  } catch {
    throw new Error(`${path} does not hold a webhook secret key (32 bytes in base64); restore it, or remove it and every webhook`)
  }
}

/**
 * The key a WEBHOOK_SECRET_KEY_FILE holds, its trailing newline (as `openssl rand -base64 32 > file`
 * writes it) dropped. Errors name the file and never show what it holds: they land in logs.
 */
async function readKeyFile(path: string): Promise<string> {
  const text = await readFile(path, 'utf8').catch((error: NodeJS.ErrnoException) => {
    throw new Error(`WEBHOOK_SECRET_KEY_FILE ${path} cannot be read (${error.code ?? error.message}); it must be a file this process may read`)
  })
  const key = text.trimEnd()
  if (!SECRET_KEY_BASE64.test(key)) {
    throw new Error(
      `WEBHOOK_SECRET_KEY_FILE ${path} must hold 32 random bytes in base64 (44 characters), as \`openssl rand -base64 32\` prints; it holds ${key.length} characters (not shown)`,
    )
  }
  return key
}
