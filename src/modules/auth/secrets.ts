import { randomBytes } from 'node:crypto'
import { API_KEY_PREFIX } from '../../shared/api-key-prefix'

/** docs/adr/0006-api-keys.md: the fixed live prefix, then 32 random base62 characters. */

const KEY_BODY_LENGTH = 32
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
export const API_KEY_PATTERN = /^tcg_live_[0-9A-Za-z]{32}$/
/** How much of a key the list shows so people can tell keys apart: the prefix and 4 characters. */
const DISPLAY_LENGTH = API_KEY_PREFIX.length + 4

/**
 * SHA-256 in hex: how keys and session tokens are stored and looked up. Bun's one-shot hash, not
 * node:crypto's createHash: every keyed request hashes its key, and the hasher object costs several
 * times the one-shot call.
 */
export function sha256Hex(value: string): string {
  return Bun.SHA256.hash(value, 'hex')
}

/** Uniform base62: bytes of 248 and above are dropped so no character is more likely than another. */
function randomBase62(length: number): string {
  let out = ''
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62]
    }
  }
  return out
}

export interface NewApiKey {
  raw: string
  hash: string
  displayPrefix: string
}

export function newApiKey(): NewApiKey {
  const raw = API_KEY_PREFIX + randomBase62(KEY_BODY_LENGTH)
  return { raw, hash: sha256Hex(raw), displayPrefix: raw.slice(0, DISPLAY_LENGTH) }
}

/** docs/adr/0089-key-ids-are-opaque-strings.md: `key_` and 128 random bits in lowercase hex. */
export const KEY_ID_PATTERN = /^key_[0-9a-f]{32}$/

export function newKeyId(): string {
  return `key_${randomBytes(16).toString('hex')}`
}

/** A session cookie value: 256 random bits, URL-safe. */
export function newSessionToken(): { raw: string; hash: string } {
  const raw = randomBytes(32).toString('base64url')
  return { raw, hash: sha256Hex(raw) }
}
