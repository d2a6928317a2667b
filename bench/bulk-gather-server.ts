/**
 * The bulk-prices route's own work in a bare Bun.serve, for `snapshot.bench.ts` to show how much of
 * the gap to the same-bytes yardstick is the work itself and how much is the framework, the key and
 * the quota around it. It builds the price snapshot from the database as the service does and
 * answers `GET /v1/bulk/prices?ids=1,2,3` with the service's code: the ids parsed, the rows
 * selected and joined from the snapshot's serialised rows, the ETag and the service's headers, the
 * body sent the same way. No Elysia, no key, no quota (a fixed `rate_limit`), no validation beyond
 * the ids list's own.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/tcg_bench_large bun bench/bulk-gather-server.ts [port]
 */
import { openPostgres } from '../src/db/client'
import { snapshotEtag } from '../src/modules/prices/respond'
import { bulkPrices } from '../src/modules/prices/service'
import { loadSnapshotSource } from '../src/modules/snapshot/repo'
import { PriceSnapshot } from '../src/modules/snapshot/snapshot'
import { bytesResponse } from '../src/shared/bun-workarounds'

const port = Number(process.argv[2] ?? 0)
const database = await openPostgres(process.env.DATABASE_URL!, { max: 2 })
const snapshot = PriceSnapshot.build(await loadSnapshotSource(database.db), new Date())
await database.close()

const rateLimit = { daily_limit: 50_000, daily_remaining: 49_000, daily_reset: '2026-11-24T00:00:00.000Z' }
const server = Bun.serve({
  port,
  hostname: '127.0.0.1',
  async fetch(request) {
    await snapshot // the service's handler awaits the snapshot store too (a resolved promise)
    const url = request.url
    const query = url.indexOf('?ids=')
    if (query < 0) return new Response('no ids', { status: 400 })
    const body = bulkPrices(snapshot, url.slice(query + 5))
    const headers: Record<string, string> = {
      etag: snapshotEtag(snapshot, 'json', url),
      'cache-control': 'private, no-cache',
      vary: 'Accept',
      'x-ratelimit-limit': String(rateLimit.daily_limit),
      'x-ratelimit-remaining': String(rateLimit.daily_remaining),
      'x-ratelimit-reset': rateLimit.daily_reset,
      'content-type': 'application/json',
    }
    return bytesResponse(body.json('{"data":', `,"meta":${JSON.stringify(body.meta)},"rate_limit":${JSON.stringify(rateLimit)}}`), headers)
  },
})
console.log(JSON.stringify({ msg: 'listening', url: `http://127.0.0.1:${server.port}` }))
