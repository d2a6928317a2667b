/**
 * A MarketplaceSource over HTTP, speaking the protocol of `serve.ts`. The marketplace is outside our
 * control, so every request is bounded (request.ts) and every answer is checked against the
 * source's shapes before anything downstream sees it: a wrong shape, a price that is not a
 * positive finite number, an unknown condition or rows of another product are refused, never
 * stored. Every failure is one MarketplaceError saying which kind it was.
 */
import { type Static, type TObject, type TSchema, Type } from '@sinclair/typebox'
import { type TypeCheck, TypeCompiler } from '@sinclair/typebox/compiler'
import type { Clock } from '../../../shared/clock'
import { CONDITIONS, type MarketplaceSource, SEALED_CONDITION } from '../source'
import { type Fetch, getJson, MarketplaceError } from './request'
import { marketplacePaths } from './serve'

export { type Fetch, MarketplaceError, type MarketplaceErrorKind } from './request'

export interface HttpSourceOptions {
  /** The marketplace's base URL; protocol paths are appended to it. */
  url: string
  /** The longest one request may take, from connecting to the last byte of its body. */
  timeoutMs: number
  /** Whose time `timeoutMs` runs on: the service's clock. */
  clock: Clock
  /** The largest answer accepted, in bytes after decompression (default 32 MiB). */
  maxBodyBytes?: number
  fetch?: Fetch
}

const DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024

// ---------------------------------------------------------------------------------------------
// The protocol's shapes (source.ts), with the bounds real data stays within

const Id = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })
const Count = Type.Integer({ minimum: 0, maximum: 1e9 })
/** A price in USD: positive and finite (JSON has no NaN; a huge exponent would parse as Infinity). */
const Price = Type.Number({ minimum: 0.01, maximum: 1e8 })
const Label = (maxLength: number) => Type.String({ minLength: 1, maxLength })
const Printing = Label(100)
/** An image's address: absent when the marketplace has none; when given, a web URL (the API answers it as one). */
const ImageUrl = Type.Optional(Type.String({ pattern: '^https?://[^\\s]+$', maxLength: 2000 }))
const literals = <T extends string | number>(values: readonly T[]) => Type.Union(values.map((value) => Type.Literal(value)))

const Game = Type.Object({
  categoryId: Id,
  name: Label(200),
  slug: Type.String({ pattern: '^[a-z0-9]+(-[a-z0-9]+)*$', maxLength: 200 }),
  priority: literals([0, 1, 2, 3] as const),
  kind: literals(['creature', 'mana', 'duel', 'action', 'ink', 'other'] as const),
  imageUrl: ImageUrl,
  logoUrl: ImageUrl,
})

const GameSet = Type.Object({
  groupId: Id,
  categoryId: Id,
  name: Label(300),
  slug: Type.String({ pattern: '^[a-z0-9]+(-[a-z0-9]+)*$', maxLength: 300 }),
  abbreviation: Type.String({ maxLength: 50 }),
  releaseDate: Type.String({ pattern: '^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])$' }),
  imageUrl: ImageUrl,
  setIconUrl: ImageUrl,
})

const Product = Type.Object({
  productId: Id,
  groupId: Id,
  name: Label(300),
  // null: the product has no number (sealed products).
  number: Type.Union([Type.String({ maxLength: 50 }), Type.Null()]),
  rarity: Type.String({ maxLength: 100 }),
  imageUrl: Type.String({ maxLength: 2000 }),
  url: Type.String({ maxLength: 2000 }),
  productType: literals(['Cards', 'Sealed Products'] as const),
  shippingCategoryId: literals([1, 3, 4] as const),
  productStatusId: literals([1, 20] as const),
  totalListings: Count,
  hp: Type.Union([Type.String({ maxLength: 20 }), Type.Null()]),
  customAttributes: Type.Record(Type.String({ maxLength: 100 }), Type.Union([Type.String({ maxLength: 5000 }), Type.Array(Type.String({ maxLength: 200 }), { maxItems: 50 })])),
  printings: Type.Array(Printing, { minItems: 1, maxItems: 20, uniqueItems: true }),
})

const PriceRow = Type.Object({
  productId: Id,
  printing: Printing,
  lowPrice: Type.Union([Price, Type.Null()]),
  midPrice: Type.Union([Price, Type.Null()]),
  marketPrice: Type.Union([Price, Type.Null()]),
  directLowPrice: Type.Union([Price, Type.Null()]),
  buylistPrice: Type.Union([Price, Type.Null()]),
})

const Sale = Type.Object({
  productId: Id,
  printing: Printing,
  avgSalesPrice: Type.Union([Price, Type.Null()]),
  salesVolume: Count,
})

