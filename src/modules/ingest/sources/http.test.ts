import { afterAll, describe, expect, test } from 'bun:test'
import { type FakeMarketplace, type Fault, startFakeMarketplace } from '../../../../test/fixtures/fake-marketplace'
import { fakeClock } from '../../../../test/helpers/clock'
import { freshDatabase, testLogger } from '../../../../test/helpers/db'
import { TEST_NOW } from '../../../../test/helpers/env'
import { eventually } from '../../../../test/helpers/eventually'
import { spawnUntilListening } from '../../../../test/helpers/process'
import { loadConfig } from '../../../config'
import { marketplaceSource } from '../../../deps'
import { systemClock } from '../../../shared/clock'
import type { MarketplaceSource, SourceListing, SourcePrice, SourceProduct } from '../source'
import { createDemoSource } from './demo'
import { createHttpSource, type Fetch, MarketplaceError, type MarketplaceErrorKind } from './http'

const TODAY = TEST_NOW.toISOString().slice(0, 10)
const TIMEOUT_MS = 250
/**
 * The sources' deadlines run on fake clocks (docs/testing.md "Time"): a request times out when a
 * test moves its clock past TIMEOUT_MS, never because a loaded machine was slow. This one no test
 * moves: requests on it are never cut short.
 */
const unhurried = fakeClock()

const demo = createDemoSource({ scale: 'tiny', now: () => TEST_NOW })

async function started(options?: Parameters<typeof startFakeMarketplace>[0]): Promise<FakeMarketplace> {
  const market = await startFakeMarketplace(options)
  afterAll(() => market.stop(), 30_000)
  return market
}

/** What went wrong, how long it took to go wrong, or the answer if nothing did. */
async function outcome<T>(call: () => Promise<T>): Promise<{ error?: MarketplaceError; ms: number; value?: T }> {
  const begun = systemClock.monotonic()
  try {
    const value = await call()
    return { value, ms: systemClock.monotonic() - begun }
  } catch (error) {
    if (!(error instanceof MarketplaceError)) throw error
    return { error, ms: systemClock.monotonic() - begun }
  }
}

async function expectFailure(call: () => Promise<unknown>, kind: MarketplaceErrorKind, path: string): Promise<MarketplaceError> {
  const { error, value } = await outcome(call)
  expect(value).toBeUndefined()
  expect(error?.kind).toBe(kind)
  expect(error?.path).toBe(path)
  expect(error?.message).toStartWith(`marketplace GET ${path}: `)
  return error!
}

/** One call of every method, each with its protocol path. */
const everyMethod = (source: MarketplaceSource, ids: { categoryId: number; groupId: number; productId: number }): [() => Promise<unknown>, string][] => [
  [() => source.listGames(), '/categories'],
  [() => source.listSets(ids.categoryId), `/categories/${ids.categoryId}/groups`],
  [() => source.listProducts(ids.groupId), `/groups/${ids.groupId}/products`],
  [() => source.listPrices(ids.groupId, TODAY), `/groups/${ids.groupId}/prices?date=${TODAY}`],
  [() => source.listSales(ids.groupId, TODAY), `/groups/${ids.groupId}/sales?date=${TODAY}`],
  [() => source.listListings(ids.productId), `/products/${ids.productId}/listings`],
]

const games = await demo.listGames()
const pokemon = games.find((game) => game.slug === 'pokemon')!
const [firstSet] = await demo.listSets(pokemon.categoryId)
const firstProducts = await demo.listProducts(firstSet!.groupId)
const ids = { categoryId: pokemon.categoryId, groupId: firstSet!.groupId, productId: firstProducts[3]!.productId }

