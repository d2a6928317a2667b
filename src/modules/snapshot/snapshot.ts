import type { Price, PriceRow } from '../catalog/model'
import { isFoilPrinting, printingOrder } from '../catalog/printings'
import { priceRowOf } from '../catalog/service'
import { BulkIndex, type BulkSelection } from './bulk-index'
import type { BulkPriceRow, MoverDirection, MoverPeriod, TopMoverRow } from './model'
import { MAX_MOVERS, MOVER_DIRECTIONS, MOVER_PERIODS } from './model'
import type { SnapshotSource } from './repo'

/** A card as the snapshot keeps it: what bulk rows and mover rows need, and its prices. */
export interface SnapshotCard {
  id: number
  name: string
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

const CHANGE_FIELD = { '24h': 'price_change_24h', '7d': 'price_change_7d', '30d': 'price_change_30d' } as const

/** Serialised movers answers a snapshot keeps: a few MB at most (50 rows of about 400 bytes each). */
const MOVER_ANSWERS_KEPT = 2_048

/** "Any" in a movers key: null, which no game, type or printing name can equal. */
const ANY = null

/** The movers lists a price row is in: its game or any, its product type or any, its printing or any. */
const LISTS_PER_ROW = 8

const moverKey = (period: MoverPeriod, direction: MoverDirection, gameId: number | null, type: string | null, printing: string | null) =>
  JSON.stringify([period, direction, gameId, type, printing])

/** The key of the list a filter reads (its limit aside). */
const moverKeyOf = (filter: MoverFilter) => moverKey(filter.period, filter.direction, filter.gameId ?? ANY, filter.type ?? ANY, filter.printing ?? ANY)

const byCodePoint = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

const compareToPosition = (price: Price, position: ChangePosition) =>
  byCodePoint(price.last_updated_at, position.at) || price.card_id - position.cardId || byCodePoint(price.printing, position.printing)

/**
 * An immutable, in-process copy of every card's current prices (docs/adr/0020-the-snapshot.md), with
 * each bulk row serialised and the movers pre-sorted, so bulk prices and top movers are lookups
 * and slices. A new one is built off the request path and swapped in whole (see store.ts); a
 * request holds the one it started with.
 */
export class PriceSnapshot {
  readonly cardCount: number
  readonly priceCount: number
  /** Newest `last_updated_at` of any price; null when there are none. */
  readonly asOf: string | null
  private readonly cards: Map<number, SnapshotCard>
  private readonly gamesBySlug: Map<string, number>
  /** Every card's Bulk price row as UTF-8 JSON, each after a comma (the first after `[`), back to back (bulkIndex says where). */
  private readonly bulkBuffer: Buffer
  private readonly bulkIndex: BulkIndex
  /** Every card's Bulk price row as an object (for msgpack), at the index bulkIndex gives. */
  private readonly bulkRows: BulkPriceRow[]
  /** The movers' rows: every printing with a market price, by card id, then printing. */
  private readonly moverRows: RowsWithCards
  /** Per period, direction, game, product type and printing (each or ANY): the first MAX_MOVERS positions in moverRows, biggest move first. */
  private readonly movers: Map<string, Int32Array>
  /** Per game (and '*'): price rows by update time, then card id, then printing. */
  private readonly changes: Map<number | '*', Price[]>
  /** Movers answers serialised so far, by filter (see topMoversJson). */
  private readonly moverAnswers = new Map<string, { json: string; count: number }>()

  private constructor(
    readonly version: string,
    readonly builtAt: Date,
    readonly fingerprint: string,
    parts: {
      cards: Map<number, SnapshotCard>
      gamesBySlug: Map<string, number>
      bulkBuffer: Buffer
      bulkIndex: BulkIndex
      bulkRows: BulkPriceRow[]
      moverRows: RowsWithCards
      movers: Map<string, Int32Array>
      changes: Map<number | '*', Price[]>
      priceCount: number
      asOf: string | null
    },
  ) {
    this.cards = parts.cards
    this.gamesBySlug = parts.gamesBySlug
    this.bulkBuffer = parts.bulkBuffer
    this.bulkIndex = parts.bulkIndex
    this.bulkRows = parts.bulkRows
    this.moverRows = parts.moverRows
    this.movers = parts.movers
    this.changes = parts.changes
    this.cardCount = parts.cards.size
    this.priceCount = parts.priceCount
    this.asOf = parts.asOf
  }

