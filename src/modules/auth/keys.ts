import type { Database } from '../../db/client'
import { AppError, notFound } from '../../shared/errors'
import type { KeyDirectory } from './key-directory'
import * as repo from './repo'
import { newApiKey, newKeyId } from './secrets'
import type { AccountRow } from './types'
import type { UsageRecorder } from './usage-recorder'

/** docs/adr/0006-api-keys.md. */
export const MAX_ACTIVE_KEYS = 25

export interface CreatedKey {
  /** The row's own id: quotas, usage and the key directory count by it; answers never show it. */
  id: number
  /** The id clients see and revoke by (docs/adr/0089-key-ids-are-opaque-strings.md). */
  publicId: string
  /** The raw key: returned once, never stored. */
  key: string
  keyPrefix: string
  name: string
  createdAt: Date
}

export async function createKey(db: Database, account: Pick<AccountRow, 'id'>, name: string): Promise<CreatedKey> {
  const key = newApiKey()
  return db.transaction(async (tx) => {
    // Lock the account row so two concurrent creates cannot both pass the limit check.
    await repo.lockAccount(tx, account.id)
    if ((await repo.countActiveKeys(tx, account.id)) >= MAX_ACTIVE_KEYS) {
      throw new AppError('CONFLICT', `An account can have at most ${MAX_ACTIVE_KEYS} active keys; revoke one first`)
    }
    const publicId = newKeyId()
    const row = await repo.insertKey(tx, { publicId, accountId: account.id, name, keyHash: key.hash, keyPrefix: key.displayPrefix })
    return { id: row.id, publicId, key: key.raw, keyPrefix: key.displayPrefix, name, createdAt: row.createdAt }
  })
}

const latest = (a: Date | null, b: Date | null) => (a && b ? (a > b ? a : b) : (a ?? b))

/** The account's keys, oldest first, with request counts not yet flushed added in. */
export async function listKeys(db: Database, accountId: number, pending: UsageRecorder['pending']) {
  const rows = await repo.listKeys(db, accountId)
  return rows.map((row) => {
    const unwritten = pending(row.id)
    return {
      ...row,
      totalRequests: row.totalRequests + unwritten.requests,
      lastUsedAt: latest(row.lastUsedAt, unwritten.lastUsedAt),
    }
  })
}

/**
 * Deactivates the key named by its public id (the row stays for usage history) and evicts it on
 * every node. Another account's key is not found, as an unknown one is.
 */
export async function revokeKey(db: Database, directory: KeyDirectory, accountId: number, publicId: string, now: Date) {
  const hash = await repo.deactivateKey(db, accountId, publicId, now)
  if (!hash) throw notFound(`API key ${publicId}`)
  await directory.forget({ kind: 'key', hash })
}
