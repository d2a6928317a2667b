/**
 * The layers of a keyed read, each answering the same fixed bytes, for hot-path.bench.ts to show
 * where a request's CPU goes: `elysia` is a bare Elysia app with one route; `app` is the whole
 * service app (configured from the environment like src/index.ts, with its global hooks, every
 * route registered, the key guard and the quota store) plus routes that answer the bytes without
 * the route's own work: among the Bun routes that answer repeats before Elysia, one with a repeat
 * answer's headers (no key check, no charge), the same through the request id's step (with no
 * consumer of the record, then with the access log writing its line to stdout), and one also
 * reading the URL and the key and copying the body as a repeat does; one Elysia route open and one
 * behind the key guard.
 *
 *   bun bench/breakdown-server.ts <body file> elysia|app
 *
 * Prints one JSON "listening" line with its URL.
 */
import { Elysia } from 'elysia'
import { createApp, stopApp } from '../src/app'
import { loadConfig } from '../src/config'
import { createDeps } from '../src/deps'
import { KEY_GUARD_ERRORS } from '../src/modules/auth/guard'
import { moveSetHeaders } from '../src/modules/prices/respond'
import { lastResortErrorResponse } from '../src/shared/http'
import { createLogger } from '../src/shared/logger'
import { requestTracking } from '../src/shared/request-id'
import { accessLog } from '../src/shared/request-log'
import type { RequestDone } from '../src/shared/request-record'

const [file = '', layer = 'app'] = process.argv.slice(2)
const body = await Bun.file(file).bytes()
const CONTENT_TYPE = { 'content-type': 'application/json' }

if (layer === 'elysia') {
  const app = new Elysia().get('/bench/fixed', () => new Response(body, { headers: CONTENT_TYPE })).listen({ port: 0, hostname: '127.0.0.1' })
  console.log(JSON.stringify({ msg: 'listening', url: `http://127.0.0.1:${app.server!.port}` }))
} else {
  const deps = await createDeps(loadConfig())
  // The guard's X-RateLimit-* headers go into the Response, as snapshot answers carry them.
  const fixed = ({ set }: { set: { headers: Record<string, string | number> } }) => {
    const headers: Record<string, string> = { ...CONTENT_TYPE }
    moveSetHeaders(set, headers)
    return new Response(body, { headers })
  }
  // Typed loosely: the guard macro is registered by createApp's routes at runtime, which the app's type does not carry.
  const base: any = createApp(deps)
  const answerHeaders = () => ({
    etag: 'W/"1-bench"',
    'cache-control': 'private, no-cache',
    'x-ratelimit-limit': '50000',
    'x-ratelimit-remaining': '49999',
    'x-ratelimit-reset': '2026-01-01T00:00:00.000Z',
    'content-type': 'application/json;charset=utf-8',
  })
  // The body as a kept head and its last bytes as a tail, so the copy below sends the same bytes.
  const head = Buffer.from(body.subarray(0, -32))
  const tail = Buffer.from(body.subarray(-32)).toString('latin1')
  // Beside the hot routes, before listen reads them: a repeat answer's six headers, fixed; and
  // the same plus what no keyed repeat can skip (its URL and key read, the body copied with a tail).
  const answer = () => new Response(body, { headers: answerHeaders() })
  base.config.serve.routes['/bench/answer'] = { GET: answer }
  // The same answer through the request id's step, as the service's every request passes it; the
  // access log's line goes to this process's stdout at info whatever LOG_LEVEL says.
  const throughStep = (done: RequestDone | undefined) => {
    const step = requestTracking({ clock: deps.clock, done, routeOf: () => '/bench/answer', lastResort: lastResortErrorResponse(deps.logger) })('/bench/answer')
    return { GET: (request: Request) => step(request, answer) }
  }
  base.config.serve.routes['/bench/tracked'] = throughStep(undefined)
  base.config.serve.routes['/bench/logged'] = throughStep(accessLog(createLogger('info'), deps.clock).done)
  base.config.serve.routes['/bench/unavoidable'] = {
    GET: (request: Request) => {
      if (request.url.length === 0 || request.headers.get('x-api-key') === null) return new Response(null, { status: 401 })
      const bytes = Buffer.allocUnsafe(body.byteLength)
      head.copy(bytes)
      bytes.write(tail, head.byteLength, 'latin1')
      return new Response(bytes, { headers: answerHeaders() })
    },
  }
  const app = base
    .get('/bench/open', fixed)
    .get('/bench/keyed', fixed, { apiKey: { needs: 'catalog' }, response: KEY_GUARD_ERRORS })
    .listen({ port: 0, hostname: '127.0.0.1' })
  console.log(JSON.stringify({ msg: 'listening', url: `http://127.0.0.1:${app.server.port}` }))
  process.on('SIGTERM', async () => {
    await stopApp(app)
    await deps.close()
    process.exit(0)
  })
}
