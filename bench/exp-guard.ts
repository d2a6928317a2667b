import { openPostgres } from '../src/db/client'
import { spawnUntilListening } from '../test/helpers/process'
import { benchAccounts } from './database'
import { load } from './load'
const DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/tcg_bench'
const database = await openPostgres(DATABASE_URL, { max: 2 })
const accounts = benchAccounts(database.db, 'exp')
const keys = await Promise.all(Array.from({ length: 32 }, () => accounts.freshKey()))
const s = await spawnUntilListening(['bench/auth-overhead-server.ts'], { ...process.env, DATABASE_URL, REDIS_URL: process.env.EXP_REDIS ?? 'redis://127.0.0.1:6379', REDIS_KEY_PREFIX: accounts.redisPrefix, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', CONDITION_RECRAWL_PER_MINUTE: '0' })
const variants: Record<string, { path: string; headers?: Record<string, string> }[]> = {
  open: [{ path: '/bench/open/fixed' }],
  keyed: keys.map((k) => ({ path: '/bench/keyed/fixed', headers: { 'x-api-key': k } })),
  prices: keys.map((k, i) => ({ path: `/v1/cards/${i + 10}/prices`, headers: { 'x-api-key': k } })),
  games: [{ path: '/v1/games?per_page=5' }],
  hotkeyed: [{ path: '/bench/keyed/fixed' }],
  hotprices: keys.map((k, i) => ({ path: `/v1/cards/${i + 10}/prices` })),
}
const only = process.env.EXP_ONLY?.split(',')
for (const round of [0, 1, 2]) for (const [name, requests0] of Object.entries(variants)) {
  if (only && !only.includes(name)) continue
  let requests = requests0
  let maxRequests: number | undefined
  if (name.startsWith('hot')) { const k = await accounts.freshKey(); requests = requests0.map((r) => ({ ...r, headers: { 'x-api-key': k } })); maxRequests = 40000 }
  const r = await load({ url: s.url, pid: s.child.pid, requests, connections: 50, seconds: name.startsWith('hot') ? 1 : round === 0 ? 2 : 4, maxRequests })
  if (round > 0) console.log(name, r.cpuPerRequestUs.toFixed(1), r.systemPerRequestUs.toFixed(1), Math.round(r.rps), r.cpuBusy.toFixed(2))
}
const { processCpuSeconds } = await import('./database'); const c0 = processCpuSeconds(s.child.pid); await Bun.sleep(4000); console.log('idle cpu s per 4 s', processCpuSeconds(s.child.pid) - c0)
s.child.kill(); await s.child.exited
await accounts.cleanup('redis://127.0.0.1:6379'); await database.close()
