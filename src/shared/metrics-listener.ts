import type { Logger } from './logger'
import type { Metrics } from './metrics'

/**
 * The metrics' own listener (METRICS_HOST:METRICS_PORT), apart from the API's port so the public
 * never reaches it unless an operator opens it: `GET /metrics` answers the exposition, anything else 404.
 */
export function serveMetrics(metrics: Pick<Metrics, 'exposition'>, options: { hostname: string; port: number; logger: Logger }) {
  return Bun.serve({
    hostname: options.hostname,
    port: options.port,
    development: false,
    async fetch(request) {
      const { pathname } = new URL(request.url)
      if (pathname !== '/metrics' || (request.method !== 'GET' && request.method !== 'HEAD')) {
        return new Response('Not found: the metrics are at GET /metrics\n', { status: 404, headers: { 'content-type': 'text/plain; charset=utf-8' } })
      }
      const { text, contentType } = await metrics.exposition()
      return new Response(text, { headers: { 'content-type': contentType } })
    },
    // A scrape that fails shows as a failed target in Prometheus; the reason goes to the log.
    error(error) {
      options.logger.error({ err: error }, 'metrics scrape failed')
      return new Response('metrics unavailable\n', { status: 503, headers: { 'content-type': 'text/plain; charset=utf-8' } })
    },
  })
}
