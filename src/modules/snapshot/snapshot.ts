import type { CardWithPrice, Price, PriceRow } from '../catalog/model'
import { isFoilPrinting, printingOrder } from '../catalog/printings'
import { priceRowOf, snapshotCardWithPrice } from '../catalog/service'
import { BulkIndex, type BulkSelection } from './bulk-index'
import { type CardColumns, type DecimalColumn, orNull, type PriceColumns, writeDigits } from './columns'
import type { BulkPriceRow, MoverDirection, MoverPeriod, TopMoverRow } from './model'
import { MAX_MOVERS, MOVER_DIRECTIONS, MOVER_PERIODS } from './model'
import type { SnapshotSource } from './repo'
import { type SearchableCard, SearchIndex } from './search-index'

/** A card as the snapshot answers it: what bulk rows, mover rows and search answers need, and its prices. */
export interface SnapshotCard {
  id: number
  name: string
  cleanName: string
  /** null for sealed products, which have none. */
  number: string | null
  rarity: string
  /** null when the source does not count listings. */
  totalListings: number | null
  setId: number
  setName: string
  setSlug: string
  gameName: string
  gameSlug: string
  gameId: number
  marketplaceId: number
  productType: TopMoverRow['product_type']
  foilOnly: number
  imageUrl: string
  /** The spec's Price objects, primary printing first (docs/adr/0011-primary-printing.md). */
  prices: Price[]
}

export interface MoverFilter {
  period: MoverPeriod
  direction: MoverDirection
  gameId?: number
  type?: string
  printing?: string
  limit: number
}

/** A place in the change feed's order (update time, card id, printing): rows strictly after it follow. */
export interface ChangePosition {
  at: string
  cardId: number
  printing: string
}

/** Serialised movers answers a snapshot keeps: a few MB at most (50 rows of about 400 bytes each). */
const MOVER_ANSWERS_KEPT = 2_048

/** The empty row lists of a snapshot made for search only (forSearch). */
const NO_ROWS = new Int32Array(0)

/** "Any" in a movers key: null, which no game, type or printing name can equal. */
const ANY = null

/** The movers lists a price row is in: its game or any, its product type or any, its printing or any. */
const LISTS_PER_ROW = 8

const moverKey = (period: MoverPeriod, direction: MoverDirection, gameId: number | null, type: string | null, printing: string | null) =>
  JSON.stringify([period, direction, gameId, type, printing])

/** The key of the list a filter reads (its limit aside). */
const moverKeyOf = (filter: MoverFilter) => moverKey(filter.period, filter.direction, filter.gameId ?? ANY, filter.type ?? ANY, filter.printing ?? ANY)

const byCodePoint = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/** The parts a snapshot is made of (see the fields of PriceSnapshot). */
interface Parts {
  cards: CardColumns
  prices: PriceColumns
  gamesById: Map<number, GameNames>
  setsById: Map<number, { name: string; slug: string }>
  firstPrice: Int32Array
  cardPrices: Int32Array
  priceCard: Int32Array
  bulkChunks: Buffer[]
  bulkIndex: BulkIndex
  moverRows: Int32Array
  movers: Map<string, Int32Array>
  changes: Map<number | '*', Int32Array>
  priceCount: number
  asOf: string | null
}

interface GameNames {
  name: string
  slug: string
  kind: string
}

/** Collections a build asks for: the store collects the garbage of each phase (a build runs once per sync). */
export interface BuildOptions {
  betweenPhases?: () => void
  /** 'later': the caller builds it with `buildSearchIndex` once the prices are in service (docs/adr/0119-prices-first-then-the-search-index.md). */
  searchIndex?: 'now' | 'later'
}

/**
 * An immutable, in-process copy of every card's current prices (docs/adr/0020-the-snapshot.md), with
 * each bulk row serialised and the movers pre-sorted, so bulk prices and top movers are lookups
 * and slices. A new one is built off the request path and swapped in whole (see store.ts); a
 * request holds the one it started with.
 *
 * Rows are kept as the columns they were read into (columns.ts), not as an object per card and per
 * price: a card or a Price object is made when a request asks for it. Lists of rows (a card's
 * prices, the movers, the change feed) are Int32Arrays of row numbers.
 */
