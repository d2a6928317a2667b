import { describe, expect, test } from 'bun:test'
import type { Price } from '../catalog/model'
import { isFoilPrinting, printingOrder } from '../catalog/printings'
import { snapshotCardWithPrice } from '../catalog/service'
import { CardColumns, PriceColumns } from './columns'
import type { SnapshotSource } from './repo'
import { PriceSnapshot, rankByMove } from './snapshot'

/** The order rankByMove must give, by the plain comparator sort it replaces. */
function bySort(changes: Float64Array, sign: 1 | -1): number[] {
  const moved: number[] = []
  for (let i = 0; i < changes.length; i++) if (changes[i]! * sign > 0) moved.push(i)
  return moved.sort((a, b) => (changes[b]! - changes[a]!) * sign || a - b)
}

describe('rankByMove', () => {
  test('gains largest first and losses largest drop first, ties in position order, zero and NaN in neither', () => {
    const changes = Float64Array.from([0.5, -2, Number.NaN, 0, 0.5, -2, 3, -0, -0.25, 3, 0.5])
    const { up, down } = rankByMove(changes)
    expect([...up]).toEqual([6, 9, 0, 4, 10])
    expect([...down]).toEqual([1, 5, 8])
  })

  test.each([
    ['few distinct values, many ties', 20_000, () => Math.round((Math.random() - 0.5) * 20) / 4],
    ['all distinct', 20_000, () => (Math.random() - 0.5) * 1e3],
    ['tiny and huge magnitudes', 5_000, () => (Math.random() < 0.5 ? -1 : 1) * 10 ** (Math.random() * 40 - 20)],
  ])('%s: the same order as sorting positions with a comparator', (_, length, draw) => {
    const changes = Float64Array.from({ length }, () => (Math.random() < 0.1 ? Number.NaN : Math.random() < 0.1 ? 0 : draw()))
    const { up, down } = rankByMove(changes)
    expect([...up]).toEqual(bySort(changes, 1))
    expect([...down]).toEqual(bySort(changes, -1))
  })

  test('nothing moved, or nothing at all', () => {
    for (const changes of [new Float64Array(0), Float64Array.from([0, Number.NaN, -0])]) {
      const { up, down } = rankByMove(changes)
      expect(up.length + down.length).toBe(0)
    }
    const onlyGains = rankByMove(Float64Array.from([1, 2, 1]))
    expect([...onlyGains.up]).toEqual([1, 0, 2])
    expect(onlyGains.down.length).toBe(0)
  })
})

/** A random catalog as read: cards out of id order, 0–4 printings each, few update times, some nulls, one price of no card. */
function randomSource(): { source: SnapshotSource; prices: Price[] } {
  const games = [
    { id: 1, name: 'Creatures', slug: 'creatures', kind: 'creature' },
    { id: 2, name: 'Mana', slug: 'mana', kind: 'mana' },
  ]
  const sets = [
    { id: 10, name: 'Base', slug: 'base' },
    { id: 11, name: 'Jungle', slug: 'jungle' },
  ]
  const printingsOf = { 1: ['Normal', 'Holofoil', 'Reverse Holofoil', 'Zeta Foil', '1st Edition'], 2: ['Normal', 'Foil', 'Etched Foil'] }
  const times = ['2026-11-20T00:00:00.000Z', '2026-11-21T00:00:00.000Z', '2026-11-21T06:30:00.000Z']
  const pick = <T>(values: readonly T[]) => values[Math.floor(Math.random() * values.length)]!
  const money = () => (Math.random() < 0.15 ? null : Math.round(Math.random() * 10_000) / 100)
  const change = () => (Math.random() < 0.15 ? null : pick([0, -0, 1.5, -1.5, 3, -12.25, Math.round((Math.random() - 0.5) * 4000) / 100]))
  const cards = new CardColumns(8)
  const prices: Price[] = []
  const ids = Array.from({ length: 300 }, (_, i) => i * 3 + 1).sort(() => Math.random() - 0.5)
  for (const id of ids) {
    const gameId = pick([1, 2])
    cards.push({
      id,
      setId: pick([10, 11]),
      gameId,
      marketplaceId: 5000 + id,
      name: `Card ${id % 17}`,
      productType: pick(['Cards', 'Sealed Products']),
      foilOnly: 0,
      imageUrl: `https://cdn.example/${5000 + id}.jpg`,
      cleanName: `card ${id % 17}`,
      number: `${id}`,
      rarity: pick(['Common', 'Rare']),
      totalListings: 3,
    })
    const printings = printingsOf[gameId as 1 | 2].filter(() => Math.random() < 0.45)
    for (const printing of printings) {
      const market = money()
      prices.push({
        card_id: id,
        printing,
        market_price: market,
        market_price_as_of: market === null ? null : pick(['2026-11-19', '2026-11-20']),
        low_price: money(),
        median_price: money(),
        lowest_with_shipping: money(),
        buylist_price: money(),
        price_change_24h: change(),
        price_change_7d: change(),
        price_change_30d: change(),
        last_updated_at: pick(times),
      })
    }
  }
  prices.sort(() => Math.random() - 0.5)
  const columns = new PriceColumns(8)
  for (const p of [...prices, { ...prices[0]!, card_id: 999_999 }]) columns.pushPrice(p)
  return { source: { games, sets, cards: cards.finish(), prices: columns.finish(), fingerprint: `${Math.random()}` }, prices }
}

