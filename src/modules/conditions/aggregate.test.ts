import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import type { SourceListing } from '../ingest/source'
import { aggregateListings, median } from './aggregate'

const listing = (price: number, shipping = 0, rest: Partial<SourceListing> = {}): SourceListing => ({
  productId: 1,
  printing: 'Normal',
  condition: 'Near Mint',
  language: 'English',
  price,
  shipping,
  ...rest,
})

const cents = (min: number, max: number) => fc.integer({ min: Math.round(min * 100), max: Math.round(max * 100) }).map((n) => n / 100)

describe('aggregateListings', () => {
  test('one row per printing × condition × language, with the lowest, lowest-with-shipping, median and sample count', () => {
    const rows = aggregateListings([
      listing(10, 1),
      listing(12, 0),
      listing(9.5, 4.99),
      listing(20, 0, { condition: 'Damaged' }),
      listing(30, 0, { language: 'Japanese' }),
      listing(31, 0, { printing: 'Foil' }),
    ])
    expect(rows).toEqual([
      // item prices 10, 12, 9.5; with shipping 11, 12, 14.49
      { printing: 'Normal', condition: 'Near Mint', language: 'English', lowPrice: 9.5, lowestWithShipping: 11, medianWithShipping: 12, sampleCount: 3 },
      { printing: 'Normal', condition: 'Damaged', language: 'English', lowPrice: 20, lowestWithShipping: 20, medianWithShipping: null, sampleCount: 1 },
      { printing: 'Normal', condition: 'Near Mint', language: 'Japanese', lowPrice: 30, lowestWithShipping: 30, medianWithShipping: null, sampleCount: 1 },
      { printing: 'Foil', condition: 'Near Mint', language: 'English', lowPrice: 31, lowestWithShipping: 31, medianWithShipping: null, sampleCount: 1 },
    ])
  })

  test('the median is null under 3 samples, the middle value at odd counts and the mean of the two middle ones at even', () => {
    expect(aggregateListings([listing(1), listing(2)])[0]!.medianWithShipping).toBeNull()
    expect(aggregateListings([listing(5), listing(1), listing(3)])[0]!.medianWithShipping).toBe(3)
    expect(aggregateListings([listing(4), listing(1), listing(3), listing(2)])[0]!.medianWithShipping).toBe(2.5)
    expect(median([0.1, 0.2, 0.3, 0.4])).toBeCloseTo(0.25)
  })

  test('a one-cent junk listing is the low price but not the median', () => {
    const [row] = aggregateListings([listing(0.01, 0), listing(24, 1.5), listing(25, 0), listing(26.5, 0.99)])
    expect(row!.lowPrice).toBe(0.01)
    expect(row!.lowestWithShipping).toBe(0.01)
    expect(row!.medianWithShipping).toBe(25.25) // the middle two of 0.01, 25, 25.5, 27.49
  })

  test('property: while junk one-cent listings are fewer than genuine ones, the median is a genuine price', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ price: cents(1, 500), shipping: cents(0, 5) }), { minLength: 3, maxLength: 40 }),
        fc.integer({ min: 0, max: 39 }),
        fc.integer({ min: 0, max: 1_000_000 }),
        (genuine, junkWanted, seed) => {
          const junk = Math.min(junkWanted, genuine.length - 1)
          const listings = [...genuine.map(({ price, shipping }) => listing(price, shipping)), ...Array.from({ length: junk }, () => listing(0.01, 0))]
          // Shuffled: the order listings arrive in must not matter.
          const shuffled = listings
            .map((item, i) => ({ item, key: (i * 7919 + seed) % 104729 }))
            .sort((a, b) => a.key - b.key)
            .map(({ item }) => item)
          const [row] = aggregateListings(shuffled)
          const lowestGenuine = Math.min(...genuine.map(({ price, shipping }) => price + shipping))
          const highestGenuine = Math.max(...genuine.map(({ price, shipping }) => price + shipping))
          expect(row!.sampleCount).toBe(genuine.length + junk)
          expect(row!.medianWithShipping!).toBeGreaterThanOrEqual(Math.round(lowestGenuine * 100) / 100)
          expect(row!.medianWithShipping!).toBeLessThanOrEqual(Math.round(highestGenuine * 100) / 100)
          expect(row!.lowPrice).toBe(junk > 0 ? 0.01 : Math.min(...genuine.map(({ price }) => price)))
        },
      ),
      { numRuns: 300 },
    )
  })

  test('listings with a price that is not a finite non-negative number are left out', () => {
    const rows = aggregateListings([listing(Number.NaN), listing(-1), listing(3, Number.POSITIVE_INFINITY), listing(4)])
    expect(rows).toEqual([{ printing: 'Normal', condition: 'Near Mint', language: 'English', lowPrice: 4, lowestWithShipping: 4, medianWithShipping: null, sampleCount: 1 }])
  })
})
