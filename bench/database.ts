import postgres from 'postgres'
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
