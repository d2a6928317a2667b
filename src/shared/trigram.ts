/**
 * Trigram similarity with the semantics of PostgreSQL's pg_trgm (contrib/pg_trgm/trgm_op.c), so that
 * the in-memory search corrects and ranks exactly as the SQL did (`%`, similarity, word_similarity,
 * strict_word_similarity). Results are float4 values, as PostgreSQL computes them: the same ratio
 * rounded with Math.fround, so ties and orders are PostgreSQL's (docs/adr/0113-pg-trgm-similarity-in-typescript.md).
 *
 * Words are runs of letters and digits (pg_trgm's ISWORDCHR is iswalnum; glibc's class is Unicode
 * Alphabetic plus decimal digits), lowercased a character at a time, padded with two spaces before
 * and one after; a word of n characters gives n + 1 trigrams of three consecutive characters
 * (code points: PostgreSQL counts UTF-8 characters, never UTF-16 units).
 *
 * Known differences, none reachable by a cleaned card name in practice:
 * - PostgreSQL stores a trigram holding a multibyte character as 24 bits of a CRC of its bytes, so
 *   two different such trigrams can collide and count as one; here they never do.
 * - Letters are those of the JavaScript engine's Unicode version, which may be newer than the C
 *   library's PostgreSQL asks; code points from U+32400 (nothing assigned before Unicode 17) are not
 *   letters here, so that every trigram fits a number (below).
 */

const SPACE = 32

/**
 * A trigram as one exact integer, its three code points as digits in base RADIX: RADIX³ < 2⁵³,
 * and number keys hash and compare several times faster than three-character strings.
 */
const RADIX = 0x32400
const RADIX_SQUARED = RADIX * RADIX

const keyOf = (first: number, second: number, third: number) => (first * RADIX + second) * RADIX + third

function textOfKey(key: number): string {
  const first = Math.floor(key / RADIX_SQUARED)
  const rest = key - first * RADIX_SQUARED
  const second = Math.floor(rest / RADIX)
  return String.fromCodePoint(first, second, rest - second * RADIX)
}

/** pg_trgm's word characters outside ASCII: iswalnum of a UTF-8 locale. */
const NON_ASCII_WORD_CHAR = /^[\p{Alphabetic}\p{Nd}]$/u

/** Lowercased code point of each non-ASCII character seen, -1 for a separator; bounded so that odd input cannot grow it forever. */
const nonAsciiCache = new Map<number, number>()
const NON_ASCII_CACHE_LIMIT = 65_536

/**
 * The lowercase code point of a word character, -1 for a separator. Lowercasing is per character,
 * like PostgreSQL's towlower; a character whose lowercase is several (only 'İ') keeps the first,
 * as towlower's simple mapping does.
 */
function wordCodeOf(code: number): number {
  if (code < 128) {
    if (code >= 97 ? code <= 122 : code >= 48 && (code <= 57 || (code >= 65 && code <= 90))) return code >= 65 && code <= 90 ? code + 32 : code
    return -1
  }
  const cached = nonAsciiCache.get(code)
  if (cached !== undefined) return cached
  const char = String.fromCodePoint(code)
  const lower = code < RADIX && NON_ASCII_WORD_CHAR.test(char) ? char.toLowerCase().codePointAt(0)! : -1
  if (nonAsciiCache.size < NON_ASCII_CACHE_LIMIT) nonAsciiCache.set(code, lower)
  return lower
}

const LEFT_BOUND = 1
const RIGHT_BOUND = 2

// Scratch space of the scan, reused by every call (JavaScript runs one call at a time and none of
// these functions calls out while it holds them).
let scannedKeys = new Float64Array(256)
let scannedBounds = new Uint8Array(256)

/**
 * Fills scannedKeys with the text's trigrams in order, duplicates kept, and scannedBounds with
 * whether each is the first (LEFT_BOUND) or last (RIGHT_BOUND) of its word; returns how many.
 */
