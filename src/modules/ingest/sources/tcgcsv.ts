/**
 * A MarketplaceSource over the public TCGplayer catalog as the TCGCSV mirror publishes it
 * (docs/adr/0097-the-tcgcsv-source.md): categories → games, groups → sets, products → cards
 * and sealed products, price rows → printings. The mirror has no listings, no sales and no past
 * prices, and says so through `capabilities`.
 *
 * Its house rules are kept: a descriptive User-Agent, requests one at a time and paced, a daily
 * request budget counted in the database (so restarts and other nodes share it), retries with
 * backoff on timeouts, 429 (honouring Retry-After) and 5xx. Rows are checked one by one: a bad row
 * is skipped and counted, the rest of its group is kept.
 */
import { Type } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import type { Database } from '../../../db/client'
import { type Clock, utcDate } from '../../../shared/clock'
import type { Logger } from '../../../shared/logger'
import { slugify } from '../../../shared/text'
import { type GameKind, printingOrder } from '../../catalog/printings'
import { addMarketplaceRequests, marketplaceRequestsOn } from '../repo'
import type { MarketplaceSource, SourceGame, SourcePrice, SourceProduct, SourceSet } from '../source'
import { type Fetch, getJson, MarketplaceError } from './request'

export interface TcgcsvSourceOptions {
  /** The mirror's base URL (TCGCSV_URL, or a local mirror). */
  url: string
  /** The categories synced; the supported games' categories when absent. */
  categories?: number[]
  /** The longest one request may take, connect to last byte. */
  timeoutMs: number
  /** The least time between one answer and the next request (the mirror asks for about 100 ms; 0 in benches). */
  pacingMs: number
  /** Requests allowed per UTC day, counted in the database across runs and restarts. */
  dailyRequests: number
  /** Sent on every request: the mirror refuses generic ones. */
  userAgent: string
  db: Database
  clock: Clock
  logger: Logger
  /** Attempts per request before it fails (default 4). */
  attempts?: number
  /** The first retry's wait; each next one doubles (default 1 s). */
  retryBaseMs?: number
  /** The longest wait between attempts, Retry-After included (default 60 s); a longer Retry-After fails the request. */
  retryMaxMs?: number
  fetch?: Fetch
}

/** A game the service knows how to map: its kind decides printing and attribute names. */
interface KnownCategory {
  kind: GameKind
  /** The seven major games refresh in tier 3, the others in tier 2. */
  priority: 2 | 3
}

/** TCGplayer's category ids of the supported games (the default MARKETPLACE_CATEGORIES). */
export const TCGCSV_CATEGORIES: Readonly<Record<number, KnownCategory>> = {
  1: { kind: 'mana', priority: 3 }, // Magic: The Gathering
  2: { kind: 'duel', priority: 3 }, // YuGiOh
  3: { kind: 'creature', priority: 3 }, // Pokemon
  62: { kind: 'action', priority: 3 }, // Flesh and Blood
  63: { kind: 'other', priority: 3 }, // Digimon
  68: { kind: 'other', priority: 3 }, // One Piece Card Game
  71: { kind: 'ink', priority: 3 }, // Disney Lorcana
}

const OTHER_CATEGORY: KnownCategory = { kind: 'other', priority: 2 }

// ---------------------------------------------------------------------------------------------
// The mirror's shapes, checked row by row (bounds real data stays within)

const Id = Type.Integer({ minimum: 1, maximum: 2_147_483_647 })
const Text = (maxLength: number) => Type.String({ maxLength })
const Name = Type.String({ minLength: 1, maxLength: 300 })
const WebUrl = Type.String({ pattern: '^https?://[^\\s]+$', maxLength: 2000 })
/** A price in USD: finite and positive (1e308 and "NaN" are junk, not prices). */
const Price = Type.Union([Type.Number({ minimum: 0.01, maximum: 1e7 }), Type.Null()])

const Envelope = TypeCompiler.Compile(Type.Object({ success: Type.Boolean(), errors: Type.Array(Type.Unknown()), results: Type.Array(Type.Unknown()) }))