export class PriceSnapshot {
  readonly cardCount: number
  readonly priceCount: number
  /** Newest `last_updated_at` of any price; null when there are none. */
  readonly asOf: string | null
  /** Card search and autocomplete over every card (docs/adr/0112-search-in-memory.md): set once by buildSearchIndex. */
  private index: SearchIndex | undefined
  private readonly cards: CardColumns
  private readonly prices: PriceColumns
  private readonly gamesById: Map<number, GameNames>
  private readonly setsById: Map<number, { name: string; slug: string }>
  private readonly gamesBySlug: Map<string, number>
  /** Card row → where its price rows start in cardPrices; [row + 1] is where they end. */
  private readonly firstPrice: Int32Array
  /** Price rows grouped by card row, each card's primary printing first (docs/adr/0011-primary-printing.md). */
  private readonly cardPrices: Int32Array
  /** Price row → its card's row (-1: no such card). */
  private readonly priceCard: Int32Array
  /** Every card's Bulk price row as UTF-8 JSON, each after a comma, back to back in 1 MB buffers (bulkIndex says where). */
  private readonly bulkChunks: Buffer[]
  /** Card id → its row and its Bulk price row's bytes. */
  private readonly bulkIndex: BulkIndex
  /** The movers' price rows: every printing with a market price, by card id, then printing. */
  private readonly moverRows: Int32Array
  /** Per period, direction, game, product type and printing (each or ANY): the first MAX_MOVERS positions in moverRows, biggest move first. */
  private readonly movers: Map<string, Int32Array>
  /** Per game (and '*'): price rows by update time, then card id, then printing. */
  private readonly changes: Map<number | '*', Int32Array>
  /** Movers answers serialised so far, by filter (see topMoversJson). */
  private readonly moverAnswers = new Map<string, { json: string; count: number }>()

  private constructor(
    readonly version: string,
    readonly builtAt: Date,
    readonly fingerprint: string,
    parts: Parts,
  ) {
    this.cards = parts.cards
    this.prices = parts.prices
    this.gamesById = parts.gamesById
    this.setsById = parts.setsById
    this.gamesBySlug = new Map([...parts.gamesById].map(([id, game]) => [game.slug, id]))
    this.firstPrice = parts.firstPrice
    this.cardPrices = parts.cardPrices
    this.priceCard = parts.priceCard
    this.bulkChunks = parts.bulkChunks
    this.bulkIndex = parts.bulkIndex
    this.moverRows = parts.moverRows
    this.movers = parts.movers
    this.changes = parts.changes
    this.cardCount = parts.cards.length
    this.priceCount = parts.priceCount
    this.asOf = parts.asOf
  }

  static build(source: SnapshotSource, builtAt: Date, options: BuildOptions = {}): PriceSnapshot {
    const between = options.betweenPhases ?? (() => {})
    const { cards, prices } = source
    const gamesById = new Map(source.games.map((game) => [game.id, { name: game.name, slug: game.slug, kind: game.kind }]))
    const setsById = new Map(source.sets.map((set) => [set.id, { name: set.name, slug: set.slug }]))
    const bulkIndex = new BulkIndex(cards.length)
    for (let row = 0; row < cards.length; row++) bulkIndex.addUnpriced(cards.id[row]!, row)
    const grouped = groupPrices(cards, prices, bulkIndex, gamesById)
    const bulkChunks = serialiseBulkRows(cards, prices, grouped, bulkIndex)
    between()
    const feed = inFeedOrder(cards, prices, grouped)
    const { moverRows, movers } = buildMovers(feed, cards, prices, grouped.priceCard)
    between()
    const changes = buildChanges(feed, cards, prices, grouped.priceCard)
    const snapshot = new PriceSnapshot(versionOf(source.fingerprint), builtAt, source.fingerprint, {
      cards,
      prices,
      gamesById,
      setsById,
      ...grouped,
      bulkChunks,
      bulkIndex,
      moverRows,
      movers,
      changes,
      priceCount: grouped.cardPrices.length,
      asOf: newestUpdate(prices, grouped.cardPrices),
    })
    if (options.searchIndex !== 'later') snapshot.buildSearchIndex()
    return snapshot
  }

  /** Builds the search index over this snapshot's cards (once; later calls return it). */
  buildSearchIndex(): SearchIndex {
    this.index ??= buildSearch(this.cards, this.prices, this.firstPrice, this.cardPrices)
    return this.index
  }

  /**
   * This snapshot as search and autocomplete read it (store.ts's `searching`): the same cards,
   * prices and index, without the bulk rows, movers and change lists, so that once prices move on to
   * the next snapshot, searches still answering from this one while the next index is built do not
   * keep those alive (about 36 MB on `large`, docs/adr/0129-the-rebuild-s-peak-and-the-type-ahead-s-tail.md).
   */
  forSearch(): PriceSnapshot {
    const twin = new PriceSnapshot(this.version, this.builtAt, this.fingerprint, {
      cards: this.cards,
      prices: this.prices,
      gamesById: this.gamesById,
      setsById: this.setsById,
      firstPrice: this.firstPrice,
      cardPrices: this.cardPrices,
      priceCard: NO_ROWS,
      bulkChunks: [],
      bulkIndex: this.bulkIndex,
      moverRows: NO_ROWS,
      movers: new Map(),
      changes: new Map(),
      priceCount: this.priceCount,
      asOf: this.asOf,
    })
    twin.index = this.search
    twin.searchOnly = true
    return twin
  }

  /** True for the twin forSearch makes: it holds no bulk rows, movers or change lists. */
  private searchOnly = false

