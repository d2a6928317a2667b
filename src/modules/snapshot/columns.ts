import type { Price } from '../catalog/model'

// The snapshot's rows as columns: numbers in typed arrays, repeated text kept once. An object per
// row costs about 100 bytes of header and slots on top of its values, and a string per repeated
// value (a printing, a rarity, a name reprinted in many sets, an update time) another 40: on the
// large catalog (338k printings) the rows read as objects took about 150 MB, as columns about 40 MB
// of heap, and the collector has next to nothing to trace (docs/adr/0115-the-snapshot-in-columns.md).

/** Writes a whole number in 0 … 2^31 − 1 as decimal digits into `out` at `at`; returns where it ends. */
export function writeDigits(out: Buffer, at: number, value: number): number {
  let end = at + 1
  for (let rest = value; rest >= 10; rest = (rest / 10) | 0) end++
  let place = end
  let rest = value
  do {
    out[--place] = 48 + (rest % 10)
    rest = (rest / 10) | 0
  } while (rest > 0)
  return end
}

/**
 * Writes hundredths / 100 as JSON.stringify writes that number (`-12.3`, `0.05`, `7`) without
 * making a string: a value of at most two decimals below 2^31 hundredths is its shortest form, so
 * the digits of the whole part, then the cents without trailing zeros.
 */
export function writeHundredths(out: Buffer, at: number, hundredths: number): number {
  let rest = hundredths
  if (rest < 0) {
    out[at++] = 45 // '-'
    rest = -rest
  }
  const whole = (rest / 100) | 0
  const cents = rest - whole * 100
  at = writeDigits(out, at, whole)
  if (cents === 0) return at
  out[at++] = 46 // '.'
  out[at++] = 48 + ((cents / 10) | 0)
  if (cents % 10 !== 0) out[at++] = 48 + (cents % 10)
  return at
}

/** A null integer column value (no row has it: ids and counts are never this low). */
export const NULL_INT = -2_147_483_648
/** A null text code. */
export const NULL_CODE = -1

/** Each distinct value once, numbered in order of first sight: a column holds the numbers. */
export class Interner {
  readonly values: string[] = []
  private readonly codes = new Map<string, number>()

  code(value: string): number {
    let code = this.codes.get(value)
    if (code === undefined) this.codes.set(value, (code = this.values.push(value) - 1))
    return code
  }
}

/** The one copy kept of each distinct string (the same name in a hundred sets is one string). */
class StringPool {
  private readonly kept = new Map<string, string>()

  of(value: string): string {
    const kept = this.kept.get(value)
    if (kept !== undefined) return kept
    this.kept.set(value, value)
    return value
  }
}

type Column = Int32Array | Uint16Array | Uint8Array

/** The array with room for more rows (half again), its values kept. */
function grown<T extends Column>(array: T): T {
  const next = new (array.constructor as new (length: number) => T)(Math.max(1024, Math.ceil(array.length * 1.5)))
  next.set(array)
  return next
}

/** The first `length` values in an array of their own (a subarray would keep the spare room); the array itself when it holds just those. */
const trimmed = <T extends Column>(array: T, length: number): T => (array.length === length ? array : (array.slice(0, length) as T))

/** The image URL column: most are one pattern around the marketplace id, kept as the pattern's number; the others whole. */
class ImageUrls {
  /** Per card, its pattern; LITERAL: the URL is in `literals`. */
  codes: Uint16Array
  readonly prefixes: string[] = []
  readonly suffixes: string[] = []
  readonly literals = new Map<number, string>()
  private readonly patterns = new Interner()
  static readonly LITERAL = 0xffff

  constructor(room: number) {
    this.codes = new Uint16Array(room)
  }

  /** The pattern the previous URL fitted: most fit the same one, which is checked without making a string. */
  private last = -1

  set(row: number, url: string, marketplaceId: number): void {
    if (row >= this.codes.length) this.codes = grown(this.codes)
    const id = String(marketplaceId)
    const last = this.last
    if (last >= 0) {
      const prefix = this.prefixes[last]!
      const suffix = this.suffixes[last]!
      if (url.length === prefix.length + id.length + suffix.length && url.startsWith(prefix) && url.startsWith(id, prefix.length) && url.endsWith(suffix)) {
        this.codes[row] = last
        return
      }
    }
    const at = url.lastIndexOf(id)
    if (at >= 0) {
      const code = this.patterns.code(`${url.slice(0, at)}\u0000${url.slice(at + id.length)}`)
      if (code < ImageUrls.LITERAL) {
        if (code === this.prefixes.length) {
          this.prefixes.push(url.slice(0, at))
          this.suffixes.push(url.slice(at + id.length))
        }
        this.codes[row] = code
        this.last = code
        return
      }
    }
    this.codes[row] = ImageUrls.LITERAL
    this.literals.set(row, url)
  }

