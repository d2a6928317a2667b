import { dirname, join } from 'node:path'
import { Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import packageJson from '../../../package.json' with { type: 'json' }
import { AppError } from '../../shared/errors'
import type { MarketplaceSource } from '../ingest/source'
import { buildOpenApiDocument, TITLE } from './document'

const SWAGGER_DIR = dirname(Bun.resolveSync('swagger-ui-dist/package.json', import.meta.dir))
const ASSETS = new Map([
  ['swagger-ui.css', 'text/css; charset=utf-8'],
  ['swagger-ui-bundle.js', 'text/javascript; charset=utf-8'],
  ['favicon-32x32.png', 'image/png'],
])

/**
 * The page at /docs and /docs/. Every URL in it is relative to where it was served from, so both
 * forms (and a deployment under a path prefix) find the assets and the document.
 */
function docsPage(root: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${TITLE}</title>
<link rel="icon" type="image/png" href="${root}docs/assets/favicon-32x32.png">
<link rel="stylesheet" href="${root}docs/assets/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="${root}docs/assets/swagger-ui-bundle.js"></script>
<script>
window.ui = SwaggerUIBundle({
  url: '${root}openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: true,
  persistAuthorization: true,
  displayRequestDuration: true,
  tryItOutEnabled: true,
})
</script>
</body>
</html>
`
}

const PAGES = { bare: docsPage(''), slash: docsPage('../') }

/** What `GET /` answers a client that is not a browser: where everything else is. */
const INDEX = {
  name: TITLE,
  version: packageJson.version,
  docs: '/docs',
  openapi: '/openapi.json',
  health: '/health',
  ready: '/ready',
  games: '/v1/games',
}

const Link = (description: string) => Type.String({ description })
const Index = Type.Object(
  {
    data: Type.Object({
      name: Type.String({ description: "The service's name" }),
      version: Type.String({ description: 'The version this server runs' }),
      docs: Link('Interactive documentation (Swagger UI)'),
      openapi: Link('The OpenAPI 3.1 document of every endpoint'),
      health: Link('Liveness: answers while the process runs'),
      ready: Link('Readiness: whether this server can serve, its data source and when prices were last synced'),
      games: Link('The list of games: public, the place to start browsing the catalog'),
    }),
  },
  { description: 'Links to the documentation, the OpenAPI document and the health checks, relative to this server' },
)

/** Whether the client names HTML in `Accept` (a browser does), not merely accepts anything (curl's wildcard). */
function wantsHtml(request: Request): boolean {
  return (request.headers.get('accept') ?? '').split(',').some((part) => {
    const [range = '', ...params] = part.split(';').map((piece) => piece.trim().toLowerCase())
    const q = params.find((param) => param.startsWith('q='))
    return range === 'text/html' && (q === undefined || Number(q.slice(2)) > 0)
  })
}

/**
 * OpenAPI 3.1 at /openapi.json, Swagger UI at /docs, and `GET /` pointing to them. The UI's
 * assets come from the installed swagger-ui-dist package, so the docs page works with no internet.
 */
export function docsRoutes(deps: { source: Pick<MarketplaceSource, 'name' | 'capabilities'> }) {
  let document: unknown
  const plugin = new Elysia({ name: 'docs-routes' })
  return plugin
    .get(
      '/',
      ({ request, set }) => {
        // A relative Location, so a deployment under a path prefix lands on its own docs page
        // (docs/adr/0087-the-service-index-at.md).
        if (wantsHtml(request)) return new Response(null, { status: 302, headers: { location: 'docs', vary: 'accept' } })
        set.headers.vary = 'accept'
        return { data: INDEX }
      },
      {
        response: {
          200: Index,
          302: Type.String({ maxLength: 0, description: 'A browser (`Accept` naming `text/html`) is sent to the docs page' }),
        },
        detail: {
          tags: ['Index'],
          summary: 'Where to start: links to the docs, the OpenAPI document and the health checks',
          description:
            'A browser, whose `Accept` header names `text/html`, is redirected to the interactive docs at `/docs`. ' +
            'Any other client gets a JSON index of links, relative to this server.',
        },
      },
    )
    .get(
      '/openapi.json',
      // Built on first use, once every route of the app is registered; the routes never change after.
      () => (document ??= buildOpenApiDocument(plugin, deps.source)),
      { detail: { hide: true } },
    )
    .get(
      '/docs',
      ({ path }) =>
        new Response(path.endsWith('/') ? PAGES.slash : PAGES.bare, {
          headers: { 'content-type': 'text/html; charset=utf-8' },
        }),
      { detail: { hide: true } },
    )
    .get(
      '/docs/assets/:file',
      ({ params }) => {
        const type = ASSETS.get(params.file)
        if (!type) throw new AppError('NOT_FOUND', `No docs asset named ${params.file}`)
        return new Response(Bun.file(join(SWAGGER_DIR, params.file)), {
          headers: { 'content-type': type, 'cache-control': 'public, max-age=86400' },
        })
      },
      { detail: { hide: true } },
    )
}