  /** Refuses a read of rows a search-only twin does not hold: a loud bug rather than an empty answer. */
  private holdingRows(): void {
    if (this.searchOnly) throw new Error('a search-only snapshot holds no bulk rows, movers or change lists')
  }

  /** Whether `search` can be read: the index is built. */
  get searchable(): boolean {
    return this.index !== undefined
  }

  /** The search index; only a snapshot whose index is built is handed to search (store.ts's `searching`). */
  get search(): SearchIndex {
    if (!this.index) throw new Error('the search index of this snapshot is not built yet')
    return this.index
  }

  /** The card with its prices, made for the caller (a new object each call). */
  card(id: number): SnapshotCard | undefined {
    const row = this.bulkIndex.rowOf(id)
    if (row < 0) return undefined
    const prices: Price[] = []
    for (let at = this.firstPrice[row]!; at < this.firstPrice[row + 1]!; at++) prices.push(this.prices.price(this.cardPrices[at]!))
    return this.cardAt(row, prices)
  }

  /** The card as a card-with-price row (search answers): only its primary printing's Price is made, the one the row shows. */
  cardWithPrice(id: number): CardWithPrice | undefined {
    const row = this.bulkIndex.rowOf(id)
    if (row < 0) return undefined
    const first = this.firstPrice[row]!
    return snapshotCardWithPrice(this.cardAt(row, first < this.firstPrice[row + 1]! ? [this.prices.price(this.cardPrices[first]!)] : []))
  }

  /** Card row `row` with these prices. */
  private cardAt(row: number, prices: Price[]): SnapshotCard {
    const card = this.cards.fields(row)
    return {
      id: card.id,
      name: card.name,
      cleanName: card.cleanName,
      number: card.number,
      rarity: card.rarity,
      totalListings: card.totalListings,
      setId: card.setId,
      ...this.namesOf(card.setId, card.gameId),
      gameId: card.gameId,
      marketplaceId: card.marketplaceId,
      productType: card.productType as SnapshotCard['productType'],
      foilOnly: card.foilOnly,
      imageUrl: card.imageUrl,
      prices,
    }
  }

  /** The cards these ids name, each once in request order, and the ids that name none. */
  selectBulk(ids: number[]): BulkSelection {
    return this.bulkIndex.select(ids)
  }

  /**
   * `head`, a JSON array of the selected cards' Bulk price rows, then `tail`, as bytes copied from
   * the rows serialised at build time: no serialising and no UTF-8 encoding per request. One
   * Buffer.concat of views, not a Buffer.copy per row: the rows lie far apart in memory, and one
   * native loop overlaps their cache misses where 500 calls wait for each in turn
   * (docs/adr/0048-bulk-prices-how-a-500-id-answer-is-assembled.md).
   */
  bulkJson(selection: BulkSelection, head: string, tail: string): Buffer {
    this.holdingRows()
    const { slots, count } = selection
    if (count === 0) return Buffer.from(`${head}[]${tail}`)
    const index = this.bulkIndex
    const headBytes = Buffer.from(head)
    const parts: Uint8Array[] = new Array(count + 2)
    parts[0] = headBytes
    let length = headBytes.length
    for (let i = 0; i < count; i++) {
      const start = index.start(slots[i]!)
      const end = index.end(slots[i]!)
      const chunk = (start / BULK_CHUNK_BYTES) | 0
      const base = chunk * BULK_CHUNK_BYTES
      parts[i + 1] = this.bulkChunks[chunk]!.subarray(start - base, end - base)
      length += end - start
    }
    const tailBytes = Buffer.from(`]${tail}`)
    parts[count + 1] = tailBytes
    const out = Buffer.concat(parts, length + tailBytes.length)
    out[headBytes.length] = 0x5b // the first row's leading comma opens the array
    return out
  }

  /** The selected cards' Bulk price rows as objects (for msgpack), made from the columns. */
  bulkObjects(selection: BulkSelection): BulkPriceRow[] {
    this.holdingRows()
    const { prices } = this
    const foilCodes = foilPrintings(prices)
    return Array.from(selection.slots.subarray(0, selection.count), (slot) => {
      const row = this.bulkIndex.row(slot)
      const primary = this.cardPrices[this.firstPrice[row]!]!
      const foil = foilPriceRow(prices, this.cardPrices, this.firstPrice[row]!, this.firstPrice[row + 1]!, foilCodes)
      return {
        card_id: this.cards.id[row]!,
        market_price: orNull(prices.marketPrice.get(primary)),
        low_price: orNull(prices.lowPrice.get(primary)),
        foil_market_price: foil < 0 ? null : orNull(prices.marketPrice.get(foil)),
        price_change_24h: orNull(prices.priceChange24h.get(primary)),
        last_updated_at: prices.times.values[prices.lastUpdatedAt[primary]!]!,
      }
    })
  }

  /** The game's id, or undefined when no game has the slug. */
  gameId(slug: string): number | undefined {
    return this.gamesBySlug.get(slug)
  }