  get(row: number, marketplaceId: number): string {
    const code = this.codes[row]!
    return code === ImageUrls.LITERAL ? this.literals.get(row)! : `${this.prefixes[code]}${marketplaceId}${this.suffixes[code]}`
  }

  trim(length: number): void {
    this.codes = trimmed(this.codes, length)
  }
}

/** A card as read (the SELECT's row; the binary COPY fills the same columns field by field). */
export interface CardFields {
  id: number
  setId: number
  gameId: number
  marketplaceId: number
  name: string
  productType: string
  foilOnly: number
  imageUrl: string
  cleanName: string
  /** null for sealed products, which have none. */
  number: string | null
  rarity: string
  /** null when the source does not count listings. */
  totalListings: number | null
}

/** Every card, one row each in the order read. */
export class CardColumns {
  length = 0
  id: Int32Array
  setId: Int32Array
  gameId: Int32Array
  marketplaceId: Int32Array
  foilOnly: Uint8Array
  /** NULL_INT: not counted. */
  totalListings: Int32Array
  productType: Uint16Array
  rarity: Uint16Array
  readonly productTypes = new Interner()
  readonly rarities = new Interner()
  readonly name: string[] = []
  readonly cleanName: string[] = []
  readonly number: (string | null)[] = []
  readonly imageUrl: ImageUrls
  private strings: StringPool | undefined = new StringPool()
  /** Each distinct name → the first row with it: a repeated name's clean name is most often that row's, found by one comparison instead of a lookup. */
  private rowOfName: Map<string, number> | undefined = new Map()

  /** Room for `expected` rows (the count read in the same snapshot): more still fit, at the cost of a copy. */
  constructor(expected = 1024) {
    const room = Math.max(1, expected)
    this.id = new Int32Array(room)
    this.setId = new Int32Array(room)
    this.gameId = new Int32Array(room)
    this.marketplaceId = new Int32Array(room)
    this.foilOnly = new Uint8Array(room)
    this.totalListings = new Int32Array(room)
    this.productType = new Uint16Array(room)
    this.rarity = new Uint16Array(room)
    this.imageUrl = new ImageUrls(room)
  }

  push(card: CardFields): void {
    const row = this.length++
    if (row === this.id.length) {
      this.id = grown(this.id)
      this.setId = grown(this.setId)
      this.gameId = grown(this.gameId)
      this.marketplaceId = grown(this.marketplaceId)
      this.foilOnly = grown(this.foilOnly)
      this.totalListings = grown(this.totalListings)
      this.productType = grown(this.productType)
      this.rarity = grown(this.rarity)
    }
    const strings = this.strings!
    this.id[row] = card.id
    this.setId[row] = card.setId
    this.gameId[row] = card.gameId
    this.marketplaceId[row] = card.marketplaceId
    this.foilOnly[row] = card.foilOnly
    this.totalListings[row] = card.totalListings ?? NULL_INT
    this.productType[row] = this.productTypes.code(card.productType)
    this.rarity[row] = this.rarities.code(card.rarity)
    const named = this.rowOfName!.get(card.name)
    if (named === undefined) {
      this.rowOfName!.set(card.name, row)
      this.name.push(strings.of(card.name))
      this.cleanName.push(strings.of(card.cleanName))
    } else {
      this.name.push(this.name[named]!)
      const clean = this.cleanName[named]!
      this.cleanName.push(clean === card.cleanName ? clean : strings.of(card.cleanName))
    }
    this.number.push(card.number === null ? null : strings.of(card.number))
    this.imageUrl.set(row, card.imageUrl, card.marketplaceId)
  }

  /** Every card read: the spare room and the lookup of strings go. */
  finish(): this {
    const n = this.length
    this.id = trimmed(this.id, n)
    this.setId = trimmed(this.setId, n)
    this.gameId = trimmed(this.gameId, n)
    this.marketplaceId = trimmed(this.marketplaceId, n)
    this.foilOnly = trimmed(this.foilOnly, n)
    this.totalListings = trimmed(this.totalListings, n)
    this.productType = trimmed(this.productType, n)
    this.rarity = trimmed(this.rarity, n)
    this.imageUrl.trim(n)
    this.strings = undefined
    this.rowOfName = undefined
    return this
  }

