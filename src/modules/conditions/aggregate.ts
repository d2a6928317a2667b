import type { ListingCondition, SourceListing } from '../ingest/source'

/** One printing × condition × language of a card, as stored (the API row without card and date). */
export interface ConditionAggregate {
  printing: string
  condition: ListingCondition
  language: string
  lowPrice: number
  lowestWithShipping: number
  /** null under MIN_MEDIAN_SAMPLES listings. */
  medianWithShipping: number | null
  sampleCount: number
}

/** Spec: the median is null when fewer than 3 listings were sampled. */
export const MIN_MEDIAN_SAMPLES = 3

const cents = (usd: number) => Math.round(usd * 100) / 100

/**
 * The median of the values: the middle one, or the mean of the two middle ones. A plain median
 * (no trimming) is what the spec describes, and it already resists junk one-cent listings: they
 * sit at the bottom of the sorted sample, so as long as they are fewer than the genuine listings
 * the middle is a genuine price.
 */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

/**
 * Listings → one aggregate per printing × condition × language: the lowest item price, the lowest
 * and the median shipping-inclusive price, and how many listings were sampled. Listings with a
 * price that is not a finite non-negative number are dropped (a marketplace answer is not trusted).
 * The order is that of first appearance; callers sort for the API.
 */
export function aggregateListings(listings: readonly SourceListing[]): ConditionAggregate[] {
  const groups = new Map<string, { first: SourceListing; prices: number[]; withShipping: number[] }>()
  for (const listing of listings) {
    const shipping = listing.shipping ?? 0
    if (!(Number.isFinite(listing.price) && listing.price >= 0 && Number.isFinite(shipping) && shipping >= 0)) continue
    const key = `${listing.printing}\u0000${listing.condition}\u0000${listing.language}`
    let group = groups.get(key)
    if (!group) groups.set(key, (group = { first: listing, prices: [], withShipping: [] }))
    group.prices.push(listing.price)
    group.withShipping.push(listing.price + shipping)
  }
  return [...groups.values()].map(({ first, prices, withShipping }) => ({
    printing: first.printing,
    condition: first.condition,
    language: first.language,
    lowPrice: cents(Math.min(...prices)),
    lowestWithShipping: cents(Math.min(...withShipping)),
    medianWithShipping: withShipping.length >= MIN_MEDIAN_SAMPLES ? cents(median(withShipping)) : null,
    sampleCount: prices.length,
  }))
}