function scan(text: string): number {
  // At most two trigrams per UTF-16 unit plus one: a one-character word gives two.
  if (scannedKeys.length < 2 * text.length + 1) {
    scannedKeys = new Float64Array(2 * text.length + 64)
    scannedBounds = new Uint8Array(2 * text.length + 64)
  }
  const keys = scannedKeys
  const bounds = scannedBounds
  let length = 0
  let wordStart = -1
  let previous = SPACE
  let last = SPACE
  for (let i = 0; i <= text.length; i++) {
    let code = -1
    if (i < text.length) {
      code = text.charCodeAt(i)
      if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
        const low = text.charCodeAt(i + 1)
        if (low >= 0xdc00 && low <= 0xdfff) {
          code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00)
          i++
        }
      }
      code = wordCodeOf(code)
    }
    if (code >= 0) {
      if (wordStart < 0) {
        wordStart = length
        previous = SPACE
        last = SPACE
      }
      bounds[length] = 0
      keys[length++] = keyOf(previous, last, code)
      previous = last
      last = code
    } else if (wordStart >= 0) {
      bounds[length] = 0
      keys[length++] = keyOf(previous, last, SPACE)
      bounds[wordStart]! |= LEFT_BOUND
      bounds[length - 1]! |= RIGHT_BOUND
      wordStart = -1
    }
  }
  return length
}

/** The sorted unique trigram keys of the scan. */
function uniqueKeys(length: number): Float64Array {
  const sorted = scannedKeys.slice(0, length).sort()
  let unique = 0
  for (let i = 0; i < length; i++) if (i === 0 || sorted[i] !== sorted[unique - 1]) sorted[unique++] = sorted[i]!
  return unique === length ? sorted : sorted.slice(0, unique)
}

/**
 * A text's unique trigrams as numbers, sorted ascending: the fast form for similarityOfTrigrams and
 * for trigram indexes. Equal numbers are equal trigrams.
 */
export function trigramKeysOf(text: string): Float64Array {
  return uniqueKeys(scan(text))
}

/** A text's unique trigrams (show_trgm's set), sorted by code unit, JavaScript's default order. */
export function trigramsOf(text: string): string[] {
  return Array.from(trigramKeysOf(text), textOfKey).sort()
}

/** pg_trgm's float4 ratio: shared trigrams over the union of both sets (trgm.h CALCSML with DIVUNION). */
function ratio(shared: number, sizeA: number, sizeB: number): number {
  return Math.fround(shared / (sizeA + sizeB - shared))
}

/**
 * similarity() from two sorted unique trigram lists, both from trigramKeysOf or both from
 * trigramsOf: shared over union, 0 when either is empty. A caller that keeps one side never
 * recomputes it.
 */
export function similarityOfTrigrams<T extends number | string>(aSorted: ArrayLike<T>, bSorted: ArrayLike<T>): number {
  const sizeA = aSorted.length
  const sizeB = bSorted.length
  if (sizeA === 0 || sizeB === 0) return 0
  let i = 0
  let j = 0
  let shared = 0
  while (i < sizeA && j < sizeB) {
    const a = aSorted[i]!
    const b = bSorted[j]!
    if (a < b) i++
    else if (a > b) j++
    else {
      shared++
      i++
      j++
    }
  }
  return ratio(shared, sizeA, sizeB)
}

/**
 * similarity() from counts, for a caller that counts shared trigrams itself (an inverted index of
 * trigrams): `shared` of `sizeA` and `sizeB` unique trigrams. 0 when either side has none.
 */
export function similarityFromCounts(shared: number, sizeA: number, sizeB: number): number {
  return sizeA === 0 || sizeB === 0 ? 0 : ratio(shared, sizeA, sizeB)
}

/** pg_trgm's similarity(a, b) (the `%` operator holds when it is at least 0.3). */
export function similarity(a: string, b: string): number {
  return similarityOfTrigrams(trigramKeysOf(a), trigramKeysOf(b))
}

let ids = new Int32Array(256)
let lastPos = new Int32Array(256)
const otherIds = new Map<number, number>()

