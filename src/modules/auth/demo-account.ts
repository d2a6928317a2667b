import { randomBytes } from 'node:crypto'
import type { Database } from '../../db/client'
import { createAccount } from './accounts'
import { createKey } from './keys'
import { countAccounts, findAccountByEmail } from './repo'
import { TIER_POLICY, TIERS, type Tier } from './tiers'

/**
 * The embedded mode's way to a first key. While the server runs it holds the data directory's lock,
 * so the CLI cannot create one; a Business account with one key, printed once to the console, lets
 * a local user try every endpoint at once. Never used with DATABASE_URL (a real deployment).
 */
export const DEMO_EMAIL = 'demo@example.com'
/** The top tier, so every endpoint can be tried; read from the tier table, which alone names tiers. */
export const DEMO_TIER: Tier = TIERS[TIERS.length - 1]!
const DEMO_KEY_NAME = 'demo (created at first start)'

export interface DemoCredentials {
  email: string
  password: string
  key: string
  keyPrefix: string
}

/** The credentials when this call created the demo account; otherwise whether one exists. */
export type DemoAccess = { created: DemoCredentials } | { created: undefined; demoAccount: boolean }

/**
 * Creates the demo account and its key in one transaction when the database has no account at
 * all, and returns the secrets (the only copy: the password is stored as argon2id, the key as
 * SHA-256). Checking "no account" rather than "just seeded" means a process that died after
 * seeding gets its account on the next start, and a database where an operator already made
 * accounts gets none.
 */
export async function createDemoAccountIfNone(db: Database): Promise<DemoAccess> {
  return db.transaction(async (tx): Promise<DemoAccess> => {
    if ((await countAccounts(tx)) > 0) return { created: undefined, demoAccount: (await findAccountByEmail(tx, DEMO_EMAIL)) !== undefined }
    const password = randomBytes(18).toString('base64url')
    // Both rows commit together or not at all.
    const account = await createAccount(tx, { email: DEMO_EMAIL, password, tier: DEMO_TIER })
    const key = await createKey(tx, account, DEMO_KEY_NAME)
    return { created: { email: account.email, password, key: key.key, keyPrefix: key.keyPrefix } }
  })
}

/** The console block shown once, at the start that created the demo account. */
export function demoBanner(demo: DemoCredentials, baseUrl: string): string {
  const rule = '='.repeat(78)
  return [
    '',
    rule,
    '  DEMO-ONLY ACCOUNT AND API KEY (embedded database, generated demo data)',
    '  Shown this once: only hashes are stored, so copy them now.',
    rule,
    `  API key (${TIER_POLICY[DEMO_TIER].label} tier):  ${demo.key}`,
    `  Demo account email:       ${demo.email}`,
    `  Demo account password:    ${demo.password}`,
    '',
    `  Interactive docs: open ${baseUrl}/docs, click "Authorize",`,
    '  paste the key under ApiKey (X-API-Key), click "Authorize" and "Close":',
    '  every request sent from the page then carries it.',
    '',
    '  curl:',
    `    curl -H 'X-API-Key: ${demo.key}' ${baseUrl}/v1/usage`,
    '',
    '  More keys later: log in with the email and password above',
    '  (POST /v1/auth/login), then POST /v1/keys. See the README.',
    rule,
    '',
  ].join('\n')
}

/** The hint for later starts: how to get a key, no secrets. */
export function keyHint(baseUrl: string, demoAccount: boolean): string {
  const who = demoAccount ? ` as ${DEMO_EMAIL} (the password was printed at the first start)` : ''
  return `need an API key? log in${who} with POST ${baseUrl}/v1/auth/login or sign up with POST /v1/auth/signup, then POST /v1/keys (see the README)`
}