  /** A card's set and game names and slugs ('' for one the source did not read). */
  private namesOf(setId: number, gameId: number) {
    const set = this.setsById.get(setId)
    const game = this.gamesById.get(gameId)
    return { setName: set?.name ?? '', setSlug: set?.slug ?? '', gameName: game?.name ?? '', gameSlug: game?.slug ?? '' }
  }

  /** Whether a set has this id (the source reads every set, priced or not). */
  hasSet(id: number): boolean {
    return this.setsById.has(id)
  }

  /**
   * The top movers under the filter as a JSON array, serialised on first use and kept for the
   * snapshot's life (it never changes): the same few filters are asked again and again. At most
   * MOVER_ANSWERS_KEPT are kept; past that the oldest goes.
   */
  topMoversJson(filter: MoverFilter): { json: string; count: number } {
    this.holdingRows()
    const key = `${moverKeyOf(filter)}${filter.limit}`
    let answer = this.moverAnswers.get(key)
    if (!answer) {
      const rows = this.topMovers(filter)
      answer = { json: JSON.stringify(rows), count: rows.length }
      if (this.moverAnswers.size >= MOVER_ANSWERS_KEPT) this.moverAnswers.delete(this.moverAnswers.keys().next().value!)
      this.moverAnswers.set(key, answer)
    }
    return answer
  }

  /** The top movers under the filter: the head of one pre-sorted list. */
  topMovers(filter: MoverFilter): TopMoverRow[] {
    this.holdingRows()
    const list = this.movers.get(moverKeyOf(filter))?.subarray(0, filter.limit) ?? []
    const { cards, prices } = this
    const change = changeColumn(prices, filter.period)
    const rows: TopMoverRow[] = []
    for (const position of list) {
      const price = this.moverRows[position]!
      const row = this.priceCard[price]!
      const names = this.namesOf(cards.setId[row]!, cards.gameId[row]!)
      const marketplaceId = cards.marketplaceId[row]!
      rows.push({
        card_id: cards.id[row]!,
        name: cards.name[row]!,
        set_name: names.setName,
        set_slug: names.setSlug,
        game_name: names.gameName,
        game_slug: names.gameSlug,
        product_type: cards.productTypes.values[cards.productType[row]!] as TopMoverRow['product_type'],
        foil_only: cards.foilOnly[row]!,
        printing: prices.printings.values[prices.printing[price]!]!,
        market_price: prices.marketPrice.get(price),
        price_change: change.get(price),
        image_url: cards.imageUrl.get(row, marketplaceId),
        marketplace_id: marketplaceId,
        last_updated_at: prices.times.values[prices.lastUpdatedAt[price]!]!,
      })
    }
    return rows
  }

  /** Up to `limit` price rows updated after `position`, oldest first, of one game or all; `more` when others follow. */
  changesAfter(position: ChangePosition, gameId: number | undefined, limit: number): { rows: PriceRow[]; more: boolean } {
    this.holdingRows()
    const list = this.changes.get(gameId ?? '*') ?? new Int32Array(0)
    const { cards, prices } = this
    const compareToPosition = (price: number) =>
      byCodePoint(prices.times.values[prices.lastUpdatedAt[price]!]!, position.at) ||
      cards.id[this.priceCard[price]!]! - position.cardId ||
      byCodePoint(prices.printings.values[prices.printing[price]!]!, position.printing)
    let low = 0
    let high = list.length
    while (low < high) {
      const middle = (low + high) >>> 1
      if (compareToPosition(list[middle]!) <= 0) low = middle + 1
      else high = middle
    }
    const rows = Array.from(list.subarray(low, low + limit), (price) => priceRowOf(cards.fields(this.priceCard[price]!), prices.price(price)))
    return { rows, more: low + limit < list.length }
  }
}

/** A card's price rows: where they start and end in cardPrices, per card row. */
interface Grouped {
  firstPrice: Int32Array
  cardPrices: Int32Array
  priceCard: Int32Array
}

/** The period's change column. */
function changeColumn(prices: PriceColumns, period: MoverPeriod): DecimalColumn {
  return period === '24h' ? prices.priceChange24h : period === '7d' ? prices.priceChange7d : prices.priceChange30d
}

/** Per printing code: whether it is a foil-type printing. */
const foilPrintings = (prices: PriceColumns) => prices.printings.values.map(isFoilPrinting)

/** The price row of the card's first foil-type printing that has a market price (-1: none). A foil printing the source never priced does not hide a later one that it did. */
function foilPriceRow(prices: PriceColumns, cardPrices: Int32Array, from: number, to: number, foil: boolean[]): number {
  for (let at = from; at < to; at++) {
    const price = cardPrices[at]!
    if (foil[prices.printing[price]!] && !Number.isNaN(prices.marketPrice.get(price))) return price
  }
  return -1
}