describe('http source against a healthy marketplace', async () => {
  const market = await started()
  const { db } = await freshDatabase('empty')
  const source = createHttpSource({ url: market.url, timeoutMs: 2_000, clock: unhurried })

  test('every method answers exactly what the source behind the marketplace answers', async () => {
    expect(await source.listGames()).toEqual(games)
    for (const game of games.slice(0, 8)) {
      const sets = await demo.listSets(game.categoryId)
      expect(await source.listSets(game.categoryId)).toEqual(sets)
      for (const set of sets) {
        const products = await demo.listProducts(set.groupId)
        expect(await source.listProducts(set.groupId)).toEqual(products)
        expect(await source.listPrices(set.groupId, TODAY)).toEqual(await demo.listPrices(set.groupId, TODAY))
        expect(await source.listSales(set.groupId, '2026-11-18')).toEqual(await demo.listSales(set.groupId, '2026-11-18'))
        for (const product of products.slice(0, 4)) {
          expect(await source.listListings(product.productId)).toEqual(await demo.listListings(product.productId))
        }
      }
    }
    // Optional fields cross as they are: images where the source has them, absent where not; a sealed product's number null.
    expect(games.some((game) => game.logoUrl === undefined) && games.some((game) => game.logoUrl !== undefined)).toBe(true)
    expect(firstProducts.some((product) => product.number === null)).toBe(true)
    expect(await source.listProducts(firstSet!.groupId)).toEqual(firstProducts)
    // Unknown ids and days without data are empty answers, not failures.
    expect(await source.listSets(999)).toEqual([])
    expect(await source.listPrices(ids.groupId, '2001-01-01')).toEqual([])
    expect(await source.listListings(5)).toEqual({ listings: [], conditionCounts: {} })
  })

  test('the marketplace counts the requests it receives, per path', async () => {
    const before = market.requests()
    const listingsBefore = market.requests(`/products/${ids.productId}/listings`)
    await source.listListings(ids.productId)
    await source.listListings(ids.productId)
    await source.listGames()
    expect(market.requests(`/products/${ids.productId}/listings`)).toBe(listingsBefore + 2)
    expect(market.requests()).toBe(before + 3)
  })

  test('a base URL with a trailing slash or a path prefix is joined without doubling slashes', async () => {
    expect(await createHttpSource({ url: `${market.url}/`, timeoutMs: 2_000, clock: unhurried }).listGames()).toEqual(games)
    await expectFailure(() => createHttpSource({ url: `${market.url}/api`, timeoutMs: 2_000, clock: unhurried }).listGames(), 'status', '/categories')
  })

  test('MARKETPLACE_URL makes the service read this marketplace; without it the demo answers', async () => {
    const deps = { db, clock: unhurried, logger: testLogger }
    const viaConfig = marketplaceSource(loadConfig({ MARKETPLACE_URL: market.url, MARKETPLACE_TIMEOUT_MS: '500' }), deps)
    const before = market.requests('/categories')
    expect(await viaConfig.listGames()).toEqual(games)
    expect(market.requests('/categories')).toBe(before + 1)
    const builtIn = marketplaceSource(loadConfig({ DEMO_SCALE: 'tiny' }), deps)
    expect(await builtIn.listListings(ids.productId)).toEqual(await demo.listListings(ids.productId))
    expect(market.requests('/categories')).toBe(before + 1)
  })
})