const LISTING_CONDITIONS = [...CONDITIONS, SEALED_CONDITION] as const

const Listing = Type.Object({
  productId: Id,
  printing: Printing,
  condition: literals(LISTING_CONDITIONS),
  language: Label(50),
  price: Price,
  shipping: Type.Number({ minimum: 0, maximum: 10_000 }),
})

const Listings = Type.Object({
  listings: Type.Array(Listing, { maxItems: 100_000 }),
  conditionCounts: Type.Object(
    {
      'Near Mint': Type.Optional(Count),
      'Lightly Played': Type.Optional(Count),
      'Moderately Played': Type.Optional(Count),
      'Heavily Played': Type.Optional(Count),
      Damaged: Type.Optional(Count),
      [SEALED_CONDITION]: Type.Optional(Count),
    },
    { additionalProperties: false },
  ),
})

const results = <T extends TSchema>(schema: T) => TypeCompiler.Compile(Type.Object({ results: schema }))

const answers = {
  games: results(Type.Array(Game)),
  sets: results(Type.Array(GameSet)),
  products: results(Type.Array(Product)),
  prices: results(Type.Array(PriceRow)),
  sales: results(Type.Array(Sale)),
  listings: results(Listings),
}

// ---------------------------------------------------------------------------------------------
// The source

/** A MarketplaceSource reading the marketplace at `options.url`. Creating it sends nothing. */
export function createHttpSource(options: HttpSourceOptions): MarketplaceSource {
  const base = options.url.replace(/\/+$/, '')
  const request = { ...options, maxBodyBytes: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES }

  async function get<T extends TSchema>(path: string, answer: TypeCheck<TObject<{ results: T }>>): Promise<Static<T>> {
    const body = await getJson(base, path, request)
    if (!isAnswer(answer, body)) {
      const first = answer.Errors(body).First()
      throw new MarketplaceError('malformed', path, `answer refused at ${first?.path || '/'}: ${first?.message ?? 'wrong shape'}`)
    }
    return body.results
  }

  return {
    name: 'http',
    // The protocol carries every kind of data; a marketplace without some answers it empty.
    capabilities: { listings: true, sales: true, pastPrices: true },
    async listGames() {
      const path = marketplacePaths.categories()
      const games = await get(path, answers.games)
      refuseDuplicates(path, games, (game) => game.categoryId)
      return games
    },
    async listSets(categoryId) {
      const path = marketplacePaths.groups(categoryId)
      const sets = await get(path, answers.sets)
      refuseForeign(path, sets, (set) => set.categoryId === categoryId, 'categoryId')
      refuseDuplicates(path, sets, (set) => set.groupId)
      return sets
    },
    async listProducts(groupId) {
      const path = marketplacePaths.products(groupId)
      const products = await get(path, answers.products)
      refuseForeign(path, products, (product) => product.groupId === groupId, 'groupId')
      refuseDuplicates(path, products, (product) => product.productId)
      return products
    },
    async listPrices(groupId, date) {
      const path = marketplacePaths.prices(groupId, date)
      const prices = await get(path, answers.prices)
      refuseDuplicates(path, prices, (price) => `${price.productId}|${price.printing}`)
      return prices
    },
    async listSales(groupId, date) {
      const path = marketplacePaths.sales(groupId, date)
      const sales = await get(path, answers.sales)
      refuseDuplicates(path, sales, (sale) => `${sale.productId}|${sale.printing}`)
      return sales
    },
    async listListings(productId) {
      const path = marketplacePaths.listings(productId)
      const listings = await get(path, answers.listings)
      refuseForeign(path, listings.listings, (listing) => listing.productId === productId, 'productId')
      return listings
    },
  }
}

function isAnswer<T extends TSchema>(answer: TypeCheck<TObject<{ results: T }>>, body: unknown): body is { results: Static<T> } {
  return answer.Check(body)
}

function refuseForeign<T>(path: string, rows: readonly T[], belongs: (row: T) => boolean, field: string): void {
  const index = rows.findIndex((row) => !belongs(row))
  if (index >= 0) throw new MarketplaceError('malformed', path, `answer refused at /results/${index}/${field}: not the one requested`)
}

function refuseDuplicates<T>(path: string, rows: readonly T[], key: (row: T) => string | number): void {
  const seen = new Set<string | number>()
  rows.forEach((row, index) => {
    if (seen.has(key(row))) throw new MarketplaceError('malformed', path, `answer refused at /results/${index}: duplicate row`)
    seen.add(key(row))
  })
}