  /** Row `row` as read. */
  fields(row: number): CardFields {
    const totalListings = this.totalListings[row]!
    return {
      id: this.id[row]!,
      setId: this.setId[row]!,
      gameId: this.gameId[row]!,
      marketplaceId: this.marketplaceId[row]!,
      name: this.name[row]!,
      productType: this.productTypes.values[this.productType[row]!]!,
      foilOnly: this.foilOnly[row]!,
      imageUrl: this.imageUrl.get(row, this.marketplaceId[row]!),
      cleanName: this.cleanName[row]!,
      number: this.number[row]!,
      rarity: this.rarities.values[this.rarity[row]!]!,
      totalListings: totalListings === NULL_INT ? null : totalListings,
    }
  }
}

/**
 * A price or percent column: whole hundredths in an Int32Array (4 bytes a row, not 8), since the
 * sources give cents and changes rounded to hundredths of a percent; a value that is not exactly
 * its hundredths over 100 (more decimals, beyond ±21 million, -0) is kept apart, exactly.
 */
export class DecimalColumn {
  private hundredths: Int32Array
  private readonly others = new Map<number, number>()
  private static readonly NULL = -2_147_483_648
  private static readonly OTHER = -2_147_483_647

  constructor(room: number) {
    this.hundredths = new Int32Array(room)
  }

  get length(): number {
    return this.hundredths.length
  }

  set(row: number, value: number | null): void {
    if (value === null || Number.isNaN(value)) {
      this.hundredths[row] = DecimalColumn.NULL
      return
    }
    const hundredths = Math.round(value * 100)
    if (hundredths / 100 === value && hundredths > DecimalColumn.OTHER && hundredths <= 2_147_483_647 && !Object.is(value, -0)) {
      this.hundredths[row] = hundredths
      return
    }
    this.hundredths[row] = DecimalColumn.OTHER
    this.others.set(row, value)
  }

  /** Writes the value as JSON.stringify writes it (null for null) into `out` at `at`, ASCII; returns where it ends. */
  writeJson(row: number, out: Buffer, at: number): number {
    const hundredths = this.hundredths[row]!
    if (hundredths > DecimalColumn.OTHER) return writeHundredths(out, at, hundredths)
    const value = hundredths === DecimalColumn.NULL ? Number.NaN : this.others.get(row)!
    return at + out.write(Number.isFinite(value) ? `${value}` : 'null', at, 'latin1')
  }

  /** The value, NaN for null. */
  get(row: number): number {
    const hundredths = this.hundredths[row]!
    if (hundredths > DecimalColumn.OTHER) return hundredths / 100
    return hundredths === DecimalColumn.NULL ? Number.NaN : this.others.get(row)!
  }

  grow(): void {
    this.hundredths = grown(this.hundredths)
  }

  trim(length: number): void {
    this.hundredths = trimmed(this.hundredths, length)
  }
}

/** A double column's value: NaN is null (PostgreSQL's NaN never reaches a price). */
export const orNull = (value: number): number | null => (Number.isNaN(value) ? null : value)

/** Every price row, one each in the order read. Prices and changes are DecimalColumns (NaN: null); texts are codes (NULL_CODE: null). */
export class PriceColumns {
  length = 0
  cardId: Int32Array
  printing: Uint16Array
  readonly marketPrice: DecimalColumn
  /** Codes into `dates`. */
  marketPriceAsOf: Int32Array
  readonly lowPrice: DecimalColumn
  readonly medianPrice: DecimalColumn
  readonly lowestWithShipping: DecimalColumn
  readonly buylistPrice: DecimalColumn
  readonly priceChange24h: DecimalColumn
  readonly priceChange7d: DecimalColumn
  readonly priceChange30d: DecimalColumn
  /** Codes into `times`: one distinct update time per sync, so few. */
  lastUpdatedAt: Int32Array
  readonly printings = new Interner()
  readonly dates = new Interner()
  readonly times = new Interner()