describe('http source against a failing marketplace', async () => {
  const market = await started()
  const clock = fakeClock()
  const source = createHttpSource({ url: market.url, timeoutMs: TIMEOUT_MS, clock })
  /** Sends `call`, and once the marketplace has the request moves the clock `ms` on; then how the call ended. */
  const advancedBy = async <T>(ms: number, call: () => Promise<T>) => {
    const before = market.requests()
    const ended = outcome(call)
    await eventually(() => market.requests() > before, { what: 'the request at the marketplace' })
    await clock.advance(ms)
    return ended
  }
  const withFault = async (fault: Fault, check: () => Promise<void>) => {
    market.setFault(fault)
    try {
      await check()
    } finally {
      market.setFault({ kind: 'none' })
    }
  }

  test('slower than the timeout: every method fails as a timeout when it runs out, not before', async () => {
    // The marketplace's 10 s (real) are far beyond the moment the test moves the clock.
    await withFault({ kind: 'slow', delayMs: 10_000 }, async () => {
      for (const [call, path] of everyMethod(source, ids)) {
        const before = market.requests()
        const ended = outcome(call)
        await eventually(() => market.requests() > before, { what: 'the request at the marketplace' })
        await clock.advance(TIMEOUT_MS - 1)
        expect(clock.pending()).toBe(1) // its deadline still waiting
        await clock.advance(1)
        const { error } = await ended
        expect(error?.kind).toBe('timeout')
        expect(error?.path).toBe(path)
        expect(clock.pending()).toBe(0)
      }
    })
  })

  test('slow but within the timeout: the answer arrives whole', async () => {
    await withFault({ kind: 'slow', delayMs: 60 }, async () => {
      const { value } = await advancedBy(TIMEOUT_MS - 1, () => source.listListings(ids.productId))
      expect(value).toEqual(await demo.listListings(ids.productId))
    })
  })

  test('a marketplace that never answers: a timeout when the timeout runs out', async () => {
    await withFault({ kind: 'hang' }, async () => {
      for (const [call, path] of everyMethod(source, ids)) {
        const { error } = await advancedBy(TIMEOUT_MS, call)
        expect(error?.kind).toBe('timeout')
        expect(error?.path).toBe(path)
      }
    })
  })

  test('an error status fails as status, naming the path and the status', async () => {
    for (const status of [500, 502, 503, 404, 429]) {
      await withFault({ kind: 'status', status }, async () => {
        for (const [call, path] of everyMethod(source, ids)) {
          const error = await expectFailure(call, 'status', path)
          expect(error.status).toBe(status)
          expect(error.message).toContain(String(status))
        }
      })
    }
  })

  test('redirects are not followed', async () => {
    await withFault({ kind: 'status', status: 302 }, async () => {
      const before = market.requests('/categories')
      const error = await expectFailure(() => source.listGames(), 'status', '/categories')
      expect(error.status).toBe(302)
      expect(error.message).toContain('redirects are not followed')
      expect(market.requests('/categories')).toBe(before + 1)
    })
  })

  test('a body that is not JSON fails as malformed', async () => {
    await withFault({ kind: 'malformed' }, async () => {
      for (const [call, path] of everyMethod(source, ids)) expect((await expectFailure(call, 'malformed', path)).message).toContain('not valid JSON')
    })
  })

  test('junk values in the right envelope are refused by every method, with the place they were found', async () => {
    await withFault({ kind: 'junk' }, async () => {
      for (const [call, path] of everyMethod(source, ids)) expect((await expectFailure(call, 'malformed', path)).message).toContain('answer refused at /results')
    })
  })

  test('a dropped connection fails as unavailable', async () => {
    await withFault({ kind: 'reset' }, async () => {
      for (const [call, path] of everyMethod(source, ids)) await expectFailure(call, 'unavailable', path)
    })
  })

  test('after a fault is cleared the next request succeeds: failures leave nothing behind', async () => {
    market.setFault({ kind: 'hang' })
    expect((await advancedBy(TIMEOUT_MS, () => source.listGames())).error?.kind).toBe('timeout')
    market.setFault({ kind: 'none' })
    expect(await source.listGames()).toEqual(games)
  })

  test('a marketplace that is not running fails as unavailable, at once', async () => {
    const gone = await startFakeMarketplace()
    await gone.stop()
    // On a clock no test moves the deadline never comes: the refused connection alone ends the call,
    // within a bound a real socket meets by orders of magnitude (docs/testing.md "Timing asserts").
    const { error, ms } = await outcome(() => createHttpSource({ url: gone.url, timeoutMs: 2_000, clock: unhurried }).listGames())
    expect(error?.kind).toBe('unavailable')
    expect(ms).toBeLessThan(2_000)
  })

  test('messages never carry the base URL, which may hold credentials', async () => {
    const secretive = createHttpSource({ url: `${market.url.replace('://', '://operator:s3cret-token@')}/?key=s3cret-token`, timeoutMs: TIMEOUT_MS, clock })
    for (const fault of [{ kind: 'status', status: 500 }, { kind: 'hang' }, { kind: 'junk' }, { kind: 'reset' }] as const) {
      await withFault(fault, async () => {
        const { error } = fault.kind === 'hang' ? await advancedBy(TIMEOUT_MS, () => secretive.listGames()) : await outcome(() => secretive.listGames())
        expect(error).toBeInstanceOf(MarketplaceError)
        expect(`${error?.message} ${error?.stack} ${JSON.stringify(error)}`).not.toContain('s3cret')
      })
    }
  })
})

/** A source whose answers are the demo's with one defect, served through a real fake marketplace. */
function defective(change: Partial<MarketplaceSource>): MarketplaceSource {
  return {
    name: demo.name,
    capabilities: demo.capabilities,
    listGames: () => demo.listGames(),
    listSets: (id) => demo.listSets(id),
    listProducts: (id) => demo.listProducts(id),
    listPrices: (id, date) => demo.listPrices(id, date),
    listSales: (id, date) => demo.listSales(id, date),
    listListings: (id) => demo.listListings(id),
    ...change,
  }
}

const traded = (await demo.listListings(ids.productId)).listings
const withListing = (listing: Partial<SourceListing>) => async () => ({
  listings: [...traded, { ...traded[0]!, ...listing }],
  conditionCounts: { 'Near Mint': 50 },
})
const withPrice = (price: Partial<SourcePrice>) => async (groupId: number, date: string) => {
  const prices = await demo.listPrices(groupId, date)
  return [...prices, { ...prices[0]!, printing: 'Somewhere Else', ...price }]
}
const withProduct = (product: Partial<SourceProduct>) => async (groupId: number) => {
  const products = await demo.listProducts(groupId)
  return [{ ...products[0]!, ...product }, ...products.slice(1)]
}

