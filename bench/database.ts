import { like } from 'drizzle-orm'
import Redis from 'ioredis'
import postgres from 'postgres'
import type { Database } from '../src/db/client'
import { accounts } from '../src/db/schema'
import { createAccount } from '../src/modules/auth/accounts'
import { createKey } from '../src/modules/auth/keys'
import { ROOT } from '../test/helpers/process'

/**
 * Creates the bench database if missing and seeds a demo catalog (default `small`) into it once
 * (the CLI migrates first; an already seeded database is left as it is). Returns the server's version.
 */
export async function prepareBenchDatabase(databaseUrl: string, scale = 'small'): Promise<string> {
  const url = new URL(databaseUrl)
  const name = url.pathname.slice(1)
  url.pathname = '/postgres'
  const admin = postgres(url.toString(), { max: 1, onnotice: () => {} })
  const [exists] = await admin`select 1 from pg_database where datname = ${name}`
  if (!exists) await admin.unsafe(`create database ${name}`)
  const [{ server_version }] = (await admin`show server_version`) as unknown as [{ server_version: string }]
  await admin.end()
  const seed = Bun.spawn([process.execPath, 'src/cli.ts', 'seed', '--scale', scale], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' },
    stdout: 'inherit',
    stderr: 'pipe',
  })
  const code = await seed.exited
  const stderr = await new Response(seed.stderr).text()
  if (code !== 0 && !stderr.includes('already has data')) throw new Error(`seeding failed: ${stderr}`)
  return server_version
}

/**
 * A bench run's Business keys (a fresh account each, so no run nears a quota) and the Redis key
 * prefix its service uses; `cleanup` removes the accounts and the Redis counters afterwards.
 */
export function benchAccounts(db: Database, name: string) {
  const emailPrefix = `bench-${name}-${process.pid}-`
  const redisPrefix = `tcg:bench:${process.pid}:`
  let made = 0
  return {
    redisPrefix,
    async freshKey(): Promise<string> {
      const account = await createAccount(db, { email: `${emailPrefix}${++made}@example.com`, password: 'bench password', tier: 'business' })
      return (await createKey(db, account, 'bench')).key
    },
    async cleanup(redisUrl: string) {
      await db.delete(accounts).where(like(accounts.email, `${emailPrefix}%`))
      const redis = new Redis(redisUrl)
      const keys = await redis.keys(`${redisPrefix}*`)
      if (keys.length > 0) await redis.del(...keys)
      redis.disconnect()
    },
  }
}