const byCodePoint = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

describe('PriceSnapshot, against its rules written plainly', () => {
  test.each([1, 2, 3])('a random catalog (%i): card prices, bulk rows, change feed and movers', () => {
    const { source, prices } = randomSource()
    const snapshot = PriceSnapshot.build(source, new Date())
    const kindOf = (gameId: number) => source.games.find((game) => game.id === gameId)!.kind
    const cards = Array.from({ length: source.cards.length }, (_, row) => source.cards.fields(row))
    const pricesOf = (id: number, gameId: number) => prices.filter((p) => p.card_id === id).sort((a, b) => printingOrder(kindOf(gameId))(a.printing, b.printing))
    expect(snapshot.cardCount).toBe(cards.length)
    expect(snapshot.priceCount).toBe(prices.length) // the price of no card is left out
    expect(snapshot.asOf).toBe(
      prices
        .map((p) => p.last_updated_at)
        .sort(byCodePoint)
        .at(-1)!,
    )
    expect(snapshot.card(999_999)).toBeUndefined()
    expect(snapshot.cardWithPrice(999_999)).toBeUndefined()

    // A card's prices, primary first; its bulk row from them.
    const bulkRows: Record<string, unknown>[] = []
    for (const card of cards) {
      const own = pricesOf(card.id, card.gameId)
      const answered = snapshot.card(card.id)!
      expect(JSON.stringify(answered.prices)).toBe(JSON.stringify(own))
      expect(answered).toMatchObject({ ...card, setName: card.setId === 10 ? 'Base' : 'Jungle', gameSlug: card.gameId === 1 ? 'creatures' : 'mana' })
      // A search row makes only the primary Price, and is the row the whole card makes.
      expect(snapshot.cardWithPrice(card.id)).toEqual(snapshotCardWithPrice(answered))
      if (own.length === 0) continue
      const foil = own.find((p) => isFoilPrinting(p.printing) && p.market_price !== null)
      bulkRows.push({
        card_id: card.id,
        market_price: own[0]!.market_price,
        low_price: own[0]!.low_price,
        foil_market_price: foil?.market_price ?? null,
        price_change_24h: own[0]!.price_change_24h,
        last_updated_at: own[0]!.last_updated_at,
      })
    }
    const asked = [...cards.map((card) => card.id).reverse(), 2, cards[0]!.id]
    const selection = snapshot.selectBulk(asked)
    const expected = bulkRows.sort((a, b) => asked.indexOf(a.card_id as number) - asked.indexOf(b.card_id as number))
    expect(snapshot.bulkJson(selection, '{"data":', '}').toString()).toBe(JSON.stringify({ data: expected }))
    expect(snapshot.bulkObjects(selection)).toEqual(expected as never)
    expect(selection.missing).toEqual([2])
    expect(selection.unpriced.length).toBe(cards.length - bulkRows.length)

    // The change feed: by update time, card id, printing; each game's the same order; paged from a position.
    const feed = [...prices].sort((a, b) => byCodePoint(a.last_updated_at, b.last_updated_at) || a.card_id - b.card_id || byCodePoint(a.printing, b.printing))
    const start = { at: '', cardId: 0, printing: '' }
    const keys = (rows: { card_id: number; printing: string }[]) => rows.map((row) => `${row.card_id} ${row.printing}`)
    expect(keys(snapshot.changesAfter(start, undefined, 10_000).rows)).toEqual(keys(feed))
    const gameOf = new Map(cards.map((card) => [card.id, card.gameId]))
    expect(keys(snapshot.changesAfter(start, 2, 10_000).rows)).toEqual(keys(feed.filter((p) => gameOf.get(p.card_id) === 2)))
    const middle = feed[Math.floor(feed.length / 2)]!
    const after = snapshot.changesAfter({ at: middle.last_updated_at, cardId: middle.card_id, printing: middle.printing }, undefined, 5)
    expect(keys(after.rows)).toEqual(keys(feed.slice(Math.floor(feed.length / 2) + 1, Math.floor(feed.length / 2) + 6)))
    expect(after.rows[0]).toMatchObject({ name: cards.find((card) => card.id === after.rows[0]!.card_id)!.name })

    // Movers: a plain sort of every printing with a market price and a change.
    const typeOf = new Map(cards.map((card) => [card.id, card.productType]))
    for (const [period, field] of [
      ['24h', 'price_change_24h'],
      ['30d', 'price_change_30d'],
    ] as const) {
      for (const [direction, sign] of [
        ['up', 1],
        ['down', -1],
      ] as const) {
        for (const filter of [{}, { gameId: 1 }, { type: 'Cards', printing: 'Normal' }, { gameId: 2, printing: 'Foil' }]) {
          const plain = prices
            .filter((p) => p.market_price !== null && p[field] !== null && p[field]! * sign > 0)
            .filter((p) => !('gameId' in filter) || gameOf.get(p.card_id) === filter.gameId)
            .filter((p) => !('type' in filter) || typeOf.get(p.card_id) === filter.type)
            .filter((p) => !('printing' in filter) || p.printing === filter.printing)
            .sort((a, b) => (b[field]! - a[field]!) * sign || a.card_id - b.card_id || byCodePoint(a.printing, b.printing))
            .slice(0, 20)
          const movers = snapshot.topMovers({ period, direction, limit: 20, ...filter })
          expect(keys(movers)).toEqual(keys(plain))
          expect(movers.map((row) => row.price_change)).toEqual(plain.map((p) => p[field]!))
        }
      }
    }
  })

  test("searchIndex 'later': the prices answer at once, the index is built once when asked", () => {
    const { source } = randomSource()
    const snapshot = PriceSnapshot.build(source, new Date(), { searchIndex: 'later' })
    expect(snapshot.searchable).toBe(false)
    expect(() => snapshot.search).toThrow('not built')
    const someId = source.cards.id[0]!
    expect(snapshot.card(someId)?.id).toBe(someId)
    const index = snapshot.buildSearchIndex()
    expect(snapshot.buildSearchIndex()).toBe(index)
    expect(snapshot.search).toBe(index)
    expect(snapshot.search.search({ text: source.cards.cleanName[0]!, sort: 'relevance', offset: 0, limit: 100 }).ids).toContain(someId)
  })

  test('forSearch: the same cards, prices and index, and a loud refusal of the rows it does not hold', () => {
    const { source } = randomSource()
    const snapshot = PriceSnapshot.build(source, new Date())
    const twin = snapshot.forSearch()
    const someId = source.cards.id[0]!
    expect(twin.version).toBe(snapshot.version)
    expect(twin.search).toBe(snapshot.search)
    expect(twin.cardWithPrice(someId)).toEqual(snapshot.cardWithPrice(someId)!)
    const selection = twin.selectBulk([someId])
    expect(() => twin.bulkJson(selection, '', '')).toThrow('search-only')
    expect(() => twin.bulkObjects(selection)).toThrow('search-only')
    expect(() => twin.topMovers({ period: '24h', direction: 'up', limit: 5 })).toThrow('search-only')
    expect(() => twin.topMoversJson({ period: '24h', direction: 'up', limit: 5 })).toThrow('search-only')
    expect(() => twin.changesAfter({ at: '', cardId: 0, printing: '' }, undefined, 5)).toThrow('search-only')
    expect(snapshot.bulkObjects(snapshot.selectBulk([someId]))).toHaveLength(1)
  })
})