describe('http source refuses answers a marketplace must not give', () => {
  const cases: [string, Partial<MarketplaceSource>, (source: MarketplaceSource) => Promise<unknown>][] = [
    ['a listing of another product', { listListings: withListing({ productId: ids.productId + 1 }) }, (s) => s.listListings(ids.productId)],
    ['a listing in an unknown condition', { listListings: withListing({ condition: 'Pristine' as never }) }, (s) => s.listListings(ids.productId)],
    ['a negative listing price', { listListings: withListing({ price: -3 }) }, (s) => s.listListings(ids.productId)],
    ['a zero listing price', { listListings: withListing({ price: 0 }) }, (s) => s.listListings(ids.productId)],
    ['a NaN listing price (null on the wire)', { listListings: withListing({ price: Number.NaN }) }, (s) => s.listListings(ids.productId)],
    ['a price given as a string', { listListings: withListing({ price: '4.99' as never }) }, (s) => s.listListings(ids.productId)],
    ['a negative shipping cost', { listListings: withListing({ shipping: -1 }) }, (s) => s.listListings(ids.productId)],
    ['a count for an unknown condition', { listListings: async () => ({ listings: [], conditionCounts: { Mint: 3 } as never }) }, (s) => s.listListings(ids.productId)],
    ['a fractional count', { listListings: async () => ({ listings: [], conditionCounts: { 'Near Mint': 2.5 } }) }, (s) => s.listListings(ids.productId)],
    ['a negative market price', { listPrices: withPrice({ marketPrice: -1 }) }, (s) => s.listPrices(ids.groupId, TODAY)],
    [
      'the same printing priced twice',
      { listPrices: async (id, date) => [...(await demo.listPrices(id, date)), (await demo.listPrices(id, date))[0]!] },
      (s) => s.listPrices(ids.groupId, TODAY),
    ],
    ['a fractional product id', { listPrices: withPrice({ productId: 1.5 }) }, (s) => s.listPrices(ids.groupId, TODAY)],
    [
      'a negative sales volume',
      { listSales: async () => [{ productId: ids.productId, printing: 'Normal', avgSalesPrice: null, salesVolume: -2 }] },
      (s) => s.listSales(ids.groupId, TODAY),
    ],
    ['a product of another set', { listProducts: withProduct({ groupId: ids.groupId + 1 }) }, (s) => s.listProducts(ids.groupId)],
    ['a product without printings', { listProducts: withProduct({ printings: [] }) }, (s) => s.listProducts(ids.groupId)],
    ['an unknown product type', { listProducts: withProduct({ productType: 'Singles' as never }) }, (s) => s.listProducts(ids.groupId)],
    ['a set of another game', { listSets: async (id) => (await demo.listSets(id)).map((set) => ({ ...set, categoryId: id + 1 })) }, (s) => s.listSets(ids.categoryId)],
    ['a game listed twice', { listGames: async () => [...games, games[0]!] }, (s) => s.listGames()],
    ['a game in an unknown tier', { listGames: async () => games.map((game) => ({ ...game, priority: 7 as never })) }, (s) => s.listGames()],
    ['a game logo that is not a web URL', { listGames: async () => games.map((game) => ({ ...game, logoUrl: 'javascript:alert(1)' })) }, (s) => s.listGames()],
    ['a game image given as null', { listGames: async () => games.map((game) => ({ ...game, imageUrl: null as never })) }, (s) => s.listGames()],
    [
      'a set icon that is not a web URL',
      { listSets: async (id) => (await demo.listSets(id)).map((set) => ({ ...set, setIconUrl: 'icon.svg' })) },
      (s) => s.listSets(ids.categoryId),
    ],
    ['a card number given as a number', { listProducts: withProduct({ number: 12 as never }) }, (s) => s.listProducts(ids.groupId)],
  ]
  for (const [what, change, call] of cases) {
    test(`refused: ${what}`, async () => {
      const market = await started({ source: defective(change) })
      const { error, value } = await outcome(() => call(createHttpSource({ url: market.url, timeoutMs: 2_000, clock: unhurried })))
      expect(value).toBeUndefined()
      expect(error?.kind).toBe('malformed')
      // The same answer without its defect is accepted, so the defect is what was refused.
      expect(await call(createHttpSource({ url: (await started()).url, timeoutMs: 2_000, clock: unhurried }))).toBeDefined()
    })
  }

  const answering =
    (body: string, headers: Record<string, string> = {}): Fetch =>
    async () =>
      new Response(body, { headers })

  test('a number too large for a double (Infinity once parsed) is refused', async () => {
    const listing = { ...traded[0]!, price: 1 }
    const body = JSON.stringify({ results: { listings: [listing], conditionCounts: {} } })
    const source = (text: string) => createHttpSource({ url: 'http://marketplace.invalid', timeoutMs: 1_000, clock: unhurried, fetch: answering(text) })
    expect((await source(body).listListings(ids.productId)).listings).toEqual([listing])
    const error = await expectFailure(() => source(body.replace('"price":1', '"price":1e999')).listListings(ids.productId), 'malformed', `/products/${ids.productId}/listings`)
    expect(error.message).toContain('/results/listings/0/price')
  })

  test('answers beyond the size cap are refused, whether or not they declare their length', async () => {
    const market = await started()
    const small = createHttpSource({ url: market.url, timeoutMs: 2_000, clock: unhurried, maxBodyBytes: 2_000 })
    expect((await expectFailure(() => small.listProducts(ids.groupId), 'malformed', `/groups/${ids.groupId}/products`)).message).toContain('larger than 2000 bytes')
    const streamed: Fetch = async () => {
      const chunk = new TextEncoder().encode(`{"results":[${'1,'.repeat(400)}`)
      let sent = 0
      return new Response(new ReadableStream({ pull: (controller) => (sent++ < 100 ? controller.enqueue(chunk) : controller.close()) }))
    }
    const undeclared = createHttpSource({ url: 'http://marketplace.invalid', timeoutMs: 2_000, clock: unhurried, maxBodyBytes: 20_000, fetch: streamed })
    expect((await expectFailure(() => undeclared.listGames(), 'malformed', '/categories')).message).toContain('larger than 20000 bytes')
  })

  test('a body that stalls halfway fails as a timeout when the timeout runs out', async () => {
    let stalled = false
    const stalling: Fetch = async (_url, init) =>
      new Response(
        new ReadableStream({
          start: (controller) => controller.enqueue(new TextEncoder().encode('{"results":[')),
          pull: () => {
            stalled = true
            return new Promise<void>((resolve) => init.signal?.addEventListener('abort', () => resolve()))
          },
        }),
      )
    const clock = fakeClock()
    const source = createHttpSource({ url: 'http://marketplace.invalid', timeoutMs: TIMEOUT_MS, clock, fetch: stalling })
    const ended = outcome(() => source.listGames())
    await eventually(() => stalled, { what: 'the body read up to its stall' })
    await clock.advance(TIMEOUT_MS - 1)
    expect(clock.pending()).toBe(1) // its deadline still waiting
    await clock.advance(1)
    const { error } = await ended
    expect(error?.kind).toBe('timeout')
    expect(error?.message).toContain('answer not complete')
  })
})

