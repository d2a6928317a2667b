import { dirname, join } from 'node:path'
import { Elysia } from 'elysia'
import { AppError } from '../../shared/errors'
import { buildOpenApiDocument } from './document'

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
<title>Trading Card Catalog and Price API</title>
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

/**
 * OpenAPI 3.1 at /openapi.json and Swagger UI at /docs. The UI's assets come from the installed
 * swagger-ui-dist package, so the docs page works with no internet.
 */
export function docsRoutes() {
  let document: unknown
  const plugin = new Elysia({ name: 'docs-routes' })
  return plugin
    .get(
      '/openapi.json',
      // Built on first use, once every route of the app is registered; the routes never change after.
      () => (document ??= buildOpenApiDocument(plugin)),
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