/** Each code's place when the values are ordered by `compare`. */
function ranksBy(values: string[], compare: (a: string, b: string) => number): Int32Array {
  const order = values.map((_, code) => code).sort((a, b) => compare(values[a]!, values[b]!))
  const rank = new Int32Array(values.length)
  for (let place = 0; place < order.length; place++) rank[order[place]!] = place
  return rank
}

/**
 * Sorts price rows list[from, to) by their printing's rank, stable: the ranges are a card's few
 * prices. Ranks and printings are passed, not a key function: a closure made per card was 204k
 * short-lived objects at the peak of a rebuild (docs/adr/0129-the-rebuild-s-peak-and-the-type-ahead-s-tail.md).
 */
function sortByPrinting(list: Int32Array, from: number, to: number, rank: Int32Array, printing: Uint16Array): void {
  for (let i = from + 1; i < to; i++) {
    const item = list[i]!
    const itemKey = rank[printing[item]!]!
    let j = i - 1
    while (j >= from && rank[printing[list[j]!]!]! > itemKey) {
      list[j + 1] = list[j]!
      j--
    }
    list[j + 1] = item
  }
}

/** The price rows of each card, by card row, primary printing first (the rows of an id no card has are left out). */
function groupPrices(cards: CardColumns, prices: PriceColumns, bulkIndex: BulkIndex, gamesById: Map<number, GameNames>): Grouped {
  const n = cards.length
  const priceCard = new Int32Array(prices.length)
  const firstPrice = new Int32Array(n + 1)
  for (let price = 0; price < prices.length; price++) {
    const row = bulkIndex.rowOf(prices.cardId[price]!)
    priceCard[price] = row
    if (row >= 0) firstPrice[row + 1]!++
  }
  for (let row = 0; row < n; row++) firstPrice[row + 1]! += firstPrice[row]!
  const cardPrices = new Int32Array(firstPrice[n]!)
  const next = firstPrice.slice(0, n)
  for (let price = 0; price < prices.length; price++) if (priceCard[price]! >= 0) cardPrices[next[priceCard[price]!]!++] = price
  // Each game kind's printing order as a rank per printing code: a comparison is two array reads.
  const ranksOfKind = new Map<string, Int32Array>()
  for (let row = 0; row < n; row++) {
    if (firstPrice[row + 1]! - firstPrice[row]! < 2) continue
    const kind = gamesById.get(cards.gameId[row]!)?.kind ?? ''
    let ranks = ranksOfKind.get(kind)
    if (!ranks) ranksOfKind.set(kind, (ranks = ranksBy(prices.printings.values, printingOrder(kind))))
    sortByPrinting(cardPrices, firstPrice[row]!, firstPrice[row + 1]!, ranks, prices.printing)
  }
  return { firstPrice, cardPrices, priceCard }
}

/** The bulk rows' buffers: one row never spans two, so a row's place (start) names its buffer (start / BULK_CHUNK_BYTES). */
const BULK_CHUNK_BYTES = 1 << 20

/** More than a Bulk price row can take: five numbers of at most 24 characters, an ISO time and the keys. */
const BULK_ROW_MAX_BYTES = 512

// A Bulk price row's keys and punctuation, as bytes, in the order of BulkPriceRow.
const CARD_ID = Buffer.from(',{"card_id":')
const MARKET_PRICE = Buffer.from(',"market_price":')
const LOW_PRICE = Buffer.from(',"low_price":')
const FOIL_MARKET_PRICE = Buffer.from(',"foil_market_price":')
const PRICE_CHANGE_24H = Buffer.from(',"price_change_24h":')
const LAST_UPDATED_AT = Buffer.from(',"last_updated_at":')
const NULL = Buffer.from('null')

/** Copies `bytes` into `out` at `at`; returns where they end. */
function put(out: Buffer, at: number, bytes: Buffer): number {
  out.set(bytes, at)
  return at + bytes.length
}

/**
 * Every priced card's Bulk price row as JSON, each after a comma, in buffers of 1 MB, and where each
 * lies (bulkIndex). A row is numbers, nulls and one ISO timestamp, all ASCII: its bytes are written
 * straight into the buffer (keys copied, numbers as digits, each distinct time quoted once), with no
 * string per row or per number, no array of row objects and no buffer grown by copying.
 */