const Category = TypeCompiler.Compile(Type.Object({ categoryId: Id, name: Name, displayName: Type.Optional(Type.Union([Name, Type.Null()])) }))

const Group = TypeCompiler.Compile(
  Type.Object({
    groupId: Id,
    categoryId: Id,
    name: Name,
    abbreviation: Type.Optional(Type.Union([Text(50), Type.Null()])),
    publishedOn: Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}' }),
    modifiedOn: Type.Optional(Type.Union([Text(40), Type.Null()])),
  }),
)

const Product = TypeCompiler.Compile(
  Type.Object({
    productId: Id,
    groupId: Id,
    name: Name,
    // The API answers both as URLs: a row without them is refused, not stored with a broken link.
    imageUrl: WebUrl,
    url: WebUrl,
    presaleInfo: Type.Optional(Type.Union([Type.Object({ isPresale: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])) }), Type.Null()])),
    extendedData: Type.Optional(Type.Union([Type.Array(Type.Object({ name: Text(100), value: Type.Union([Text(10_000), Type.Null()]) }), { maxItems: 100 }), Type.Null()])),
  }),
)

const PriceRow = TypeCompiler.Compile(
  Type.Object({
    productId: Id,
    subTypeName: Type.String({ minLength: 1, maxLength: 100 }),
    lowPrice: Type.Optional(Price),
    midPrice: Type.Optional(Price),
    marketPrice: Type.Optional(Price),
  }),
)

type Row<T> = T extends { Check(value: unknown): value is infer R } ? R : never

// ---------------------------------------------------------------------------------------------
// Mapping (docs/adr/0097-the-tcgcsv-source.md)

/**
 * The spec's attribute names per game kind, each read from the first of the mirror's field names
 * present. Kinds the spec does not name keep every field but Number and Rarity, in camelCase.
 */
const ATTRIBUTES: Partial<Record<GameKind, Record<string, readonly string[]>>> = {
  creature: {
    stage: ['Stage'],
    hp: ['HP'],
    weakness: ['Weakness'],
    resistance: ['Resistance'],
    retreatCost: ['RetreatCost', 'Retreat Cost'],
    attack1: ['Attack 1'],
    attack2: ['Attack 2'],
    attack3: ['Attack 3'],
    attack4: ['Attack 4'],
    cardType: ['Card Type', 'CardType'],
    flavorText: ['Flavor Text', 'FlavorText'],
  },
  mana: {
    color: ['Color'],
    manaCost: ['Mana Cost', 'ManaCost'],
    power: ['P', 'Power'],
    toughness: ['T', 'Toughness'],
    cardType: ['Card Type', 'CardType', 'Type'],
    subType: ['SubType', 'Sub Type'],
    flavorText: ['FlavorText', 'Flavor Text'],
    oracleText: ['OracleText', 'Oracle Text'],
  },
  duel: {
    cardType: ['Card Type', 'CardType'],
    attribute: ['Attribute'],
    level: ['Level', 'Rank', 'Link Rating', 'LinkRating'],
    attack: ['Attack', 'ATK'],
    defense: ['Defense', 'DEF'],
    description: ['Description'],
  },
}

/** The mirror's rich text (`<br>`, `<em>`, entities) as plain text. */
function plainText(value: string): string {
  return value
    .replace(/<br\s*\/?>/gi, '\n')
    .replace(/<[^>]*>/g, '')
    .replace(/&amp;/g, '&')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;|&apos;/g, "'")
    .trim()
}

const camelCase = (name: string) => name.replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ?? '').toUpperCase()).replace(/^./, (c) => c.toLowerCase())

