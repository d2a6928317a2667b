import { afterAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { findDailyUsage } from '../../src/modules/auth/repo'
import { utcDate } from '../../src/shared/clock'
import { accountWithKey } from '../helpers/auth'
import { freshDatabase } from '../helpers/db'
import { TEST_DATABASE_URL } from '../helpers/env'
import { eventually } from '../helpers/eventually'
import { type Listening, spawnUntilListening, stopProcess } from '../helpers/process'

// Without REDIS_URL the quota counters live in the process: a restart must not hand out the day
// again. Real server processes on the system clock, stopped and started again on the same
// database (a PGlite data directory, then PostgreSQL), spend and read quotas over HTTP.

// A first PGlite start seeds the tiny demo catalog: seconds on a quiet machine, much longer on a
// loaded one. Still a bound on a hang.
const START_MS = 300_000
const FREE_QUOTA = 100
const BASE_ENV = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DEMO_SCALE: 'tiny', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' }

const running = new Set<Listening>()
/** Registered first in each block: its servers let go of the database before it is dropped or removed. */
const stopAllAfter = () =>
  afterAll(async () => {
    for (const server of running) await stopProcess(server.child)
  }, 60_000)

async function start(env: Record<string, string>): Promise<Listening> {
  const server = await spawnUntilListening(['src/index.ts'], { ...BASE_ENV, ...env })
  running.add(server)
  return server
}

/** A clean stop: SIGTERM, which writes the node's unwritten counts out. */
async function stop(server: Listening) {
  server.child.kill('SIGTERM')
  expect(await server.child.exited).toBe(0)
  running.delete(server)
}

/** A crash: nothing is written on the way out. */
async function crash(server: Listening) {
  server.child.kill('SIGKILL')
  await server.child.exited
  running.delete(server)
}

const get = (server: Listening, path: string, key: string) => fetch(`${server.url}${path}`, { headers: { 'x-api-key': key } })
const statusOf = async (server: Listening, key: string) => (await get(server, '/v1/sets?per_page=1', key)).status

async function usageOf(server: Listening, key: string) {
  const response = await get(server, '/v1/usage', key)
  expect(response.status).toBe(200)
  return ((await response.json()) as any).data.account as Record<string, number>
}

/** The UTC day a server counts in, from the reset instant it announces. */
async function dayOf(server: Listening, key: string) {
  const response = await get(server, '/v1/usage', key)
  return utcDate(new Date(new Date(((await response.json()) as any).rate_limit.daily_reset).getTime() - 1))
}

/** Two live refreshes of condition prices with a Pro or Business key (cards never refreshed, so not cached). */
async function refreshLiveTwice(server: Listening, key: string) {
  const sets = (await (await get(server, '/v1/sets?per_page=1', key)).json()) as any
  const cards = (await (await get(server, `/v1/sets/${sets.data[0].id}/cards?per_page=2`, key)).json()) as any
  expect(cards.data).toHaveLength(2)
  for (const card of cards.data) {
    const response = await get(server, `/v1/cards/${card.id}/prices/conditions`, key)
    expect(response.status).toBe(200)
    expect(((await response.json()) as any).meta.cached).toBe(false)
  }
}

/** The restarted server counts in the day `before`: a run that crossed 00:00 UTC (the quota reset, rightly) says so. */
async function expectSameDay(before: string, server: Listening, key: string) {
  const after = await dayOf(server, key)
  if (after !== before) throw new Error(`the UTC day changed from ${before} to ${after} during the test: run it again`)
}

/** Spends a Free quota and 2 refusals, and 2 live refreshes; answers what each account read before the stop. */
async function spend(server: Listening, free: string, live: string) {
  for (let i = 0; i < FREE_QUOTA; i++) expect(await statusOf(server, free)).toBe(200)
  for (let i = 0; i < 2; i++) expect(await statusOf(server, free)).toBe(429)
  await refreshLiveTwice(server, live)
  const spent = { free: await usageOf(server, free), live: await usageOf(server, live), day: await dayOf(server, free) }
  expect(spent.free).toMatchObject({ today_requests: FREE_QUOTA, daily_remaining: 0, rejected_today: 2 })
  expect(spent.live.live_refreshes_today).toBe(2)
  return spent
}

/** The restarted server still counts the day: the Free account is refused, the live refreshes are used. */
async function expectSpent(server: Listening, free: string, live: string, spent: Awaited<ReturnType<typeof spend>>) {
  await expectSameDay(spent.day, server, free)
  expect(await usageOf(server, free)).toEqual(spent.free)
  const refused = await get(server, '/v1/sets?per_page=1', free)
  expect(refused.status).toBe(429)
  expect(((await refused.json()) as any).error.code).toBe('RATE_LIMIT_EXCEEDED')
  expect(refused.headers.get('x-ratelimit-remaining')).toBe('0')
  expect(await usageOf(server, free)).toMatchObject({ today_requests: FREE_QUOTA, rejected_today: 3 })
  expect(await usageOf(server, live)).toEqual(spent.live)
}

describe('embedded PGlite: the day survives a restart', () => {
  stopAllAfter()
  const dataDir = mkdtempSync(join(tmpdir(), 'tcg-quota-restart-'))
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

  test(
    'an exhausted Free account stays refused and the live refreshes stay used',
    async () => {
      let server = await start({ DATA_DIR: dataDir })
      const business = /API key \(Business tier\): +(\S+)/.exec(server.text.join('\n'))?.[1]
      expect(business).toMatch(/^tcg_live_/)
      // A Free account as a user makes one: sign up, then a key with the session.
      const signup = await fetch(`${server.url}/v1/auth/signup`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'restart@example.com', password: 'restart password' }),
      })
      expect(signup.status).toBe(201)
      const cookie = /^session=[^;]+/.exec(signup.headers.get('set-cookie') ?? '')![0]
      const created = await fetch(`${server.url}/v1/keys`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', cookie },
        body: JSON.stringify({ name: 'free' }),
      })
      expect(created.status).toBe(201)
      const free = ((await created.json()) as any).data.key as string

      const spent = await spend(server, free, business!)
      await stop(server)
      server = await start({ DATA_DIR: dataDir })
      await expectSpent(server, free, business!, spent)
    },
    2 * START_MS,
  )
})