function serialiseBulkRows(cards: CardColumns, prices: PriceColumns, { firstPrice, cardPrices }: Grouped, bulkIndex: BulkIndex): Buffer[] {
  const foil = foilPrintings(prices)
  const times = prices.times.values.map((time) => {
    const quoted = JSON.stringify(time)
    if (Buffer.byteLength(quoted) !== quoted.length) throw new Error(`bulk rows: an update time that is not ASCII: ${quoted}`)
    return Buffer.from(quoted, 'latin1')
  })
  const chunks: Buffer[] = []
  let chunk = Buffer.allocUnsafe(BULK_CHUNK_BYTES)
  let at = 0
  for (let row = 0; row < cards.length; row++) {
    const from = firstPrice[row]!
    const to = firstPrice[row + 1]!
    if (from === to) continue
    if (at + BULK_ROW_MAX_BYTES > BULK_CHUNK_BYTES) {
      chunks.push(chunk.subarray(0, at))
      chunk = Buffer.allocUnsafe(BULK_CHUNK_BYTES)
      at = 0
    }
    const primary = cardPrices[from]!
    const foilRow = foilPriceRow(prices, cardPrices, from, to, foil)
    const id = cards.id[row]!
    const start = at
    at = put(chunk, at, CARD_ID)
    at = id >= 0 ? writeDigits(chunk, at, id) : at + chunk.write(`${id}`, at, 'latin1')
    at = prices.marketPrice.writeJson(primary, chunk, put(chunk, at, MARKET_PRICE))
    at = prices.lowPrice.writeJson(primary, chunk, put(chunk, at, LOW_PRICE))
    at = put(chunk, at, FOIL_MARKET_PRICE)
    at = foilRow < 0 ? put(chunk, at, NULL) : prices.marketPrice.writeJson(foilRow, chunk, at)
    at = prices.priceChange24h.writeJson(primary, chunk, put(chunk, at, PRICE_CHANGE_24H))
    at = put(chunk, put(chunk, at, LAST_UPDATED_AT), times[prices.lastUpdatedAt[primary]!]!)
    chunk[at++] = 0x7d // '}'
    const place = chunks.length * BULK_CHUNK_BYTES
    bulkIndex.setRange(id, place + start, place + at)
  }
  chunks.push(Buffer.from(chunk.subarray(0, at))) // the last chunk's spare room goes
  return chunks
}

/** The newest update time of the rows, by code point (ISO text), or null when there are none. */
function newestUpdate(prices: PriceColumns, rows: Int32Array): string | null {
  const used = new Uint8Array(prices.times.values.length)
  for (let i = 0; i < rows.length; i++) used[prices.lastUpdatedAt[rows[i]!]!] = 1
  let newest: string | null = null
  for (let code = 0; code < used.length; code++) {
    const time = prices.times.values[code]!
    if (used[code] && (newest === null || time > newest)) newest = time
  }
  return newest
}

/** The search index over every card, its prices already in printing order (the primary first). */
function buildSearch(cards: CardColumns, prices: PriceColumns, firstPrice: Int32Array, cardPrices: Int32Array): SearchIndex {
  // Cards share a few sets of printings: one array per set (by a bit per printing, while there are few), not one per card.
  const shared = new Map<number, readonly string[]>()
  const byBits = prices.printings.values.length <= 30
  const printingsOf = (row: number): readonly string[] => {
    let bits = 0
    if (byBits) for (let at = firstPrice[row]!; at < firstPrice[row + 1]!; at++) bits |= 1 << prices.printing[cardPrices[at]!]!
    let printings = byBits ? shared.get(bits) : undefined
    if (!printings) {
      const own: string[] = []
      for (let at = firstPrice[row]!; at < firstPrice[row + 1]!; at++) own.push(prices.printings.values[prices.printing[cardPrices[at]!]!]!)
      printings = own
      if (byBits) shared.set(bits, own)
    }
    return printings
  }
  // One object refilled per card: the index reads a card's fields and lets it go.
  const card: SearchableCard = { id: 0, name: '', cleanName: '', gameId: 0, setId: 0, productType: '', rarity: '', printings: [], marketPrice: null }
  return SearchIndex.build({
    length: cards.length,
    at(row) {
      const primary = firstPrice[row]! < firstPrice[row + 1]! ? cardPrices[firstPrice[row]!]! : -1
      card.id = cards.id[row]!
      card.name = cards.name[row]!
      card.cleanName = cards.cleanName[row]!
      card.gameId = cards.gameId[row]!
      card.setId = cards.setId[row]!
      card.productType = cards.productTypes.values[cards.productType[row]!]!
      card.rarity = cards.rarities.values[cards.rarity[row]!]!
      card.printings = printingsOf(row)
      card.marketPrice = primary < 0 ? null : orNull(prices.marketPrice.get(primary))
      return card
    },
  })
}

/** A short, stable name for the data behind a fingerprint. */
function versionOf(fingerprint: string): string {
  return Bun.hash(fingerprint).toString(36)
}

/** Card rows by ascending id: the order read when it already is one, else sorted (keys packed into doubles, sorted natively). */
function cardsById(ids: Int32Array): Int32Array {
  const n = ids.length
  const rows = new Int32Array(n)
  let sorted = true
  for (let row = 0; row < n; row++) {
    rows[row] = row
    if (row > 0 && ids[row - 1]! > ids[row]!) sorted = false
  }
  if (sorted) return rows
  if (n >= 2 ** 22) return rows.sort((a, b) => ids[a]! - ids[b]!)
  // id × 2^22 + row is exact in a double (|id| < 2^31, row < 2^22): ordering the keys orders rows by id.
  const keys = new Float64Array(n)
  for (let row = 0; row < n; row++) keys[row] = ids[row]! * 2 ** 22 + row
  keys.sort()
  for (let i = 0; i < n; i++) rows[i] = keys[i]! - Math.floor(keys[i]! / 2 ** 22) * 2 ** 22
  return rows
}