  /** Room for `expected` rows (the count read in the same snapshot): more still fit, at the cost of a copy. */
  constructor(expected = 1024) {
    const room = Math.max(1, expected)
    this.cardId = new Int32Array(room)
    this.printing = new Uint16Array(room)
    this.marketPrice = new DecimalColumn(room)
    this.marketPriceAsOf = new Int32Array(room)
    this.lowPrice = new DecimalColumn(room)
    this.medianPrice = new DecimalColumn(room)
    this.lowestWithShipping = new DecimalColumn(room)
    this.buylistPrice = new DecimalColumn(room)
    this.priceChange24h = new DecimalColumn(room)
    this.priceChange7d = new DecimalColumn(room)
    this.priceChange30d = new DecimalColumn(room)
    this.lastUpdatedAt = new Int32Array(room)
  }

  /** A row, field by field in the Price object's order (no object per row). */
  push(
    cardId: number,
    printing: string,
    marketPrice: number | null,
    marketPriceAsOf: string | null,
    lowPrice: number | null,
    medianPrice: number | null,
    lowestWithShipping: number | null,
    buylistPrice: number | null,
    priceChange24h: number | null,
    priceChange7d: number | null,
    priceChange30d: number | null,
    lastUpdatedAt: string,
  ): void {
    const row = this.length++
    if (row === this.cardId.length) this.grow()
    this.cardId[row] = cardId
    this.printing[row] = this.printings.code(printing)
    this.marketPrice.set(row, marketPrice)
    this.marketPriceAsOf[row] = marketPriceAsOf === null ? NULL_CODE : this.dates.code(marketPriceAsOf)
    this.lowPrice.set(row, lowPrice)
    this.medianPrice.set(row, medianPrice)
    this.lowestWithShipping.set(row, lowestWithShipping)
    this.buylistPrice.set(row, buylistPrice)
    this.priceChange24h.set(row, priceChange24h)
    this.priceChange7d.set(row, priceChange7d)
    this.priceChange30d.set(row, priceChange30d)
    this.lastUpdatedAt[row] = this.times.code(lastUpdatedAt)
  }

  /** A row from a Price object (the SELECT read and tests; the COPY read pushes field by field). */
  pushPrice(p: Price): void {
    this.push(
      p.card_id,
      p.printing,
      p.market_price,
      p.market_price_as_of,
      p.low_price,
      p.median_price,
      p.lowest_with_shipping,
      p.buylist_price,
      p.price_change_24h,
      p.price_change_7d,
      p.price_change_30d,
      p.last_updated_at,
    )
  }

  private grow(): void {
    this.cardId = grown(this.cardId)
    this.printing = grown(this.printing)
    this.marketPrice.grow()
    this.marketPriceAsOf = grown(this.marketPriceAsOf)
    this.lowPrice.grow()
    this.medianPrice.grow()
    this.lowestWithShipping.grow()
    this.buylistPrice.grow()
    this.priceChange24h.grow()
    this.priceChange7d.grow()
    this.priceChange30d.grow()
    this.lastUpdatedAt = grown(this.lastUpdatedAt)
  }

  /** Every row read: the spare room goes. */
  finish(): this {
    const n = this.length
    this.cardId = trimmed(this.cardId, n)
    this.printing = trimmed(this.printing, n)
    this.marketPrice.trim(n)
    this.marketPriceAsOf = trimmed(this.marketPriceAsOf, n)
    this.lowPrice.trim(n)
    this.medianPrice.trim(n)
    this.lowestWithShipping.trim(n)
    this.buylistPrice.trim(n)
    this.priceChange24h.trim(n)
    this.priceChange7d.trim(n)
    this.priceChange30d.trim(n)
    this.lastUpdatedAt = trimmed(this.lastUpdatedAt, n)
    return this
  }

  /** Row `row` as the spec's Price object, keys in its order. */
  price(row: number): Price {
    const asOf = this.marketPriceAsOf[row]!
    return {
      card_id: this.cardId[row]!,
      printing: this.printings.values[this.printing[row]!]!,
      market_price: orNull(this.marketPrice.get(row)),
      market_price_as_of: asOf === NULL_CODE ? null : this.dates.values[asOf]!,
      low_price: orNull(this.lowPrice.get(row)),
      median_price: orNull(this.medianPrice.get(row)),
      lowest_with_shipping: orNull(this.lowestWithShipping.get(row)),
      buylist_price: orNull(this.buylistPrice.get(row)),
      price_change_24h: orNull(this.priceChange24h.get(row)),
      price_change_7d: orNull(this.priceChange7d.get(row)),
      price_change_30d: orNull(this.priceChange30d.get(row)),
      last_updated_at: this.times.values[this.lastUpdatedAt[row]!]!,
    }
  }
}