  static build(source: SnapshotSource, builtAt: Date): PriceSnapshot {
    const setsById = new Map(source.sets.map((set) => [set.id, set]))
    const gamesById = new Map(source.games.map((game) => [game.id, game]))
    const cards = new Map<number, SnapshotCard>()
    for (const row of source.cards) {
      const set = setsById.get(row.setId)
      const game = gamesById.get(row.gameId)
      cards.set(row.id, {
        id: row.id,
        name: row.name,
        setName: set?.name ?? '',
        setSlug: set?.slug ?? '',
        gameName: game?.name ?? '',
        gameSlug: game?.slug ?? '',
        gameId: row.gameId,
        marketplaceId: row.marketplaceId,
        productType: row.productType as SnapshotCard['productType'],
        foilOnly: row.foilOnly,
        imageUrl: row.imageUrl,
        prices: [],
      })
    }
    let asOf: string | null = null
    for (const price of source.prices) {
      cards.get(price.card_id)?.prices.push(price)
      if (asOf === null || price.last_updated_at > asOf) asOf = price.last_updated_at
    }
    const bulkRows: BulkPriceRow[] = []
    const unpriced: number[] = []
    const orders = new Map<number, (a: string, b: string) => number>()
    for (const card of cards.values()) {
      if (card.prices.length === 0) {
        unpriced.push(card.id)
        continue
      }
      if (card.prices.length > 1) {
        let order = orders.get(card.gameId)
        if (!order) orders.set(card.gameId, (order = printingOrder(gamesById.get(card.gameId)?.kind ?? '')))
        card.prices.sort((a, b) => order(a.printing, b.printing))
      }
      const primary = card.prices[0]!
      // A foil printing the source never priced does not hide a later one that it did.
      const foil = card.prices.find((price) => isFoilPrinting(price.printing) && price.market_price !== null)
      bulkRows.push({
        card_id: card.id,
        market_price: primary.market_price,
        low_price: primary.low_price,
        foil_market_price: foil?.market_price ?? null,
        price_change_24h: primary.price_change_24h,
        last_updated_at: primary.last_updated_at,
      })
    }
    const { bulkBuffer, bulkIndex } = serialiseBulkRows(bulkRows, unpriced)
    const ordered = inFeedOrder(cards)
    return new PriceSnapshot(versionOf(source.fingerprint), builtAt, source.fingerprint, {
      cards,
      gamesBySlug: new Map(source.games.map((game) => [game.slug, game.id])),
      bulkBuffer,
      bulkIndex,
      bulkRows,
      ...buildMovers(ordered),
      changes: buildChanges(ordered, cards),
      priceCount: source.prices.length,
      asOf,
    })
  }

  card(id: number): SnapshotCard | undefined {
    return this.cards.get(id)
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
      parts[i + 1] = this.bulkBuffer.subarray(start, end)
      length += end - start
    }
    const tailBytes = Buffer.from(`]${tail}`)
    parts[count + 1] = tailBytes
    const out = Buffer.concat(parts, length + tailBytes.length)
    out[headBytes.length] = 0x5b // the first row's leading comma opens the array
    return out
  }

  /** The selected cards' Bulk price rows as objects. */
  bulkObjects(selection: BulkSelection): BulkPriceRow[] {
    return Array.from(selection.slots.subarray(0, selection.count), (slot) => this.bulkRows[this.bulkIndex.row(slot)]!)
  }

  /** The game's id, or undefined when no game has the slug. */
  gameId(slug: string): number | undefined {
    return this.gamesBySlug.get(slug)
  }

  /**
   * The top movers under the filter as a JSON array, serialised on first use and kept for the
   * snapshot's life (it never changes): the same few filters are asked again and again. At most
   * MOVER_ANSWERS_KEPT are kept; past that the oldest goes.
   */
  topMoversJson(filter: MoverFilter): { json: string; count: number } {
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
    const list = this.movers.get(moverKeyOf(filter))?.subarray(0, filter.limit) ?? []
    const field = CHANGE_FIELD[filter.period]
    const rows: TopMoverRow[] = []
    for (const position of list) {
      const price = this.moverRows.prices[position]!
      const card = this.moverRows.cards[position]!
      rows.push({
        card_id: card.id,
        name: card.name,
        set_name: card.setName,
        set_slug: card.setSlug,
        game_name: card.gameName,
        game_slug: card.gameSlug,
        product_type: card.productType,
        foil_only: card.foilOnly,
        printing: price.printing,
        market_price: price.market_price!,
        price_change: price[field]!,
        image_url: card.imageUrl,
        marketplace_id: card.marketplaceId,
        last_updated_at: price.last_updated_at,
      })
    }
    return rows
  }

  /** Up to `limit` price rows updated after `position`, oldest first, of one game or all; `more` when others follow. */
  changesAfter(position: ChangePosition, gameId: number | undefined, limit: number): { rows: PriceRow[]; more: boolean } {
    const list = this.changes.get(gameId ?? '*') ?? []
    let low = 0
    let high = list.length
    while (low < high) {
      const middle = (low + high) >>> 1
      if (compareToPosition(list[middle]!, position) <= 0) low = middle + 1
      else high = middle
    }
    const rows = list.slice(low, low + limit).map((price) => priceRowOf(this.cards.get(price.card_id)!, price))
    return { rows, more: low + limit < list.length }
  }
}

/**
 * The rows as one JSON array, `[{…},{…}]` (cards without prices have none: the index knows them apart), in one JSON.stringify (a call per row cost a third more,
 * with a byteLength each), and where each row lies in it: from the comma before it to its closing
 * brace. A row holds numbers, nulls and one ISO timestamp, never a `}` inside it, so the braces
 * mark the rows; the count is checked.
 */