/**
 * Every price row by card id, then printing (code point order): the tie-break order of the movers
 * and the change feed, reached with small per-card sorts instead of one sort of every row.
 */
function inFeedOrder(cards: CardColumns, prices: PriceColumns, { firstPrice, cardPrices }: Grouped): Int32Array {
  const rank = ranksBy(prices.printings.values, byCodePoint)
  const feed = new Int32Array(cardPrices.length)
  let at = 0
  const byId = cardsById(cards.id)
  for (let i = 0; i < byId.length; i++) {
    const row = byId[i]!
    const from = firstPrice[row]!
    const to = firstPrice[row + 1]!
    // Copied by a loop: a subarray per card was another 204k short-lived objects.
    for (let price = from; price < to; price++) feed[at + price - from] = cardPrices[price]!
    sortByPrinting(feed, at, at + to - from, rank, prices.printing)
    at += to - from
  }
  return feed
}

/**
 * Every printing with a market price and a change over the period, ranked once per period
 * (gains: largest first; losses: largest drop first; ties by card id, then printing), then dealt
 * into one list per game, product type and printing, with ANY lists across each (eight per row),
 * so every filter combination is the head of a list. An unchanged price is neither a gain nor a
 * loss. Lists hold positions in one array of rows, at most MAX_MOVERS each (no query reads past
 * that), all in one Int32Array per period and direction: nothing grows and the collector has no
 * references to trace.
 */
function buildMovers(feed: Int32Array, cards: CardColumns, prices: PriceColumns, priceCard: Int32Array): { moverRows: Int32Array; movers: Map<string, Int32Array> } {
  // In tie-break order (card id, then printing), so a tie on the change is settled by position alone.
  let count = 0
  // Index loops here and in buildChanges: for…of over a typed array made an object per element until the JIT caught up (docs/adr/0129-the-rebuild-s-peak-and-the-type-ahead-s-tail.md).
  for (let i = 0; i < feed.length; i++) if (!Number.isNaN(prices.marketPrice.get(feed[i]!))) count++
  const rows = new Int32Array(count)
  count = 0
  for (let i = 0; i < feed.length; i++) if (!Number.isNaN(prices.marketPrice.get(feed[i]!))) rows[count++] = feed[i]!

  // Each row's group (game, product type, printing): by game, then type and printing codes, without a string key per row.
  const groups: [number, string, string][] = []
  const groupOfRow = new Int32Array(count)
  const groupIds = new Map<number, Map<number, number>>()
  for (let i = 0; i < count; i++) {
    const price = rows[i]!
    const card = priceCard[price]!
    const gameId = cards.gameId[card]!
    const type = cards.productType[card]!
    const printing = prices.printing[price]!
    let ofGame = groupIds.get(gameId)
    if (!ofGame) groupIds.set(gameId, (ofGame = new Map()))
    let id = ofGame.get(type * 65_536 + printing)
    if (id === undefined) {
      ofGame.set(type * 65_536 + printing, (id = groups.push([gameId, cards.productTypes.values[type]!, prices.printings.values[printing]!]) - 1))
    }
    groupOfRow[i] = id
  }

  // The lists, each a (game, type, printing) filter with ANY for "all", the same for every period
  // and direction; the eight lists of group g are listsOfGroup[g * 8] to [g * 8 + 7].
  const filters: [number | null, string | null, string | null][] = []
  const filterIds = new Map<string, number>()
  const listsOfGroup = new Int32Array(groups.length * LISTS_PER_ROW)
  let at = 0
  for (const [gameId, type, printing] of groups) {
    for (const g of [gameId, ANY] as const) {
      for (const t of [type, ANY]) {
        for (const p of [printing, ANY]) {
          const name = JSON.stringify([g, t, p])
          let id = filterIds.get(name)
          if (id === undefined) filterIds.set(name, (id = filters.push([g, t, p]) - 1))
          listsOfGroup[at++] = id
        }
      }
    }
  }

  const movers = new Map<string, Int32Array>()
  const changes = new Float64Array(count)
  for (const period of MOVER_PERIODS) {
    const column = changeColumn(prices, period)
    for (let i = 0; i < count; i++) changes[i] = column.get(rows[i]!)
    const ranked = rankByMove(changes)
    for (const direction of MOVER_DIRECTIONS) {
      const moved = ranked[direction]
      // A query takes at most MAX_MOVERS rows from the head of a list, so a list stops there: each
      // has its own MAX_MOVERS places in one array, filled in ranked order.
      const all = new Int32Array(filters.length * MAX_MOVERS)
      const sizes = new Int32Array(filters.length)
      for (let m = 0; m < moved.length; m++) {
        const row = moved[m]!
        const first = groupOfRow[row]! * LISTS_PER_ROW
        for (let l = first; l < first + LISTS_PER_ROW; l++) {
          const list = listsOfGroup[l]!
          if (sizes[list]! < MAX_MOVERS) all[list * MAX_MOVERS + sizes[list]!++] = row
        }
      }
      for (const [list, [g, t, p]] of filters.entries()) {
        if (sizes[list]! > 0) movers.set(moverKey(period, direction, g, t, p), all.subarray(list * MAX_MOVERS, list * MAX_MOVERS + sizes[list]!))
      }
    }
  }
  return { moverRows: rows, movers }
}

