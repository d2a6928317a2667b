import { describe, expect, test } from 'bun:test'
import packageJson from '../../../package.json' with { type: 'json' }
import { freshDatabase, testLogger } from '../../../test/helpers/db'
import { startServer } from '../../../test/helpers/server'
import { declaredSource, FULL_CAPABILITIES, NO_LISTINGS } from '../../../test/helpers/sources'

// `GET /` and the document's introduction, over real HTTP.

const database = await freshDatabase('seeded')
const server = startServer({ db: database.db, redis: undefined, logger: testLogger })

const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8'

describe('GET /', () => {
  test('a browser is redirected to the docs page', async () => {
    const response = await server.get('/', { headers: { accept: BROWSER_ACCEPT }, redirect: 'manual' })
    expect(response.status).toBe(302)
    expect(new URL(response.headers.get('location')!, `${server.base}/`).href).toBe(`${server.base}/docs`)
    expect(response.headers.get('vary')).toBe('accept, Accept-Encoding')
    expect(await response.text()).toBe('')
    // Followed, it lands on Swagger UI.
    const page = await server.get('/', { headers: { accept: BROWSER_ACCEPT } })
    expect(page.url).toBe(`${server.base}/docs`)
    expect(await page.text()).toContain('swagger-ui')
  })

  test('any other client gets a JSON index whose links all answer', async () => {
    for (const accept of [undefined, '*/*', 'application/json', 'text/html;q=0, application/json']) {
      const response = await server.get('/', { headers: accept === undefined ? {} : { accept }, redirect: 'manual' })
      expect(response.status, String(accept)).toBe(200)
      expect(response.headers.get('content-type')).toStartWith('application/json')
      expect(response.headers.get('vary')).toBe('accept, Accept-Encoding')
      expect(await response.json()).toEqual({
        data: {
          name: 'Trading Card Catalog and Price API',
          version: packageJson.version,
          docs: '/docs',
          openapi: '/openapi.json',
          health: '/health',
          ready: '/ready',
          games: '/v1/games',
        },
      })
    }
    const { data } = (await (await server.get('/')).json()) as { data: Record<string, string> }
    await server.ready()
    for (const link of ['docs', 'openapi', 'health', 'ready', 'games']) {
      const response = await server.get(data[link]!)
      expect(response.status, link).toBe(200)
      await response.arrayBuffer()
    }
  })

  test('HEAD answers as GET does, without a body', async () => {
    const json = await server.get('/', { method: 'HEAD' })
    expect(json.status).toBe(200)
    expect(json.headers.get('content-type')).toStartWith('application/json')
    expect(await json.text()).toBe('')
    const browser = await server.get('/', { method: 'HEAD', headers: { accept: BROWSER_ACCEPT }, redirect: 'manual' })
    expect(browser.status).toBe(302)
    expect(browser.headers.get('location')).toBe('docs')
  })

  test('another method is a 405 naming GET', async () => {
    const response = await server.get('/', { method: 'POST' })
    expect(response.status).toBe(405)
    expect(response.headers.get('allow')).toContain('GET')
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('METHOD_NOT_ALLOWED')
  })
})

describe("the document's introduction", () => {
  const introduction = async (base: string) => ((await (await fetch(`${base}/openapi.json`)).json()) as { info: { description: string } }).info.description

  test('says plainly that demo data is generated', async () => {
    const text = await introduction(server.base)
    expect(text).toContain('**Demo data.** This server answers generated demo data')
    expect(text).toContain('Do not use these prices for anything real')
  })

  test('with a real source, says where prices come from and what that source lacks, and nothing of demo data', async () => {
    const tcgcsv = startServer({ db: database.db, redis: undefined, logger: testLogger, source: declaredSource('tcgcsv', NO_LISTINGS).source })
    const text = await introduction(tcgcsv.base)
    expect(text).not.toMatch(/demo/i)
    expect(text).toContain("Catalog and prices come from TCGplayer's public catalog, read through the TCGCSV mirror")
    expect(text).toContain('This source has no condition prices (404 `CONDITION_PRICES_UNAVAILABLE`), no sales')
    const http = startServer({ db: database.db, redis: undefined, logger: testLogger, source: declaredSource('http', FULL_CAPABILITIES).source })
    const httpText = await introduction(http.base)
    expect(httpText).not.toMatch(/demo/i)
    expect(httpText).toContain('Catalog and prices come from the marketplace this server is connected to')
    expect(httpText).not.toContain('This source has no')
  })
})
