import type { Price, PriceRow } from '../catalog/model'
import { isFoilPrinting, printingOrder } from '../catalog/printings'
import { toPrice } from '../catalog/service'
import type { BulkPriceRow, MoverDirection, MoverPeriod, TopMoverRow } from '../prices/model'
import { MOVER_DIRECTIONS, MOVER_PERIODS } from '../prices/model'
import type { SnapshotSource } from './repo'

/** A card as the snapshot keeps it: what bulk rows and mover rows need, and its prices. */
export interface SnapshotCard {
  id: number
  name: string
  setName: string
  gameName: string
  gameId: number
  marketplaceId: number
  productType: TopMoverRow['product_type']
  foilOnly: number
  imageUrl: string
  /** The spec's Price objects, primary printing first (DESIGN decision 3). */
  prices: Price[]
  bulk: BulkPriceRow
  /** Where `bulk`, serialised once at build time, lies in the snapshot's bulk buffer. */
  bulkStart: number
  bulkEnd: number
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

const moverKey = (period: MoverPeriod, direction: MoverDirection, gameId: number | '*', type: string) =>
  `${period}|${direction}|${gameId}|${type}`

const byCodePoint = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

const compareToPosition = (price: Price, position: ChangePosition) =>
  byCodePoint(price.last_updated_at, position.at) || price.card_id - position.cardId || byCodePoint(price.printing, position.printing)

/**
 * An immutable, in-process copy of every card's current prices (DESIGN sections 2 and 5), with
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
  /** Every card's Bulk price row as UTF-8 JSON, back to back (see SnapshotCard.bulkStart). */
  private readonly bulkBuffer: Buffer
  /** Per period, direction, game (or '*') and product type (or '*'): price rows, biggest move first. */
  private readonly movers: Map<string, Price[]>
  /** Per game (and '*'): price rows by update time, then card id, then printing. */
  private readonly changes: Map<number | '*', Price[]>

  private constructor(
    readonly version: string,
    readonly builtAt: Date,
    readonly fingerprint: string,
    parts: {
      cards: Map<number, SnapshotCard>
      gamesBySlug: Map<string, number>
      bulkBuffer: Buffer
      movers: Map<string, Price[]>
      changes: Map<number | '*', Price[]>
      priceCount: number
      asOf: string | null
    },
  ) {
    this.cards = parts.cards
    this.gamesBySlug = parts.gamesBySlug
    this.bulkBuffer = parts.bulkBuffer
    this.movers = parts.movers
    this.changes = parts.changes
    this.cardCount = parts.cards.size
    this.priceCount = parts.priceCount
    this.asOf = parts.asOf
  }

  static build(source: SnapshotSource, builtAt: Date): PriceSnapshot {
    const setNames = new Map(source.sets.map((set) => [set.id, set.name]))
    const gamesById = new Map(source.games.map((game) => [game.id, game]))
    const cards = new Map<number, SnapshotCard>()
    for (const row of source.cards) {
      cards.set(row.id, {
        id: row.id,
        name: row.name,
        setName: setNames.get(row.setId) ?? '',
        gameName: gamesById.get(row.gameId)?.name ?? '',
        gameId: row.gameId,
        marketplaceId: row.marketplaceId,
        productType: row.productType as SnapshotCard['productType'],
        foilOnly: row.foilOnly,
        imageUrl: row.imageUrl,
        prices: [],
        bulk: undefined as never,
        bulkStart: 0,
        bulkEnd: 0,
      })
    }
    let asOf: string | null = null
    for (const row of source.prices) {
      const price = toPrice(row)
      cards.get(row.cardId)?.prices.push(price)
      if (asOf === null || price.last_updated_at > asOf) asOf = price.last_updated_at
    }
    const bulkJson: string[] = []
    let bulkBytes = 0
    const orders = new Map<number, (a: string, b: string) => number>()
    for (const card of cards.values()) {
      let order = orders.get(card.gameId)
      if (!order) orders.set(card.gameId, (order = printingOrder(gamesById.get(card.gameId)?.kind ?? '')))
      card.prices.sort((a, b) => order(a.printing, b.printing))
      const primary = card.prices[0]
      const foil = card.prices.find((price) => isFoilPrinting(price.printing))
      card.bulk = {
        card_id: card.id,
        market_price: primary?.market_price ?? null,
        low_price: primary?.low_price ?? null,
        foil_market_price: foil?.market_price ?? null,
        price_change_24h: primary?.price_change_24h ?? null,
        last_updated_at: primary?.last_updated_at ?? null,
      }
      const json = JSON.stringify(card.bulk)
      card.bulkStart = bulkBytes
      bulkBytes += Buffer.byteLength(json)
      card.bulkEnd = bulkBytes
      bulkJson.push(json)
    }
    return new PriceSnapshot(versionOf(source.fingerprint), builtAt, source.fingerprint, {
      cards,
      gamesBySlug: new Map(source.games.map((game) => [game.slug, game.id])),
      bulkBuffer: Buffer.from(bulkJson.join('')),
      movers: buildMovers(cards),
      changes: buildChanges(cards),
      priceCount: source.prices.length,
      asOf,
    })
  }