/**
 * The positions of the rows that moved, each way, biggest move first, ties in position order;
 * NaN (no change known) and zero are neither. Without a comparator: the distinct values (few:
 * changes are stored rounded to hundredths of a percent, so about 3k–14k on the large catalog)
 * are sorted natively, and a counting sort by each row's rank (stable, so ties keep position
 * order) gives every row's place; sorting positions through a comparator was half of the
 * snapshot's build time.
 */
export function rankByMove(changes: Float64Array): Record<MoverDirection, Int32Array> {
  const seen = new Set<number>()
  for (let i = 0; i < changes.length; i++) {
    const change = changes[i]!
    if (change !== 0 && !Number.isNaN(change)) seen.add(change)
  }
  const ranks = Float64Array.from(seen).sort()
  const distinct = ranks.length
  const rankOf = new Map<number, number>()
  for (let rank = 0; rank < distinct; rank++) rankOf.set(ranks[rank]!, rank)

  // Row counts per rank, then where each rank's rows start (starts[distinct]: all of them).
  const rankOfRow = new Int32Array(changes.length).fill(-1)
  const starts = new Int32Array(distinct + 1)
  for (let i = 0; i < changes.length; i++) {
    const rank = rankOf.get(changes[i]!)
    if (rank === undefined) continue
    rankOfRow[i] = rank
    starts[rank + 1]!++
  }
  for (let rank = 0; rank < distinct; rank++) starts[rank + 1]! += starts[rank]!
  const ascending = new Int32Array(starts[distinct]!)
  const next = starts.slice(0, distinct)
  for (let i = 0; i < changes.length; i++) if (rankOfRow[i]! >= 0) ascending[next[rankOfRow[i]!]!++] = i

  // Losses are the ranks below zero, already in order; gains are the ranks above, taken from the top.
  let firstGain = 0
  while (firstGain < distinct && ranks[firstGain]! < 0) firstGain++
  const down = ascending.subarray(0, starts[firstGain]!)
  const up = new Int32Array(ascending.length - down.length)
  let at = 0
  for (let rank = distinct - 1; rank >= firstGain; rank--) {
    up.set(ascending.subarray(starts[rank]!, starts[rank + 1]!), at)
    at += starts[rank + 1]! - starts[rank]!
  }
  return { up, down }
}

/**
 * Every price row by update time, then card id, then printing: all games, and each game. Rows
 * share few distinct update times (one per sync), so the feed order (card id, printing) is dealt
 * into its times' places by a counting sort over the times' ranks; each game's list is the same
 * order, its own rows only.
 */
function buildChanges(feed: Int32Array, cards: CardColumns, prices: PriceColumns, priceCard: Int32Array): Map<number | '*', Int32Array> {
  const rank = ranksBy(prices.times.values, byCodePoint)
  const starts = new Int32Array(rank.length + 1)
  for (let i = 0; i < feed.length; i++) starts[rank[prices.lastUpdatedAt[feed[i]!]!]! + 1]!++
  for (let r = 0; r < rank.length; r++) starts[r + 1]! += starts[r]!
  const all = new Int32Array(feed.length)
  for (let i = 0; i < feed.length; i++) all[starts[rank[prices.lastUpdatedAt[feed[i]!]!]!]!++] = feed[i]!

  const sizes = new Map<number, number>()
  for (let i = 0; i < all.length; i++) {
    const gameId = cards.gameId[priceCard[all[i]!]!]!
    sizes.set(gameId, (sizes.get(gameId) ?? 0) + 1)
  }
  const byGame = new Int32Array(all.length)
  const next = new Map<number, number>()
  const changes = new Map<number | '*', Int32Array>([['*', all]])
  let at = 0
  for (const [gameId, size] of sizes) {
    next.set(gameId, at)
    changes.set(gameId, byGame.subarray(at, at + size))
    at += size
  }
  for (let i = 0; i < all.length; i++) {
    const price = all[i]!
    const gameId = cards.gameId[priceCard[price]!]!
    const place = next.get(gameId)!
    byGame[place] = price
    next.set(gameId, place + 1)
  }
  return changes
}