export function customAttributes(kind: GameKind, fields: ReadonlyMap<string, string>): Record<string, string | string[]> {
  const names = ATTRIBUTES[kind]
  const out: Record<string, string | string[]> = {}
  if (!names) {
    for (const [name, value] of fields) if (name !== 'Number' && name !== 'Rarity') out[camelCase(name)] = value
    return out
  }
  for (const [attribute, sourceNames] of Object.entries(names)) {
    const name = sourceNames.find((candidate) => fields.has(candidate))
    if (name) out[attribute] = fields.get(name)!
  }
  // A Pokémon's Card Type is its energy types ("Fire", "Grass / Water"); a Trainer's or Energy's has none.
  if (kind === 'creature')
    out.energyType =
      fields.has('Stage') && out.cardType
        ? String(out.cardType)
            .split(/\s*[/,;]\s*/)
            .filter(Boolean)
        : []
  return out
}

function toProduct(row: Row<typeof Product>, kind: GameKind, printings: string[]): SourceProduct {
  const fields = new Map<string, string>()
  for (const field of row.extendedData ?? []) if (field.value !== null && field.value.trim() !== '') fields.set(field.name, plainText(field.value))
  // No Number field: no number (sealed products; docs/adr/0092-sealed-products-have-no-number.md).
  const number = fields.get('Number') ?? null
  const rarity = fields.get('Rarity') ?? ''
  const sealed = !fields.has('Number') && !fields.has('Rarity')
  return {
    productId: row.productId,
    groupId: row.groupId,
    name: row.name,
    number,
    rarity,
    imageUrl: row.imageUrl,
    url: row.url,
    productType: sealed ? 'Sealed Products' : 'Cards',
    // The mirror has no shipping class: a sealed product named a case ships as one, any other as a box.
    shippingCategoryId: sealed ? (/\bcase\b/i.test(row.name) ? 4 : 3) : 1,
    productStatusId: row.presaleInfo?.isPresale ? 20 : 1,
    totalListings: null,
    hp: kind === 'creature' ? (fields.get('HP') ?? null) : null,
    customAttributes: customAttributes(kind, fields),
    printings,
  }
}

function toPrice(row: Row<typeof PriceRow>): SourcePrice {
  return {
    productId: row.productId,
    printing: row.subTypeName,
    lowPrice: row.lowPrice ?? null,
    midPrice: row.midPrice ?? null,
    marketPrice: row.marketPrice ?? null,
    // The mirror's directLowPrice is TCGplayer Direct's lowest price, not a price with shipping; it has no buylist.
    directLowPrice: null,
    buylistPrice: null,
  }
}

// ---------------------------------------------------------------------------------------------
// The source