function serialiseBulkRows(rows: BulkPriceRow[], unpriced: number[]): { bulkBuffer: Buffer; bulkIndex: BulkIndex } {
  const bulkBuffer = Buffer.from(JSON.stringify(rows))
  // The array's `[` becomes a comma like every other row's: the first row stored may be asked for after others.
  bulkBuffer[0] = 0x2c
  const bulkIndex = new BulkIndex(rows.length + unpriced.length)
  for (const id of unpriced) bulkIndex.addUnpriced(id)
  let start = 0
  let row = 0
  for (let at = bulkBuffer.indexOf(0x7d); at !== -1; at = bulkBuffer.indexOf(0x7d, at + 1)) {
    if (row === rows.length) throw new Error('bulk rows: a brace inside a row')
    bulkIndex.add(rows[row]!.card_id, start, at + 1, row)
    start = at + 1
    row++
  }
  if (row !== rows.length) throw new Error(`bulk rows: ${row} rows found for ${rows.length}`)
  return { bulkBuffer, bulkIndex }
}

/** A short, stable name for the data behind a fingerprint. */
function versionOf(fingerprint: string): string {
  return Bun.hash(fingerprint).toString(36)
}

/** Price rows, each beside its card (same index). */
interface RowsWithCards {
  prices: Price[]
  cards: SnapshotCard[]
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
function buildMovers(ordered: RowsWithCards): { moverRows: RowsWithCards; movers: Map<string, Int32Array> } {
  // In tie-break order (card id, then printing), so a tie on the change is settled by position alone.
  const rows: RowsWithCards = { prices: [], cards: [] }
  for (let i = 0; i < ordered.prices.length; i++) {
    if (ordered.prices[i]!.market_price === null) continue
    rows.prices.push(ordered.prices[i]!)
    rows.cards.push(ordered.cards[i]!)
  }
  const count = rows.prices.length

  // Each row's group (game, product type, printing): by game and type, then printing, without
  // building a string key per row.
  const groups: [number, string, string][] = []
  const groupOfRow = new Int32Array(count)
  const groupIds = new Map<number, Map<string, Map<string, number>>>()
  for (let i = 0; i < count; i++) {
    const { gameId, productType } = rows.cards[i]!
    const printing = rows.prices[i]!.printing
    let ofGame = groupIds.get(gameId)
    if (!ofGame) groupIds.set(gameId, (ofGame = new Map()))
    let ofType = ofGame.get(productType)
    if (!ofType) ofGame.set(productType, (ofType = new Map()))
    let id = ofType.get(printing)
    if (id === undefined) ofType.set(printing, (id = groups.push([gameId, productType, printing]) - 1))
    groupOfRow[i] = id
  }

  // Each period's changes, read in one pass by fixed names (a computed name per read is slower).
  const changesOf: Record<MoverPeriod, Float64Array> = { '24h': new Float64Array(count), '7d': new Float64Array(count), '30d': new Float64Array(count) }
  for (let i = 0; i < count; i++) {
    const price = rows.prices[i]!
    changesOf['24h'][i] = price.price_change_24h ?? Number.NaN
    changesOf['7d'][i] = price.price_change_7d ?? Number.NaN
    changesOf['30d'][i] = price.price_change_30d ?? Number.NaN
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
  for (const period of MOVER_PERIODS) {
    const ranked = rankByMove(changesOf[period])
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
 * Every price row by card id, then printing (code point order), with its card: the tie-break order
 * of the movers and the change feed, reached with small per-card sorts instead of one sort of
 * every row.
 */
function inFeedOrder(cards: Map<number, SnapshotCard>): RowsWithCards {
  const ordered: RowsWithCards = { prices: [], cards: [] }
  for (const card of [...cards.values()].sort((a, b) => a.id - b.id)) {
    for (const price of [...card.prices].sort((a, b) => byCodePoint(a.printing, b.printing))) {
      ordered.prices.push(price)
      ordered.cards.push(card)
    }
  }
  return ordered
}

/**
 * Every price row by update time, then card id, then printing: all games, and each game. Rows
 * share few distinct update times (one per sync), so they are bucketed by time in card order and
 * only the distinct times are sorted.
 */
function buildChanges(ordered: RowsWithCards, cards: Map<number, SnapshotCard>): Map<number | '*', Price[]> {
  const byTime = new Map<string, Price[]>()
  for (const price of ordered.prices) {
    const bucket = byTime.get(price.last_updated_at)
    if (bucket) bucket.push(price)
    else byTime.set(price.last_updated_at, [price])
  }
  const all: Price[] = []
  for (const time of [...byTime.keys()].sort(byCodePoint)) for (const price of byTime.get(time)!) all.push(price)
  const changes = new Map<number | '*', Price[]>([['*', all]])
  for (const price of all) {
    const gameId = cards.get(price.card_id)!.gameId
    const list = changes.get(gameId)
    if (list) list.push(price)
    else changes.set(gameId, [price])
  }
  return changes
}