describe('the fake marketplace as its own process', () => {
  test('faults switch over POST /_fault; killed it is unavailable; restarted on its port it answers again', async () => {
    const args = ['test/fixtures/fake-marketplace.ts', '--port', '0']
    const first = await spawnUntilListening(args, process.env)
    const port = new URL(first.url).port
    const source = createHttpSource({ url: first.url, timeoutMs: TIMEOUT_MS, clock: unhurried })
    try {
      expect(await source.listGames()).toEqual(games)
      const switched = await fetch(`${first.url}/_fault`, { method: 'POST', body: JSON.stringify({ kind: 'status', status: 503 }) })
      expect(await switched.json()).toEqual({ fault: { kind: 'status', status: 503 } })
      expect((await expectFailure(() => source.listGames(), 'status', '/categories')).status).toBe(503)
      const refused = await fetch(`${first.url}/_fault`, { method: 'POST', body: JSON.stringify({ kind: 'slow' }) })
      expect(refused.status).toBe(400)
      expect(await (await fetch(`${first.url}/_requests?path=/categories`)).json()).toEqual({ count: 2 })
    } finally {
      first.child.kill('SIGKILL')
      await first.child.exited
    }
    await expectFailure(() => source.listGames(), 'unavailable', '/categories')

    const second = await spawnUntilListening(['test/fixtures/fake-marketplace.ts', '--port', port, '--fault', '{"kind":"none"}'], process.env)
    try {
      expect(second.url).toBe(first.url)
      expect(await source.listListings(ids.productId)).toEqual(await demo.listListings(ids.productId))
    } finally {
      second.child.kill('SIGTERM')
      expect(await second.child.exited).toBe(0)
    }
  }, 30_000) // two processes started and stopped on a loaded machine
})
