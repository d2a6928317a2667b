import { openPostgres } from '../src/db/client'
import { spawnUntilListening } from '../test/helpers/process'
import { benchAccounts, spawnBenchService } from './database'
import { load } from './load'
const DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/tcg_bench'
const database = await openPostgres(DATABASE_URL, { max: 2 })
const accounts = benchAccounts(database.db, 'exp')
const keys = await Promise.all(Array.from({ length: 32 }, () => accounts.freshKey()))
const s = await spawnBenchService(DATABASE_URL, 'redis://127.0.0.1:6379', accounts.redisPrefix, { CONDITION_RECRAWL_PER_MINUTE: '0' })
const path = process.env.EXP_PATH ?? '/v1/prices/top-movers?period=24h'
const requests = keys.map((k) => ({ path, headers: { 'x-api-key': k } }))
const body = await (await fetch(s.url + path, { headers: { 'x-api-key': keys[0]! } })).text()
await Bun.write('/tmp/exp/body.json', body)
const bare = await spawnUntilListening(['bench/baseline-server.ts', '/tmp/exp/body.json', '0'], process.env)
for (const [name, srv] of [['service', s], ['bare', bare]] as const) {
  await load({ url: srv.url, pid: srv.child.pid, requests, connections: 50, seconds: 3 })
  const tr = Bun.spawn(['strace', '-c', '-f', '-p', String(srv.child.pid), '-o', `/tmp/exp/strace-${name}.txt`])
  const run = load({ url: srv.url, pid: srv.child.pid, requests, connections: 50, seconds: 4 })
  await Bun.sleep(3000); tr.kill('SIGINT'); await tr.exited
  const r = await run
  console.log(name, r.requests, r.cpuPerRequestUs.toFixed(1), r.systemPerRequestUs.toFixed(1))
}
s.child.kill(); bare.child.kill(); await s.child.exited
await accounts.cleanup('redis://127.0.0.1:6379'); await database.close()