describe.skipIf(!TEST_DATABASE_URL)('PostgreSQL without Redis: the day survives a restart', async () => {
  stopAllAfter()
  const database = TEST_DATABASE_URL ? await freshDatabase('seeded') : undefined
  const env = { DATABASE_URL: database?.url ?? '' }

  test(
    'after a clean stop, an exhausted Free account stays refused and the live refreshes stay used',
    async () => {
      const free = await accountWithKey(database!.db, 'free')
      const pro = await accountWithKey(database!.db, 'pro')
      let server = await start(env)
      const spent = await spend(server, free.key, pro.key)
      await stop(server)
      server = await start(env)
      await expectSpent(server, free.key, pro.key, spent)
    },
    START_MS,
  )

  test(
    'after a crash, what was written before it still counts: the rest of the quota is admitted exactly',
    async () => {
      const free = await accountWithKey(database!.db, 'free')
      let server = await start(env)
      for (let i = 0; i < 60; i++) expect(await statusOf(server, free.key)).toBe(200)
      const day = await dayOf(server, free.key)
      // The recorder writes every 5 s; a crash loses only what it had not written.
      await eventually(async () => (await findDailyUsage(database!.db, free.accountId, day)).requests === 60, {
        timeout: 20_000,
        what: 'the 60 requests written to daily_usage',
      })
      await crash(server)
      server = await start(env)
      await expectSameDay(day, server, free.key)
      const statuses = await Promise.all(Array.from({ length: 50 }, () => statusOf(server, free.key)))
      expect(statuses.filter((status) => status === 200)).toHaveLength(40)
      expect(statuses.filter((status) => status === 429)).toHaveLength(10)
      expect(await usageOf(server, free.key)).toMatchObject({ today_requests: FREE_QUOTA, rejected_today: 10 })
    },
    START_MS,
  )
})
