import { dirname, join } from 'node:path'
import { openapi } from '@elysiajs/openapi'
import { Elysia } from 'elysia'

const SWAGGER_DIR = dirname(Bun.resolveSync('swagger-ui-dist/package.json', import.meta.dir))
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
}

/**
 * OpenAPI JSON at /openapi.json and Swagger UI at /docs. The UI's assets are served from the
 * installed swagger-ui-dist package, so the docs page works with no internet.
 */
export function docsRoutes() {
  return new Elysia({ name: 'docs-routes' })
    .use(
      openapi({
        path: '/docs',
        specPath: '/openapi.json',
        provider: 'swagger-ui',
        exclude: { paths: ['/docs/assets/:file'] },
        documentation: {
          info: {
            title: 'Trading Card Catalog and Price API',
            version: '1.0.0',
            description:
              'Games, sets, cards and sealed products with prices per printing and condition, price history, top movers and bulk lookups. Errors use `{ error: { message, code } }`.',
          },
          tags: [
            { name: 'Games', description: 'Public catalog: no API key needed' },
            { name: 'Sets', description: 'Sets, their cards and prices (API key)' },
            { name: 'Cards', description: 'Cards, sealed products and their prices (API key)' },
            { name: 'Prices', description: 'Bulk prices and top movers, answered from the in-memory price snapshot (API key)' },
            { name: 'Bulk', description: 'Batched cards and history, set export and bulk resolve (API key; Starter, Pro or Business)' },
            { name: 'History', description: 'Price history (API key; window by tier)' },
            { name: 'Search', description: 'Full-text and fuzzy card search (API key)' },
            { name: 'Account', description: 'Sign up, log in (session cookie) and daily usage' },
            { name: 'Keys', description: 'API keys, managed with the session cookie' },
            { name: 'Health', description: 'Liveness and readiness' },
          ],
          components: {
            securitySchemes: {
              ApiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
              Session: { type: 'apiKey', in: 'cookie', name: 'session' },
            },
          },
        },
        swagger: { theme: '/docs/assets/swagger-ui.css', cdn: '/docs/assets/swagger-ui-bundle.js' },
      }),
    )
    .get(
      '/docs/assets/:file',
      ({ params, status }) => {
        const type = ASSETS[params.file]
        if (!type) return status(404, 'Not found')
        return new Response(Bun.file(join(SWAGGER_DIR, params.file)), {
          headers: { 'content-type': type, 'cache-control': 'public, max-age=86400' },
        })
      },
      { detail: { hide: true } },
    )
}