export function createTcgcsvSource(options: TcgcsvSourceOptions): MarketplaceSource {
  const base = options.url.replace(/\/+$/, '')
  const attempts = options.attempts ?? 4
  const retryBaseMs = options.retryBaseMs ?? 1_000
  const retryMaxMs = options.retryMaxMs ?? 60_000
  const request = {
    timeoutMs: options.timeoutMs,
    clock: options.clock,
    maxBodyBytes: 256 * 1024 * 1024,
    headers: { 'user-agent': options.userAgent },
    fetch: options.fetch,
  }
  const wanted = new Set(options.categories ?? Object.keys(TCGCSV_CATEGORIES).map(Number))
  /** Where each group lives (its URL needs the category) and its game's kind. */
  const groups = new Map<number, { categoryId: number; kind: GameKind }>()
  /** Prices read with a group's products (for their printings), handed to the listPrices that follows. */
  const pricesRead = new Map<number, SourcePrice[]>()
  let skipped: Record<string, number> = {}
  /**
   * The day's budget, counted here and added to the database at each checkpoint: a request is
   * counted before it is sent without a statement of its own, which a sync's open transaction
   * would block under the embedded database's single connection. `used` is the database's count
   * when the day's first listing read it (other runs and nodes included).
   */
  let budget = { day: '', used: 0, pending: 0 }
  /** One request at a time; the next waits for the previous answer plus the pacing. */
  let queue: Promise<unknown> = Promise.resolve()
  let lastAnswerAt: number | undefined

  function skip(kind: string, path: string, detail: string): void {
    skipped[kind] = (skipped[kind] ?? 0) + 1
    options.logger.warn({ path, detail }, `marketplace ${kind} row skipped`)
  }

  /** The answer's `results`, after the envelope check; one at a time, paced, budgeted and retried. */
  function results(path: string): Promise<unknown[]> {
    const next = queue.then(() => resultsNow(path))
    queue = next.catch(() => {})
    return next
  }

  async function resultsNow(path: string): Promise<unknown[]> {
    for (let attempt = 1; ; attempt++) {
      if (lastAnswerAt !== undefined) {
        const wait = lastAnswerAt + options.pacingMs - options.clock.monotonic()
        if (wait > 0) await options.clock.sleep(wait)
      }
      const day = utcDate(options.clock.now())
      // A sync that runs past midnight starts the new day's count here; the next listing reads it.
      if (budget.day !== day) budget = { day, used: 0, pending: 0 }
      if (budget.used + budget.pending >= options.dailyRequests) {
        throw new MarketplaceError('budget', path, `the day's ${options.dailyRequests} requests are used up`)
      }
      budget.pending++
      try {
        const body = await getJson(base, path, request)
        if (!Envelope.Check(body)) throw new MarketplaceError('malformed', path, 'answer is not a TCGCSV envelope')
        if (!body.success) {
          const reason = body.errors
            .filter((e) => typeof e === 'string')
            .join('; ')
            .slice(0, 300)
          throw new MarketplaceError('refused', path, `answered success: false${reason ? ` (${reason})` : ''}`)
        }
        return body.results
      } catch (error) {
        const wait = retryWait(error, attempt)
        if (wait === undefined) throw error
        options.logger.warn({ path, attempt, waitMs: wait, err: error }, 'marketplace request failed; retrying')
        await options.clock.sleep(wait)
      } finally {
        lastAnswerAt = options.clock.monotonic()
      }
    }
  }

  /** How long to wait before retrying after `error`, or undefined when it is not worth retrying. */
  function retryWait(error: unknown, attempt: number): number | undefined {
    if (!(error instanceof MarketplaceError) || attempt >= attempts) return undefined
    const transient =
      error.kind === 'timeout' ||
      error.kind === 'unavailable' ||
      (error.kind === 'malformed' && error.message.endsWith('not valid JSON')) ||
      (error.kind === 'status' && (error.status === 429 || error.status! >= 500))
    if (!transient) return undefined
    if (error.retryAfterMs !== undefined) return error.retryAfterMs <= retryMaxMs ? error.retryAfterMs : undefined
    return Math.min(retryMaxMs, retryBaseMs * 2 ** (attempt - 1))
  }

  /** The rows of `rows` that pass `check`, each refusal counted under `kind`. */
  function valid<R>(
    rows: unknown[],
    check: { Check(value: unknown): value is R; Errors(value: unknown): Iterable<{ path: string; message: string }> },
    kind: string,
    path: string,
  ): R[] {
    const out: R[] = []
    rows.forEach((row, index) => {
      if (check.Check(row)) out.push(row)
      else {
        const first = [...check.Errors(row)][0]
        skip(kind, path, `/results/${index}${first?.path ?? ''}: ${first?.message ?? 'wrong shape'}`)
      }
    })
    return out
  }

  function groupOf(groupId: number) {
    const group = groups.get(groupId)
    if (!group) throw new Error(`group ${groupId} was not listed by listSets first`)
    return group
  }

  async function readPrices(groupId: number): Promise<SourcePrice[]> {
    const { categoryId } = groupOf(groupId)
    const path = `/tcgplayer/${categoryId}/${groupId}/prices`
    const seen = new Set<string>()
    const prices: SourcePrice[] = []
    for (const row of valid(await results(path), PriceRow, 'price', path)) {
      const key = `${row.productId}|${row.subTypeName}`
      if (seen.has(key)) skip('price', path, `duplicate row for product ${row.productId} ${row.subTypeName}`)
      else prices.push(toPrice(row))
      seen.add(key)
    }
    return prices
  }

  return {
    name: 'tcgcsv',
    capabilities: { listings: false, sales: false, pastPrices: false },

    async listGames() {
      const day = utcDate(options.clock.now())
      budget = { day, used: await marketplaceRequestsOn(options.db, day), pending: budget.day === day ? budget.pending : 0 }
      const path = '/tcgplayer/categories'
      const games: SourceGame[] = []
      const slugs = new Set<string>()
      for (const row of valid(await results(path), Category, 'category', path)) {
        if (!wanted.has(row.categoryId)) continue
        const known = TCGCSV_CATEGORIES[row.categoryId] ?? OTHER_CATEGORY
        let slug = slugify(row.name) || `category-${row.categoryId}`
        if (slugs.has(slug)) slug = `${slug}-${row.categoryId}`
        slugs.add(slug)
        games.push({ categoryId: row.categoryId, name: row.displayName || row.name, slug, priority: known.priority, kind: known.kind })
      }
      return games
    },

    async listSets(categoryId) {
      const path = `/tcgplayer/${categoryId}/groups`
      const kind = (TCGCSV_CATEGORIES[categoryId] ?? OTHER_CATEGORY).kind
      const sets: SourceSet[] = []
      const slugs = new Set<string>()
      for (const row of valid(await results(path), Group, 'group', path)) {
        if (row.categoryId !== categoryId || (groups.has(row.groupId) && groups.get(row.groupId)!.categoryId !== categoryId)) {
          skip('group', path, `group ${row.groupId} is not of category ${categoryId}`)
          continue
        }
        if (sets.some((set) => set.groupId === row.groupId)) {
          skip('group', path, `duplicate group ${row.groupId}`)
          continue
        }
        // Two groups may share a name: the later one's slug carries its id.
        let slug = slugify(row.name) || `group-${row.groupId}`
        if (slugs.has(slug)) slug = `${slug}-${row.groupId}`
        slugs.add(slug)
        groups.set(row.groupId, { categoryId, kind })
        sets.push({
          groupId: row.groupId,
          categoryId,
          name: row.name,
          slug,
          abbreviation: row.abbreviation ?? '',
          releaseDate: row.publishedOn.slice(0, 10),
          modifiedOn: row.modifiedOn ?? undefined,
        })
      }
      return sets
    },

    async listProducts(groupId) {
      const { categoryId, kind } = groupOf(groupId)
      const path = `/tcgplayer/${categoryId}/${groupId}/products`
      const rows = valid(await results(path), Product, 'product', path)
      // A product's printings are the price rows it has (the products answer does not name them).
      const prices = await readPrices(groupId)
      pricesRead.set(groupId, prices)
      const printingsOf = new Map<number, string[]>()
      for (const price of prices) printingsOf.set(price.productId, [...(printingsOf.get(price.productId) ?? []), price.printing])
      const order = printingOrder(kind)
      const products: SourceProduct[] = []
      const seen = new Set<number>()
      for (const row of rows) {
        if (row.groupId !== groupId) skip('product', path, `product ${row.productId} is not of group ${groupId}`)
        else if (seen.has(row.productId)) skip('product', path, `duplicate product ${row.productId}`)
        else products.push(toProduct(row, kind, (printingsOf.get(row.productId) ?? []).sort(order)))
        seen.add(row.productId)
      }
      return products
    },

    async listPrices(groupId) {
      const read = pricesRead.get(groupId)
      pricesRead.delete(groupId)
      return read ?? readPrices(groupId)
    },

    async listSales() {
      return []
    },

    async listListings() {
      throw new MarketplaceError('refused', '/listings', 'the TCGCSV mirror has no listings')
    },

    async checkpoint() {
      if (budget.pending === 0) return
      const { day, pending } = budget
      budget.pending = 0
      budget.used += pending
      await addMarketplaceRequests(options.db, day, pending)
    },

    takeSkipped() {
      const taken = skipped
      skipped = {}
      return taken
    },
  }
}