  card(id: number): SnapshotCard | undefined {
    return this.cards.get(id)
  }

  /**
   * A JSON array of these cards' Bulk price rows as bytes, copied from the serialised rows: no
   * serialising and no UTF-8 encoding per request (500 rows take a few µs).
   */
  bulkRowsJson(cards: SnapshotCard[]): Uint8Array {
    let length = 2 + Math.max(0, cards.length - 1)
    for (const card of cards) length += card.bulkEnd - card.bulkStart
    const out = Buffer.allocUnsafe(length)
    let at = 0
    out[at++] = 0x5b // [
    for (let i = 0; i < cards.length; i++) {
      const card = cards[i]!
      if (i > 0) out[at++] = 0x2c // ,
      // Buffer.copy, not set(subarray()): a view per row was half of this function's time.
      at += this.bulkBuffer.copy(out, at, card.bulkStart, card.bulkEnd)
    }
    out[at] = 0x5d // ]
    return out
  }

  /** The game's id, or undefined when no game has the slug. */
  gameId(slug: string): number | undefined {
    return this.gamesBySlug.get(slug)
  }

  /** The top movers under the filter: a walk down a pre-sorted list, skipping other printings. */
  topMovers(filter: MoverFilter): TopMoverRow[] {
    const list = this.movers.get(moverKey(filter.period, filter.direction, filter.gameId ?? '*', filter.type ?? '*')) ?? []
    const field = CHANGE_FIELD[filter.period]
    const rows: TopMoverRow[] = []
    for (const price of list) {
      if (rows.length === filter.limit) break
      if (filter.printing !== undefined && price.printing !== filter.printing) continue
      const card = this.cards.get(price.card_id)!
      rows.push({
        card_id: card.id,
        name: card.name,
        set_name: card.setName,
        game_name: card.gameName,
        product_type: card.productType,
        foil_only: card.foilOnly,
        printing: price.printing,
        market_price: price.market_price!,
        price_change: price[field]!,
        image_url: card.imageUrl,
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
    const rows = list.slice(low, low + limit).map((price) => this.priceRow(price))
    return { rows, more: low + limit < list.length }
  }

  /** DESIGN decision 12's price row: the card's identity around one printing's Price. */
  private priceRow(price: Price): PriceRow {
    const card = this.cards.get(price.card_id)!
    const { card_id, ...fields } = price
    return {
      card_id,
      name: card.name,
      marketplace_id: card.marketplaceId,
      product_type: card.productType,
      foil_only: card.foilOnly,
      ...fields,
      image_url: card.imageUrl,
    }
  }
}

/** A short, stable name for the data behind a fingerprint. */
function versionOf(fingerprint: string): string {
  return Bun.hash(fingerprint).toString(36)
}

/**
 * Every printing with a market price and a change over the period, sorted once per period and
 * direction (gains: largest first; losses: largest drop first; ties by card id, then printing),
 * then dealt into one list per game and product type, with '*' lists across them. An unchanged
 * price is neither a gain nor a loss.
 */
function buildMovers(cards: Map<number, SnapshotCard>): Map<string, Price[]> {
  const movers = new Map<string, Price[]>()
  const add = (key: string, price: Price) => {
    const list = movers.get(key)
    if (list) list.push(price)
    else movers.set(key, [price])
  }
  for (const period of MOVER_PERIODS) {
    const field = CHANGE_FIELD[period]
    const candidates: Price[] = []
    for (const card of cards.values()) {
      for (const price of card.prices) if (price.market_price !== null && price[field] !== null) candidates.push(price)
    }
    for (const direction of MOVER_DIRECTIONS) {
      const sign = direction === 'up' ? 1 : -1
      const moved = candidates.filter((price) => price[field]! * sign > 0)
      moved.sort((a, b) => (b[field]! - a[field]!) * sign || a.card_id - b.card_id || byCodePoint(a.printing, b.printing))
      for (const price of moved) {
        const card = cards.get(price.card_id)!
        for (const gameId of [card.gameId, '*'] as const) {
          for (const type of [card.productType, '*']) add(moverKey(period, direction, gameId, type), price)
        }
      }
    }
  }
  return movers
}

/** Every price row by update time, then card id, then printing: all games, and each game. */
function buildChanges(cards: Map<number, SnapshotCard>): Map<number | '*', Price[]> {
  const all: Price[] = []
  for (const card of cards.values()) all.push(...card.prices)
  all.sort((a, b) => byCodePoint(a.last_updated_at, b.last_updated_at) || a.card_id - b.card_id || byCodePoint(a.printing, b.printing))
  const changes = new Map<number | '*', Price[]>([['*', all]])
  for (const price of all) {
    const gameId = cards.get(price.card_id)!.gameId
    const list = changes.get(gameId)
    if (list) list.push(price)
    else changes.set(gameId, [price])
  }
  return changes
}