/**
 * The best similarity between q's trigram set and a stretch of the text's trigram sequence
 * (pg_trgm's calc_word_similarity and iterate_word_similarity). Each text trigram is numbered:
 * q's own trigrams 0..qSize-1 (so "in q" is `id < qSize`), the others after them. The window
 * [lower, upper] grows to every candidate upper end (a trigram in q; in strict mode the last
 * trigram of a word) and, at each, its lower end moves right wherever that strictly raises the
 * ratio (in strict mode only to a word's first trigram); `lastPos` holds each trigram's last
 * position in the window, so the distinct counts follow the window as it moves.
 */
function bestStretch(qIds: ReadonlyMap<number, number>, text: string, strict: boolean): number {
  const qSize = qIds.size
  const length = scan(text)
  const keys = scannedKeys
  const bounds = scannedBounds
  if (ids.length < length) ids = new Int32Array(scannedKeys.length)
  let anyShared = false
  otherIds.clear()
  for (let i = 0; i < length; i++) {
    const key = keys[i]!
    const id = qIds.get(key)
    if (id !== undefined) {
      ids[i] = id
      anyShared = true
      continue
    }
    let other = otherIds.get(key)
    if (other === undefined) otherIds.set(key, (other = qSize + otherIds.size))
    ids[i] = other
  }
  // No trigram of q in the text: every stretch scores 0.
  if (!anyShared) return 0

  const distinctIds = qSize + otherIds.size
  if (lastPos.length < distinctIds) lastPos = new Int32Array(distinctIds + 64)
  lastPos.fill(-1, 0, distinctIds)
  let best = 0
  let lower = strict ? 0 : -1
  let count = 0
  let distinct = 0
  for (let upper = 0; upper < length; upper++) {
    const id = ids[upper]!
    const inQ = id < qSize
    if (lower >= 0 || inQ) {
      if (lastPos[id]! < 0) {
        distinct++
        if (inQ) count++
      }
      lastPos[id] = upper
    }
    if (strict ? (bounds[upper]! & RIGHT_BOUND) === 0 : !inQ) continue

    if (lower === -1) lower = upper
    let current = ratio(count, qSize, distinct)
    let tryCount = count
    let tryDistinct = distinct
    const previousLower = lower
    for (let tryLower = lower; tryLower <= upper; tryLower++) {
      if (!strict || (bounds[tryLower]! & LEFT_BOUND) !== 0) {
        const score = ratio(tryCount, qSize, tryDistinct)
        if (score > current) {
          current = score
          distinct = tryDistinct
          lower = tryLower
          count = tryCount
        }
      }
      const leaving = ids[tryLower]!
      if (lastPos[leaving] === tryLower) {
        tryDistinct--
        if (leaving < qSize) tryCount--
      }
    }
    if (current > best) best = current
    for (let gone = previousLower; gone < lower; gone++) {
      const leaving = ids[gone]!
      if (lastPos[leaving] === gone) lastPos[leaving] = -1
    }
  }
  return best
}

/** q's unique trigram keys numbered 0..n-1. */
function numberTrigrams(q: string): Map<number, number> {
  const numbered = new Map<number, number>()
  const length = scan(q)
  for (let i = 0; i < length; i++) if (!numbered.has(scannedKeys[i]!)) numbered.set(scannedKeys[i]!, numbered.size)
  return numbered
}

/** word_similarity(q, text) with q's trigrams computed once: for scoring many texts against one q. */
export function wordSimilarityTo(q: string): (text: string) => number {
  const qIds = numberTrigrams(q)
  return (text) => bestStretch(qIds, text, false)
}

/** strict_word_similarity(q, text) with q's trigrams computed once. */
export function strictWordSimilarityTo(q: string): (text: string) => number {
  const qIds = numberTrigrams(q)
  return (text) => bestStretch(qIds, text, true)
}

/** pg_trgm's word_similarity(q, text): the greatest similarity of q to a stretch of the text's trigrams. */
export function wordSimilarity(q: string, text: string): number {
  return bestStretch(numberTrigrams(q), text, false)
}

/** pg_trgm's strict_word_similarity(q, text): the same over stretches made of whole words. */
export function strictWordSimilarity(q: string, text: string): number {
  return bestStretch(numberTrigrams(q), text, true)
}
