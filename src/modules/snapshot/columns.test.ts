import { describe, expect, test } from 'bun:test'
import { CardColumns, type CardFields, DecimalColumn, PriceColumns } from './columns'

const card = (id: number, fields: Partial<CardFields> = {}): CardFields => ({
  id,
  setId: 7,
  gameId: 3,
  marketplaceId: 1000 + id,
  name: 'Pikachu',
  productType: 'Cards',
  foilOnly: 0,
  imageUrl: `https://cdn.example/product/${1000 + id}_200w.jpg`,
  cleanName: 'pikachu',
  number: '025/165',
  rarity: 'Common',
  totalListings: 12,
  ...fields,
})

describe('card columns', () => {
  test('give back every card as read, past their first room, nulls and odd image URLs included', () => {
    const cards = [
      card(1),
      card(2, { number: null, totalListings: null, productType: 'Sealed Products', foilOnly: 1, name: 'Pokémon Booster', cleanName: 'pokemon booster' }),
      card(3, { imageUrl: 'https://elsewhere.example/no-id-here.png' }),
      card(4, { imageUrl: '' }),
      card(5, { marketplaceId: 11, imageUrl: 'https://cdn.example/11/11.jpg' }), // the id twice: the last one is the hole
      card(6, { totalListings: 0, rarity: 'Rare' }),
      card(7, { cleanName: 'pikachu promo' }), // a name seen before, with another clean name
      ...Array.from({ length: 40 }, (_, i) => card(100 + i, { name: `Card ${i % 7}`, cleanName: `card ${i % 7}` })),
    ]
    const columns = new CardColumns(3) // too little room: the columns grow
    for (const one of cards) columns.push(one)
    columns.finish()
    expect(columns.length).toBe(cards.length)
    expect(columns.id.length).toBe(cards.length)
    expect(Array.from({ length: columns.length }, (_, row) => columns.fields(row))).toEqual(cards)
  })

  test('keep one string per distinct name, however many cards share it', () => {
    const columns = new CardColumns()
    // Strings made apart, as decoding each row makes them.
    for (let i = 0; i < 10; i++) columns.push(card(i + 1, { name: ['Pika', 'chu'].join('') }))
    columns.finish()
    expect(new Set(columns.name).size).toBe(1)
    expect(columns.productTypes.values).toEqual(['Cards'])
  })
})

describe('price columns', () => {
  test('give back the spec Price objects, nulls where read, keys in order', () => {
    const prices = new PriceColumns(1)
    prices.push(1, 'Normal', 1.5, '2026-11-20', null, 0.99, 2.25, null, -3.25, null, 0, '2026-11-21T00:00:00.000Z')
    prices.push(1, 'Holofoil', null, null, 4, null, null, 0.5, null, 12.5, null, '2026-11-21T00:00:00.000Z')
    prices.finish()
    expect(prices.cardId.length).toBe(2)
    expect(JSON.stringify(prices.price(0))).toBe(
      JSON.stringify({
        card_id: 1,
        printing: 'Normal',
        market_price: 1.5,
        market_price_as_of: '2026-11-20',
        low_price: null,
        median_price: 0.99,
        lowest_with_shipping: 2.25,
        buylist_price: null,
        price_change_24h: -3.25,
        price_change_7d: null,
        price_change_30d: 0,
        last_updated_at: '2026-11-21T00:00:00.000Z',
      }),
    )
    expect(prices.price(1)).toMatchObject({ printing: 'Holofoil', market_price: null, market_price_as_of: null, low_price: 4, buylist_price: 0.5 })
    expect(prices.times.values).toEqual(['2026-11-21T00:00:00.000Z'])
  })
})

describe('decimal columns', () => {
  test('give back every value exactly: hundredths, and those that are not (more decimals, huge, -0), and null as NaN', () => {
    const values = [
      0,
      0.01,
      0.1,
      12.34,
      -12.34,
      99_999.99,
      1.005,
      0.125,
      1e-7,
      -0,
      21_474_836.47,
      21_474_836.48,
      -21_474_836.47,
      -21_474_836.48,
      1e12,
      123_456.78,
      0.05,
      -0.5,
      -0.05,
      100,
      -100,
      Number.POSITIVE_INFINITY,
      Number.NEGATIVE_INFINITY,
      ...Array.from({ length: 2_000 }, () => Math.round((Math.random() - 0.5) * 1e7) / 100),
      ...Array.from({ length: 200 }, () => (Math.random() - 0.5) * 1e4),
    ]
    const column = new DecimalColumn(4)
    const all = [...values, null]
    for (let row = 0; row < all.length; row++) {
      if (row >= column.length) column.grow()
      column.set(row, all[row]!)
    }
    column.trim(all.length)
    expect(column.length).toBe(all.length)
    for (let row = 0; row < values.length; row++) expect(Object.is(column.get(row), values[row])).toBe(true)
    expect(column.get(values.length)).toBeNaN()
    // As JSON, byte for byte what JSON.stringify writes (the bulk rows are written so).
    const out = Buffer.alloc(64)
    for (let row = 0; row < all.length; row++) expect(out.toString('latin1', 0, column.writeJson(row, out, 0))).toBe(JSON.stringify(all[row]))
  })
})
