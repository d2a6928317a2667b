import type { Database } from '../../db/client'
import { AppError } from '../../shared/errors'
import type { LoginThrottle } from './login-throttle'
import * as repo from './repo'
import { newSessionToken, sha256Hex } from './secrets'
import type { Tier } from './tiers'
import type { AccountRow } from './types'

export const SESSION_DAYS = 30
export const MIN_PASSWORD_LENGTH = 10
const PASSWORD_OPTIONS = { algorithm: 'argon2id' } as const

export const normalizeEmail = (email: string) => email.trim().toLowerCase()

const hashPassword = (password: string) => Bun.password.hash(password, PASSWORD_OPTIONS)

// Verified against when the email is unknown, so both failures take the same time and a login
// attempt cannot tell which emails have accounts.
let decoyHash: Promise<string> | undefined

const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+\.[^\s@]+$/

/** Creates an account; 409 CONFLICT when the email already has one. */
export async function createAccount(db: Database, input: { email: string; password: string; tier?: Tier }): Promise<AccountRow> {
  const email = normalizeEmail(input.email)
  // The HTTP schema checks these too; the CLI reaches this without it.
  if (!EMAIL_PATTERN.test(email)) throw new AppError('INVALID_PARAMETER', `'${email}' is not an email address`)
  if (input.password.length < MIN_PASSWORD_LENGTH) {
    throw new AppError('INVALID_PARAMETER', `The password must be at least ${MIN_PASSWORD_LENGTH} characters long`)
  }
  const account = await repo.insertAccount(db, email, await hashPassword(input.password), input.tier ?? 'free')
  if (!account) throw new AppError('CONFLICT', 'An account with this email already exists')
  return account
}

export interface Session {
  /** The cookie value: given to the client once, stored only as its SHA-256. */
  token: string
  expiresAt: Date
}

export async function startSession(db: Database, accountId: number, now: Date): Promise<Session> {
  const { raw, hash } = newSessionToken()
  const expiresAt = new Date(now.getTime() + SESSION_DAYS * 86_400_000)
  await repo.insertSession(db, accountId, hash, expiresAt)
  return { token: raw, expiresAt }
}

/** Logs out: the session's cookie no longer authenticates. */
export async function endSession(db: Database, sessionId: number, now: Date): Promise<void> {
  await repo.revokeSession(db, sessionId, now)
}

/** A sign-up from `address`: throttled per address, then `createAccount`. */
export async function signUp(deps: { db: Database; throttle: LoginThrottle }, input: { email: string; password: string; address: string }): Promise<AccountRow> {
  await deps.throttle.signup(input.address)
  return createAccount(deps.db, { email: input.email, password: input.password })
}

/** Checks the password (throttled per email and address, see login-throttle.ts) and opens a session. */
export async function login(
  deps: { db: Database; throttle: LoginThrottle },
  input: { email: string; password: string; address: string; now: Date },
): Promise<{ account: AccountRow; session: Session }> {
  const email = normalizeEmail(input.email)
  await deps.throttle.attempt(email, input.address)
  const found = await repo.findAccountByEmail(deps.db, email)
  decoyHash ??= hashPassword(crypto.randomUUID())
  const valid = await Bun.password.verify(input.password, found?.passwordHash ?? (await decoyHash))
  if (!found || !valid) throw new AppError('UNAUTHORIZED', 'Email or password is incorrect')
  await deps.throttle.succeeded(email, input.address)
  const { passwordHash: _, ...account } = found
  return { account, session: await startSession(deps.db, account.id, input.now) }
}

/** The session a cookie names, if it is live. */
export function findSession(db: Database, token: string, now: Date) {
  return repo.findSessionAccount(db, sha256Hex(token), now)
}

const noAccount = (email: string) => new AppError('NOT_FOUND', `No account with email ${email}`)

export async function setTier(db: Database, email: string, tier: Tier): Promise<AccountRow> {
  const normalized = normalizeEmail(email)
  const account = await repo.updateAccountTier(db, normalized, tier)
  if (!account) throw noAccount(normalized)
  return account
}

export async function requireAccount(db: Database, email: string): Promise<AccountRow> {
  const normalized = normalizeEmail(email)
  const found = await repo.findAccountByEmail(db, normalized)
  if (!found) throw noAccount(normalized)
  const { passwordHash: _, ...account } = found
  return account
}
