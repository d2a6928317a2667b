import { describe, expect, test } from 'bun:test'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freshDatabase, testLogger } from '../../../test/helpers/db'
import { startServer } from '../../../test/helpers/server'

// Swagger UI at /docs in a real headless Chromium that cannot resolve any host but the server's: the
// page must render from the app's own assets and show each operation's real example.

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const haveChromium = existsSync(CHROMIUM)
if (!haveChromium) console.error(`[docs-page] ${CHROMIUM} not found: the browser test is skipped (apt-get install chromium)`)

const server = startServer({ db: (await freshDatabase('seeded')).db, redis: undefined, logger: testLogger })

/** Loads `path` in headless Chromium, lets its scripts run, and returns the resulting DOM (or takes a screenshot). */
async function render(path: string, screenshot?: string): Promise<string> {
  const profile = mkdtempSync(join(tmpdir(), 'tcg-chromium-'))
  try {
    const chromium = Bun.spawn(
      [
        CHROMIUM,
        ...['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
        `--user-data-dir=${profile}`,
        // Offline: every host but the server's fails to resolve.
        '--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1',
        '--virtual-time-budget=20000',
        '--window-size=1280,1600',
        screenshot ? `--screenshot=${screenshot}` : '--dump-dom',
        server.base + path,
      ],
      { stdout: 'pipe', stderr: 'ignore' },
    )
    const dom = await new Response(chromium.stdout).text()
    expect(await chromium.exited).toBe(0)
    return dom
  } finally {
    rmSync(profile, { recursive: true, force: true })
  }
}

const textOf = (html: string) => html.replace(/<[^>]+>/g, '').replaceAll('&quot;', '"')

describe.skipIf(!haveChromium)('the docs page in a browser', () => {
  for (const path of ['/docs', '/docs/']) {
    test(`${path} renders every operation offline, from the app's own assets and document`, async () => {
      const dom = await render(path)
      expect(dom).toContain('Trading Card Catalog and Price API')
      expect(dom.match(/class="opblock /g)?.length ?? 0).toBeGreaterThanOrEqual(31)
      expect(dom).not.toContain('Failed to load API definition')
    }, 30_000)
  }

  // Unresolvable references are the contract test's to catch; here, what a reader sees: the 200
  // example is the answer (it once showed the error envelope).
  test("an operation's 200 example is its real answer, not the error envelope", async () => {
    const dom = await render('/docs/#/Cards/getV1CardsByIdPrices')
    const operation = dom.slice(dom.indexOf('id="operations-Cards-getV1CardsByIdPrices"'))
    const ok = textOf(operation.slice(operation.indexOf('data-code="200"'), operation.indexOf('data-code="304"')))
    expect(ok).toContain('"market_price"')
    expect(ok).toContain('"rate_limit"')
    expect(ok).not.toContain('"error"')
    const refused = textOf(operation.slice(operation.indexOf('data-code="400"'), operation.indexOf('data-code="401"')))
    expect(refused).toContain('INVALID_PARAMETER')
  }, 30_000)

  test('the introduction says which calls need what and that the data is generated demo data', async () => {
    const text = textOf(await render('/docs'))
    expect(text).toContain('Demo data. This server answers generated demo data')
    expect(text).toContain('Nothing (public):')
    expect(text).toContain('The session cookie')
    expect(text).toContain('An API key in the X-API-Key header')
  }, 30_000)

  test('a closed parameter is a dropdown of its values, an open one a text box', async () => {
    const dom = await render('/docs/#/Prices/getV1PricesTop-movers')
    const operation = dom.slice(dom.indexOf('id="operations-Prices-getV1PricesTop-movers"'))
    const row = (name: string) => operation.slice(operation.indexOf(`data-param-name="${name}"`), operation.indexOf('</tr>', operation.indexOf(`data-param-name="${name}"`)))
    const options = (name: string) => [...row(name).matchAll(/<option value="([^"]*)"/g)].map((match) => match[1])
    expect(options('direction')).toEqual(expect.arrayContaining(['up', 'down']))
    expect(options('period')).toEqual(expect.arrayContaining(['24h', '7d', '30d']))
    expect(options('type')).toEqual(expect.arrayContaining(['Cards', 'Sealed Products']))
    expect(row('printing')).not.toContain('<select')
    expect(row('printing')).toContain('<input')
  }, 30_000)

  test('a screenshot of the docs page shows it rendered', async () => {
    const file = join(tmpdir(), `tcg-docs-${process.pid}.png`)
    await render('/docs/', file)
    // A blank 1280×1600 page compresses to a few KB; the rendered page is far larger.
    expect((await Bun.file(file).arrayBuffer()).byteLength).toBeGreaterThan(50_000)
    rmSync(file, { force: true })
  }, 30_000)
})
