import { LRUCache } from 'lru-cache'
import { similarityFromCounts, strictWordSimilarityTo, trigramsOf, wordSimilarityTo } from '../../shared/trigram'

/** What the index needs of a card. */
export interface SearchableCard {
  id: number
  name: string
  /** cleanName(name): lowercase, accent-free words of letters and digits separated by single spaces. */
  cleanName: string
  gameId: number
  setId: number
  productType: string
  rarity: string
  /** The printings the card has a price row for. */
  printings: readonly string[]
  /** The primary printing's market price (docs/adr/0011-primary-printing.md). */
  marketPrice: number | null
}

/**
 * The cards an index is built from, read one at a time: `at(i)` may fill and return the same object
 * on every call, so a snapshot's columns are read without an object per card (204k objects were
 * 24 MB at the peak of a rebuild, docs/adr/0129-the-rebuild-s-peak-and-the-type-ahead-s-tail.md).
 */
export interface SearchableCards {
  readonly length: number
  /** Card i; valid until the next call. */
  at(i: number): SearchableCard
}

export type IndexSort = 'relevance' | 'price_asc' | 'price_desc' | 'name'

export interface IndexQuery {
  /** Already cleaned (cleanName), not empty. */
  text: string
  gameId?: number
  type?: string
  setId?: number
  rarity?: string
  printing?: string
  minPrice?: number
  maxPrice?: number
  sort: IndexSort
  offset: number
  limit: number
}

export interface IndexPage {
  /** Card ids of the page, in order. */
  ids: number[]
  /** How many cards match under the filters. */
  total: number
}

/** pg_trgm's default similarity_threshold, which the `%` operator of the former SQL correction used. */
const SIMILARITY_THRESHOLD = 0.3
/** Corrections per misspelt word (docs/adr/0042-matching-by-words-then-by-corrected-words.md). */
const MAX_CORRECTIONS = 8
/** Prefixes up to this many characters have their card list built in advance: a 2-letter query is one list, not a union of thousands. */
const PRECOMPUTED_PREFIX = 3
/** Corrections kept per index: the dictionary never changes within an index, and a misspelling tends to be typed again. */
const CORRECTIONS_KEPT = 2_048
/**
 * Longer-prefix unions kept (4+ letters over several dictionary words, such as "char"), in card positions per card of the
 * catalog: bounded by size, not count, so no sequence of queries can make them more than a few MB.
 */
const UNION_ITEMS_PER_ITEM = 4
/** Above this page end (offset + limit) the matches' keys are sorted outright instead of kept in a bounded heap. */
const HEAP_LIMIT = 2_048
/** An unfiltered starts-with set up to this size is sorted outright rather than found by walking the matches. */
const SMALL_STARTS_WITH = 2_048

const EMPTY = new Int32Array(0)
/** Distinct lists of printings remembered while the index is built (see the constructor): catalogs share a few. */
const SHARED_PRINTING_LISTS = 256

/** Code-point order (PostgreSQL's under C.UTF-8); differs from `<` only when a surrogate meets U+E000–U+FFFF. */
function compareCodePoints(a: string, b: string): number {
  if (a === b) return 0
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i)
    let y = b.charCodeAt(i)
    if (x === y) continue
    if (x >= 0xd800 && y >= 0xd800) {
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000
    }
    return x - y
  }
  return a.length - b.length
}

/** Characters as PostgreSQL's length() counts them: code points. */
function codePointLength(s: string): number {
  let n = s.length
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c >= 0xd800 && c < 0xdc00) n--
  }
  return n
}

/** First index in [lo, hi) where `at(i) >= key` (code-unit order, which keeps every prefix's strings contiguous). */
function lowerBound(at: (i: number) => string, lo: number, hi: number, key: string): number {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (at(mid) < key) lo = mid + 1
    else hi = mid
  }
  return lo
}

/** [from, to): the run of sorted strings starting at `from` that start with `prefix`. */
function prefixRun(at: (i: number) => string, size: number, prefix: string): [number, number] {
  const from = lowerBound(at, 0, size, prefix)
  let lo = from
  let hi = size
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (at(mid).startsWith(prefix)) lo = mid + 1
    else hi = mid
  }
  return [from, lo]
}

/** The number of a value in `codes`, numbering it when new. */
function codeOf(codes: Map<string, number>, value: string): number {
  let found = codes.get(value)
  if (found === undefined) codes.set(value, (found = codes.size))
  return found
}

/** The number of a value in `codes`, numbering it when new. */
function codeOfNumber(codes: Map<number, number>, value: number): number {
  let found = codes.get(value)
  if (found === undefined) codes.set(value, (found = codes.size))
  return found
}

/** An Int32Array of f(0..n-1): a plain loop (Int32Array.from with a function goes through iterators, slow on 200k items). */
function int32s(n: number, f: (i: number) => number): Int32Array {
  const result = new Int32Array(n)
  for (let i = 0; i < n; i++) result[i] = f(i)
  return result
}

/** The inverse of a permutation of 0..n-1. */
function inverse(permutation: Int32Array): Int32Array {
  const result = new Int32Array(permutation.length)
  for (let i = 0; i < permutation.length; i++) result[permutation[i]!] = i
  return result
}

/**
 * Indices ordered by (major, minor), where minor is a permutation of 0..n-1 and byMinor its inverse: one native sort of
 * doubles (major·n + minor is exact below 2^53), several times faster than a comparator over 200k items.
 */
function orderBy(major: Int32Array, minor: Int32Array, byMinor: Int32Array): Int32Array {
  const n = minor.length
  const keys = new Float64Array(n)
  for (let i = 0; i < n; i++) keys[i] = major[i]! * n + minor[i]!
  keys.sort()
  const order = new Int32Array(n)
  for (let k = 0; k < n; k++) order[k] = byMinor[keys[k]! % n]!
  return order
}

/** Each string's rank among the (distinct) strings in the comparator's order. */
function rankOf(strings: string[], compare: (a: string, b: string) => number): Int32Array {
  const order = int32s(strings.length, (i) => i).sort((a, b) => compare(strings[a]!, strings[b]!))
  return inverse(order)
}

/** First index whose value is >= key, in an ascending array. */
function lowerBoundNumber(sorted: Float64Array, key: number): number {
  let lo = 0
  let hi = sorted.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (sorted[mid]! < key) lo = mid + 1
    else hi = mid
  }
  return lo
}

/** A float4 score's bits, to order scores as integers. */
const FLOAT = new Float32Array(1)
const BITS = new Uint32Array(FLOAT.buffer)
const ONE_BITS = 0x3f800000

/** A float4 score in [0, 1] as a non-negative integer that orders the other way: higher scores first. */
function scoreBits(score: number): number {
  FLOAT[0] = score
  return ONE_BITS - BITS[0]!
}

/** Adds a key to a max-heap of `size` keys. */
function heapPush(heap: Float64Array, size: number, key: number): void {
  let at = size
  while (at > 0) {
    const parent = (at - 1) >>> 1
    if (heap[parent]! >= key) break
    heap[at] = heap[parent]!
    at = parent
  }
  heap[at] = key
}

/** Replaces the largest key of a full max-heap of `size` keys. */
function heapReplaceTop(heap: Float64Array, size: number, key: number): void {
  let at = 0
  for (;;) {
    const left = 2 * at + 1
    if (left >= size) break
    const child = left + 1 < size && heap[left + 1]! > heap[left]! ? left + 1 : left
    if (heap[child]! <= key) break
    heap[at] = heap[child]!
    at = child
  }
  heap[at] = key
}

/** Sorts a max-heap of `size` keys ascending, in place (Float64Array.prototype.sort is several times slower in Bun). */
function drain(heap: Float64Array, size: number): Float64Array {
  for (let end = size - 1; end > 0; end--) {
    const top = heap[0]!
    heapReplaceTop(heap, end, heap[end]!)
    heap[end] = top
  }
  return heap.subarray(0, size)
}

/** The k lowest of `count` keys, ascending, through a bounded max-heap. */
function lowest(count: number, keyAt: (i: number) => number, k: number): Float64Array {
  const heap = new Float64Array(k)
  let size = 0
  for (let i = 0; i < count; i++) {
    const key = keyAt(i)
    if (size < k) heapPush(heap, size++, key)
    else if (key < heap[0]!) heapReplaceTop(heap, k, key)
  }
  return drain(heap, size)
}

/** Compressed lists: list i is values[start[i] .. start[i + 1]). */
interface Lists {
  start: Int32Array
  values: Int32Array
}

function listOf(lists: Lists, i: number): Int32Array {
  return lists.values.subarray(lists.start[i]!, lists.start[i + 1]!)
}

/** Builds lists from a counting pass and a filling pass over the same items. */
function buildLists(count: number, each: (add: (list: number, value: number) => void) => void): Lists {
  const start = new Int32Array(count + 1)
  each((list) => {
    start[list + 1]!++
  })
  for (let i = 0; i < count; i++) start[i + 1]! += start[i]!
  const values = new Int32Array(start[count]!)
  const next = start.slice(0, count)
  each((list, value) => {
    values[next[list]!++] = value
  })
  return { start, values }
}

/** A filter as the scan reads it: -1 for an id filter not given, a bitset for the printing. */
interface Filter {
  any: boolean
  /** The game is the only filter given. */
  onlyGame: boolean
  game: number
  set: number
  type: number
  rarity: number
  printing: Uint32Array | null
  priced: boolean
  min: number
  max: number
}

/** What a word of q may be in a card's name: a word in the dictionary range [lo, hi) (its prefix), or one of `fixes` (its corrections). */
interface WordAccept {
  word: string
  lo: number
  hi: number
  /** The word's prefix slot when it is short enough to have one. */
  slot: number | undefined
  fixes: Int32Array
}

/**
 * The short-prefix card lists again, each grouped by game (positions ascending within a game): with a game filter, a
 * 1–3 letter word reads its game's part instead of scanning the whole list (45,898 cards for "th" on `large`).
 */
class ByGame {
  /** Each prefix list's positions ordered by (game, position). */
  private readonly values: Int32Array
  /** Per prefix slot, its groups: groupStart[slot] .. groupStart[slot + 1] index groupGames and groupEnds. */
  private readonly groupStart: Int32Array
  private readonly groupGames: Int32Array
  /** Where each group ends in `values` (it starts where the previous one of its slot ends, or at the slot's start). */
  private readonly groupEnds: Int32Array
  private readonly listStart: Int32Array

  constructor(lists: Lists, gameIds: Int32Array) {
    // Game codes in ascending game id, so each slot's groups are sorted by game for the binary search.
    const gameCodes = new Map<number, number>()
    for (const game of [...new Set(gameIds)].sort((a, b) => a - b)) codeOfNumber(gameCodes, game)
    const codeToGame = new Int32Array(gameCodes.size)
    for (const [game, c] of gameCodes) codeToGame[c] = game
    const codes = int32s(gameIds.length, (p) => gameCodes.get(gameIds[p]!)!)
    const slots = lists.start.length - 1
    // Per slot, a stable counting sort by game code: positions stay ascending within a game.
    const counts = new Int32Array(gameCodes.size)
    const seen: number[] = []
    const starts: number[] = []
    const groupGames: number[] = []
    const groupEnds: number[] = []
    this.values = new Int32Array(lists.values.length)
    for (let slot = 0; slot < slots; slot++) {
      const from = lists.start[slot]!
      const to = lists.start[slot + 1]!
      seen.length = 0
      for (let j = from; j < to; j++) if (counts[codes[lists.values[j]!]!]!++ === 0) seen.push(codes[lists.values[j]!]!)
      seen.sort((a, b) => a - b)
      starts.push(groupGames.length)
      let end = from
      for (const c of seen) {
        const size = counts[c]!
        counts[c] = end // from here on: where the game's next position goes
        end += size
        groupGames.push(codeToGame[c]!)
        groupEnds.push(end)
      }
      for (let j = from; j < to; j++) {
        const p = lists.values[j]!
        this.values[counts[codes[p]!]!++] = p
      }
      for (const c of seen) counts[c] = 0
    }
    starts.push(groupGames.length)
    this.groupStart = Int32Array.from(starts)
    this.groupGames = Int32Array.from(groupGames)
    this.groupEnds = Int32Array.from(groupEnds)
    this.listStart = lists.start
  }

  get bytes(): number {
    return this.values.byteLength + this.groupStart.byteLength + this.groupGames.byteLength + this.groupEnds.byteLength
  }

  /** The positions in prefix list `slot` of cards of `game`, ascending. */
  of(slot: number, game: number): Int32Array {
    let lo = this.groupStart[slot]!
    let hi = this.groupStart[slot + 1]!
    const first = lo
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (this.groupGames[mid]! < game) lo = mid + 1
      else hi = mid
    }
    if (lo === this.groupStart[slot + 1]! || this.groupGames[lo] !== game) return EMPTY
    const from = lo === first ? this.listStart[slot]! : this.groupEnds[lo - 1]!
    return this.values.subarray(from, this.groupEnds[lo]!)
  }
}

/**
 * Which items (cards, or distinct names for type-ahead) have which words, items in ascending order: per dictionary word,
 * and per prefix of 1 to PRECOMPUTED_PREFIX characters (so a 2-letter query is one list, not a union of hundreds).
 */
class Postings {
  readonly byWord: Lists
  readonly byPrefix: Lists
  private readonly unions: LRUCache<string, Int32Array>

  /**
   * Item i has the words of clean name `cleanOf[i]` (`cleanWords`: distinct words ascending); `prefixSlots[L - 1][w]`: the
   * slot of word w's prefix of length L, or -1. Plain index loops: a subarray per item would be a short-lived object each.
   */
  constructor(cleanOf: Int32Array, cleanWords: Lists, words: number, slots: number, prefixSlots: Int32Array[]) {
    const items = cleanOf.length
    // Bounded by the items held, least recently read first out; an empty union weighs one.
    this.unions = new LRUCache({ maxSize: UNION_ITEMS_PER_ITEM * items + 1, sizeCalculation: (union) => Math.max(1, union.length) })
    const { start, values } = cleanWords
    this.byWord = buildLists(words, (add) => {
      for (let i = 0; i < items; i++) {
        const c = cleanOf[i]!
        for (let j = start[c]!, end = start[c + 1]!; j < end; j++) add(values[j]!, i)
      }
    })
    // Ascending words give non-decreasing slots (sorted words share a prefix while they are adjacent): repeats are adjacent.
    this.byPrefix = buildLists(slots, (add) => {
      for (let i = 0; i < items; i++) {
        const c = cleanOf[i]!
        for (let length = 0; length < prefixSlots.length; length++) {
          const slotOf = prefixSlots[length]!
          let last = -1
          for (let j = start[c]!, end = start[c + 1]!; j < end; j++) {
            const slot = slotOf[values[j]!]!
            if (slot !== -1 && slot !== last) add((last = slot), i)
          }
        }
      }
    })
  }

  get bytes(): number {
    return this.byWord.start.byteLength + this.byWord.values.byteLength + this.byPrefix.start.byteLength + this.byPrefix.values.byteLength
  }

  /** An upper bound of the items with a word in the accept's range (exact for a short prefix). */
  estimate(accept: WordAccept): number {
    const slot = accept.slot
    if (accept.lo === accept.hi) return 0
    if (slot !== undefined) return this.byPrefix.start[slot + 1]! - this.byPrefix.start[slot]!
    return this.byWord.start[accept.hi]! - this.byWord.start[accept.lo]!
  }

  /** The items with a word in the accept's range, ascending, each once. */
  of(accept: WordAccept): Int32Array {
    const slot = accept.slot
    if (accept.lo === accept.hi) return EMPTY
    if (slot !== undefined) return listOf(this.byPrefix, slot)
    if (accept.hi - accept.lo === 1) return listOf(this.byWord, accept.lo)
    const kept = this.unions.get(accept.word)
    if (kept) return kept
    const gathered = this.byWord.values.slice(this.byWord.start[accept.lo]!, this.byWord.start[accept.hi]!).sort()
    let size = 0
    for (let i = 0; i < gathered.length; i++) if (i === 0 || gathered[i] !== gathered[i - 1]) gathered[size++] = gathered[i]!
    const union = gathered.slice(0, size)
    this.unions.set(accept.word, union)
    return union
  }

  /** Items with the word w. */
  ofWord(w: number): Int32Array {
    return listOf(this.byWord, w)
  }
}

/**
 * Card search in memory (docs/adr/0042-matching-by-words-then-by-corrected-words.md, docs/adr/0043-relevance-filters-and-statements.md):
 * every word of q a prefix of a word of the name; when nothing matches so, each word of q may also be one of its 8 closest
 * dictionary words by trigram similarity.
 *
 * Cards live at positions ordered by (name length, id), so any list of positions in ascending order is already in relevance
 * order within a tier. Everything is struct-of-arrays in typed arrays: a 204k-card catalog is a few dozen MB and a search
 * touches integers, not objects. Built once per snapshot and never changed; `search` is synchronous and not re-entrant
 * (it shares scratch arrays between calls).
 */
export class SearchIndex {
  /** Estimated bytes of the index's arrays and strings: typed arrays exact; strings and map entries estimated (distinct names counted in full). */
  readonly bytes: number
  /** Distinct words in card names: the dictionary misspellings are corrected against. */
  readonly words: number

  // By position.
  private readonly size: number
  private readonly ids: Int32Array
  private readonly gameIds: Int32Array
  private readonly setIds: Int32Array
  private readonly types: Int32Array
  private readonly rarities: Int32Array
  private readonly prices: Float64Array
  /** Each card's distinct clean name, and the distinct clean names. */
  private readonly cleanIds: Int32Array
  private readonly cleanList: string[]
  /** Each distinct clean name's distinct dictionary words, ascending. */
  private readonly cleanWords: Lists

  private readonly typeCodes = new Map<string, number>()
  private readonly rarityCodes = new Map<string, number>()
  private readonly printingSets = new Map<string, Uint32Array>()

  /** Distinct words, in code-unit order, so each prefix is a range. */
  private readonly dictionary: string[]
  /** Prefix of 1 to PRECOMPUTED_PREFIX characters → its slot in the postings' byPrefix. */
  private readonly prefixSlots = new Map<string, number>()
  /** Word and short prefix → positions of the cards with it; short prefixes also per game. */
  private readonly cards: Postings
  private readonly cardsByGame: ByGame
  /** Trigram → the dictionary words with it; each word's number of distinct trigrams. */
  private readonly trigramSlots = new Map<string, number>()
  private readonly trigramWords: Lists
  private readonly wordTrigrams: Int32Array

  /** Positions in code-unit order of their clean name (then position): the cards of clean-name ranks [a, b) are a range. */
  private readonly byCleanName: Int32Array
  /** Each distinct clean name's rank in code-unit order, its inverse, and how many cards have a clean name of lower rank. */
  private readonly cleanRanks: Int32Array
  private readonly cleanByRank: Int32Array
  private readonly cardsBeforeRank: Int32Array
  /** Per sort: position → rank, and rank → position. */
  private readonly ranks: Record<Exclude<IndexSort, 'relevance'>, { rank: Int32Array; order: Int32Array }>
  // Type-ahead works on distinct display names ("entries"), numbered in its order: clean name length, then name.
  private readonly entryNames: string[]
  private readonly entryCleanIds: Int32Array
  /** Each entry's games, ascending. */
  private readonly entryGames: Lists
  /** Entries in code-unit order of their clean name (then entry): names starting with q are a range. */
  private readonly entriesByCleanName: Int32Array
  private readonly entries: Postings

  // Scratch, reused by every call.
  private readonly marks: Uint32Array
  private stamp = 0
  private readonly matches: Int32Array
  private readonly counts: Uint16Array
  private readonly touched: Int32Array
  /** A fuzzy query's score per distinct clean name, as scoreBits (cards share names: a name is scored once). */
  private readonly cleanMarks: Uint32Array
  private readonly cleanScores: Float64Array
  private cleanStamp = 0
  private readonly corrections = new LRUCache<string, Int32Array>({ max: CORRECTIONS_KEPT })

  static build(cards: readonly SearchableCard[] | SearchableCards): SearchIndex {
    return new SearchIndex(Array.isArray(cards) ? { length: cards.length, at: (i) => cards[i]! } : (cards as SearchableCards))
  }

  private constructor(input: SearchableCards) {
    const n = input.length
    this.size = n
    // Distinct clean names and display names: each is split, measured and ordered once, however many cards share it.
    const cleanMap = new Map<string, number>()
    const nameMap = new Map<string, number>()
    const cleanOfInput = new Int32Array(n)
    const nameOfInput = new Int32Array(n)
    const idKeys = new Float64Array(n)
    // A name seen before most often comes with the clean name it came with then: one comparison instead of a lookup.
    const cleanOfName: number[] = []
    const cleanNames: string[] = []
    for (let i = 0; i < n; i++) {
      const card = input.at(i)
      const name = codeOf(nameMap, card.name)
      nameOfInput[i] = name
      if (name === cleanOfName.length) cleanOfName.push((cleanOfInput[i] = codeOf(cleanMap, card.cleanName)))
      else cleanOfInput[i] = cleanNames[cleanOfName[name]!] === card.cleanName ? cleanOfName[name]! : codeOf(cleanMap, card.cleanName)
      if (cleanOfInput[i] === cleanNames.length) cleanNames.push(card.cleanName)
      idKeys[i] = card.id * n + i
    }
    const cleanList = [...cleanMap.keys()]
    this.cleanList = cleanList
    const nameList = [...nameMap.keys()]
    cleanMap.clear()
    nameMap.clear()
    const cleanLengths = int32s(cleanList.length, (c) => codePointLength(cleanList[c]!))

    // Ranks by id (ids are below 2^31, so id·n + i is exact in a double), then positions by (clean name length, id).
    idKeys.sort()
    const inputByIdRank = new Int32Array(n)
    for (let r = 0; r < n; r++) inputByIdRank[r] = idKeys[r]! % n
    const idRankOfInput = inverse(inputByIdRank)
    const inputAt = orderBy(
      int32s(n, (i) => cleanLengths[cleanOfInput[i]!]!),
      idRankOfInput,
      inputByIdRank,
    )

    this.ids = new Int32Array(n)
    this.gameIds = new Int32Array(n)
    this.setIds = new Int32Array(n)
    this.types = new Int32Array(n)
    this.rarities = new Int32Array(n)
    this.prices = new Float64Array(n)
    this.cleanIds = new Int32Array(n)
    const nameIds = new Int32Array(n)
    const idRanks = new Int32Array(n)
    // Most cards share their type, and their list of printings (the same array): the previous card's codes are tried first, by identity.
    let lastType: string | undefined
    let lastTypeCode = 0
    let lastRarity: string | undefined
    let lastRarityCode = 0
    const setsOfPrintings = new Map<readonly string[], Uint32Array[]>()
    for (let p = 0; p < n; p++) {
      const i = inputAt[p]!
      const card = input.at(i)
      this.ids[p] = card.id
      this.gameIds[p] = card.gameId
      this.setIds[p] = card.setId
      if (card.productType !== lastType) lastTypeCode = codeOf(this.typeCodes, (lastType = card.productType))
      this.types[p] = lastTypeCode
      if (card.rarity !== lastRarity) lastRarityCode = codeOf(this.rarityCodes, (lastRarity = card.rarity))
      this.rarities[p] = lastRarityCode
      this.prices[p] = card.marketPrice ?? Number.NaN
      this.cleanIds[p] = cleanOfInput[i]!
      nameIds[p] = nameOfInput[i]!
      idRanks[p] = idRankOfInput[i]!
      let sets = setsOfPrintings.get(card.printings)
      if (!sets) {
        sets = card.printings.map((printing) => {
          let set = this.printingSets.get(printing)
          if (!set) this.printingSets.set(printing, (set = new Uint32Array((n + 31) >>> 5)))
          return set
        })
        // Cards given an array each (many printings, see snapshot.ts's buildSearch) would only fill the map.
        if (setsOfPrintings.size < SHARED_PRINTING_LISTS) setsOfPrintings.set(card.printings, sets)
      }
      for (let k = 0; k < sets.length; k++) sets[k]![p >>> 5]! |= 1 << (p & 31)
    }
    setsOfPrintings.clear()
    const positionByIdRank = inverse(idRanks)

    // The dictionary in code-unit order (so a prefix is a range) and each clean name's distinct words, ascending.
    const wordMap = new Map<string, number>()
    const provisional = cleanList.map((clean) => {
      const own: number[] = []
      for (const word of clean.split(' ')) if (word.length > 0) own.push(codeOf(wordMap, word))
      return own
    })
    const dictionary = [...wordMap.keys()].sort()
    this.dictionary = dictionary
    this.words = dictionary.length
    const place = new Int32Array(dictionary.length)
    for (let w = 0; w < dictionary.length; w++) place[wordMap.get(dictionary[w]!)!] = w
    wordMap.clear()
    this.cleanWords = buildLists(cleanList.length, (add) => {
      for (let c = 0; c < provisional.length; c++) {
        const own = provisional[c]!.map((w) => place[w]!).sort((a, b) => a - b)
        for (let j = 0; j < own.length; j++) if (j === 0 || own[j] !== own[j - 1]) add(c, own[j]!)
      }
    })
    provisional.length = 0
    const cleanWords = this.cleanWords
    const cleanIds = this.cleanIds

    // Short prefixes: a word's prefix of length L has one slot.
    const wordPrefixSlot: Int32Array[] = []
    for (let length = 1; length <= PRECOMPUTED_PREFIX; length++) {
      const slots = new Int32Array(dictionary.length).fill(-1)
      for (let w = 0; w < dictionary.length; w++) {
        const word = dictionary[w]!
        if (word.length >= length) slots[w] = codeOf(this.prefixSlots, word.slice(0, length))
      }
      wordPrefixSlot.push(slots)
    }
    this.cards = new Postings(cleanIds, cleanWords, dictionary.length, this.prefixSlots.size, wordPrefixSlot)
    this.cardsByGame = new ByGame(this.cards.byPrefix, this.gameIds)

    // Trigram → words, for corrections.
    const wordTrigramList = dictionary.map((word) => trigramsOf(word).map((t) => codeOf(this.trigramSlots, t)))
    this.wordTrigrams = int32s(dictionary.length, (w) => wordTrigramList[w]!.length)
    this.trigramWords = buildLists(this.trigramSlots.size, (add) => {
      for (let w = 0; w < dictionary.length; w++) for (const t of wordTrigramList[w]!) add(t, w)
    })

    // Orders, each one native sort of doubles: byCleanName by (clean name, position), the sorts by (key, id).
    const cleanRank = rankOf(cleanList, (a, b) => (a < b ? -1 : a > b ? 1 : 0))
    this.cleanRanks = cleanRank
    this.cleanByRank = inverse(cleanRank)
    this.cardsBeforeRank = new Int32Array(cleanList.length + 1)
    for (let p = 0; p < n; p++) this.cardsBeforeRank[cleanRank[cleanIds[p]!]! + 1]!++
    for (let r = 0; r < cleanList.length; r++) this.cardsBeforeRank[r + 1]! += this.cardsBeforeRank[r]!
    const identity = int32s(n, (p) => p)
    this.byCleanName = orderBy(
      int32s(n, (p) => cleanRank[cleanIds[p]!]!),
      identity,
      identity,
    )
    const nameRank = rankOf(nameList, nameList.some((name) => /[\uD800-\uDFFF]/.test(name)) ? compareCodePoints : (a, b) => (a < b ? -1 : a > b ? 1 : 0))
    const sortedPrices = this.prices.filter((price) => !Number.isNaN(price)).sort()
    const priceRank = (descending: boolean) =>
      int32s(n, (p) => {
        const price = this.prices[p]!
        if (Number.isNaN(price)) return sortedPrices.length // unpriced last, both ways
        const r = lowerBoundNumber(sortedPrices, price)
        return descending ? sortedPrices.length - 1 - r : r
      })
    const ranked = (major: Int32Array) => {
      const order = orderBy(major, idRanks, positionByIdRank)
      return { rank: inverse(order), order }
    }
    this.ranks = {
      price_asc: ranked(priceRank(false)),
      price_desc: ranked(priceRank(true)),
      name: ranked(int32s(n, (p) => nameRank[nameIds[p]!]!)),
    }

    // Type-ahead entries: distinct display names by (clean name length, name).
    const nameLengths = new Int32Array(nameList.length)
    const nameCleanIds = new Int32Array(nameList.length)
    for (let p = 0; p < n; p++) {
      nameLengths[nameIds[p]!] = cleanLengths[cleanIds[p]!]!
      nameCleanIds[nameIds[p]!] = cleanIds[p]!
    }
    const nameAt = orderBy(nameLengths, nameRank, inverse(nameRank))
    const entryOfName = inverse(nameAt)
    this.entryNames = Array.from(nameAt, (name) => nameList[name]!)
    this.entryCleanIds = int32s(nameAt.length, (e) => nameCleanIds[nameAt[e]!]!)
    // (entry, game) pairs as entry·2^31 + game (game ids are below 2^31), sorted: each entry's games ascending, repeats adjacent.
    const pairs = new Float64Array(n)
    for (let p = 0; p < n; p++) pairs[p] = entryOfName[nameIds[p]!]! * 2 ** 31 + this.gameIds[p]!
    pairs.sort()
    this.entryGames = buildLists(nameAt.length, (add) => {
      for (let i = 0; i < n; i++) if (i === 0 || pairs[i] !== pairs[i - 1]) add(Math.floor(pairs[i]! / 2 ** 31), pairs[i]! % 2 ** 31)
    })
    const entryCleanIds = this.entryCleanIds
    this.entriesByCleanName = orderBy(
      int32s(nameAt.length, (e) => cleanRank[entryCleanIds[e]!]!),
      int32s(nameAt.length, (e) => e),
      int32s(nameAt.length, (e) => e),
    )
    this.entries = new Postings(entryCleanIds, cleanWords, dictionary.length, this.prefixSlots.size, wordPrefixSlot)

    this.marks = new Uint32Array(n)
    this.matches = new Int32Array(n)
    this.counts = new Uint16Array(dictionary.length)
    this.touched = new Int32Array(dictionary.length)
    this.cleanMarks = new Uint32Array(cleanList.length)
    this.cleanScores = new Float64Array(cleanList.length)

    this.bytes = this.estimateBytes()
  }

  private estimateBytes(): number {
    const typed = [
      this.ids,
      this.gameIds,
      this.setIds,
      this.types,
      this.rarities,
      this.prices,
      this.cleanIds,
      this.cleanWords.start,
      this.cleanWords.values,
      this.trigramWords.start,
      this.trigramWords.values,
      this.wordTrigrams,
      this.byCleanName,
      this.cleanRanks,
      this.cleanByRank,
      this.cardsBeforeRank,
      this.entryCleanIds,
      this.entryGames.start,
      this.entryGames.values,
      this.entriesByCleanName,
      ...Object.values(this.ranks).flatMap(({ rank, order }) => [rank, order]),
      ...this.printingSets.values(),
      this.marks,
      this.matches,
      this.counts,
      this.touched,
      this.cleanMarks,
      this.cleanScores,
    ].reduce((sum, array) => sum + array.byteLength, this.cards.bytes + this.cardsByGame.bytes + this.entries.bytes)
    // A reference is 8 bytes; a string about 32 bytes of header plus its characters (1 byte each when Latin-1, else 2).
    const stringBytes = (s: string) => 32 + (/^[\0-\xff]*$/.test(s) ? s.length : 2 * s.length)
    // Distinct names are counted in full although the snapshot's cards may share them: an upper bound.
    let strings = 8 * (this.entryNames.length + this.cleanList.length + this.dictionary.length)
    for (const list of [this.entryNames, this.cleanList, this.dictionary]) for (const text of list) strings += stringBytes(text)
    // Map entries: key string, value, and about 40 bytes of table.
    for (const map of [this.prefixSlots, this.trigramSlots]) for (const key of map.keys()) strings += stringBytes(key) + 40
    return typed + strings
  }

  /** A page of the cards matching `query.text` under its filters, in its order, with the number of matches. */
  search(query: IndexQuery): IndexPage {
    const filter = this.filterOf(query)
    if (!filter) return { ids: [], total: 0 }
    const words = query.text.split(' ').filter((word) => word.length > 0)
    if (words.length === 0) return { ids: [], total: 0 }
    const accepts = words.map((word) => this.acceptOf(word, EMPTY))
    const found = this.wordMatches(accepts, filter)
    if (found.total > 0) {
      if (query.sort === 'relevance') return { ids: this.relevancePage(query.text, found.list, found.total, !filter.any, query), total: found.total }
      return { ids: this.rankedPage(found.list, found.total, this.ranks[query.sort], query), total: found.total }
    }
    const fuzzy = this.fuzzyMatches(
      words.map((word, i) => ({ ...accepts[i]!, fixes: this.correctionsOf(word) })),
      filter,
    )
    if (fuzzy === 0) return { ids: [], total: 0 }
    if (query.sort === 'relevance') return { ids: this.fuzzyPage(query.text, words.length > 1, fuzzy, query), total: fuzzy }
    return { ids: this.rankedPage(this.matches, fuzzy, this.ranks[query.sort], query), total: fuzzy }
  }

  /** The filter in codes; null when a value no card has is asked for (nothing can match). */
  private filterOf(query: IndexQuery): Filter | null {
    const type = query.type === undefined ? -1 : this.typeCodes.get(query.type)
    const rarity = query.rarity === undefined ? -1 : this.rarityCodes.get(query.rarity)
    const printing = query.printing === undefined ? null : this.printingSets.get(query.printing)
    if (type === undefined || rarity === undefined || printing === undefined) return null
    const priced = query.minPrice !== undefined || query.maxPrice !== undefined
    return {
      any: query.gameId !== undefined || query.setId !== undefined || type !== -1 || rarity !== -1 || printing !== null || priced,
      onlyGame: query.gameId !== undefined && query.setId === undefined && type === -1 && rarity === -1 && printing === null && !priced,
      game: query.gameId ?? -1,
      set: query.setId ?? -1,
      type,
      rarity,
      printing,
      priced,
      min: query.minPrice ?? Number.NEGATIVE_INFINITY,
      max: query.maxPrice ?? Number.POSITIVE_INFINITY,
    }
  }

  private passes(p: number, f: Filter): boolean {
    if (f.game !== -1 && this.gameIds[p] !== f.game) return false
    if (f.set !== -1 && this.setIds[p] !== f.set) return false
    if (f.type !== -1 && this.types[p] !== f.type) return false
    if (f.rarity !== -1 && this.rarities[p] !== f.rarity) return false
    if (f.printing !== null && ((f.printing[p >>> 5]! >>> (p & 31)) & 1) === 0) return false
    if (f.priced) {
      const price = this.prices[p]!
      if (!(price >= f.min && price <= f.max)) return false // NaN (unpriced) fails both
    }
    return true
  }

  private acceptOf(word: string, fixes: Int32Array): WordAccept {
    const [lo, hi] = prefixRun((i) => this.dictionary[i]!, this.dictionary.length, word)
    const slot = word.length <= PRECOMPUTED_PREFIX ? this.prefixSlots.get(word) : undefined
    return { word, lo, hi, slot, fixes }
  }

  /** Whether a card has a word the accept takes. */
  /** Whether every one of `accepts` takes a word of the card at position p. */
  private acceptsAll(p: number, accepts: readonly WordAccept[]): boolean {
    for (const accept of accepts) if (!this.cardAccepts(p, accept)) return false
    return true
  }

  private cardAccepts(p: number, accept: WordAccept): boolean {
    return this.cleanAccepts(this.cleanIds[p]!, accept)
  }

  /** Whether a clean name has a word the accept takes. */
  private cleanAccepts(c: number, accept: WordAccept): boolean {
    const values = this.cleanWords.values
    for (let j = this.cleanWords.start[c]!, end = this.cleanWords.start[c + 1]!; j < end; j++) {
      const w = values[j]!
      if (w >= accept.lo && w < accept.hi) return true
      if (accept.fixes.length > 0 && accept.fixes.includes(w)) return true
    }
    return false
  }

  /**
   * The word matches: positions ascending, and how many. With one word and no filter the list is the prefix's own (no copy);
   * else the matches are written to the scratch `matches`.
   */
  private wordMatches(accepts: WordAccept[], filter: Filter): { list: Int32Array; total: number } {
    // With a game filter a short prefix reads its game's part of the list.
    const byGame = (accept: WordAccept) => filter.game !== -1 && accept.slot !== undefined && accept.lo !== accept.hi
    const listFor = (accept: WordAccept) => (byGame(accept) ? this.cardsByGame.of(accept.slot!, filter.game) : this.cards.of(accept))
    let driver = 0
    let least = Number.POSITIVE_INFINITY
    for (let i = 0; i < accepts.length; i++) {
      const accept = accepts[i]!
      const estimate = byGame(accept) ? listFor(accept).length : this.cards.estimate(accept)
      if (estimate < least) [driver, least] = [i, estimate]
    }
    if (least === 0) return { list: EMPTY, total: 0 }
    const candidates = listFor(accepts[driver]!)
    const others = accepts.filter((_, i) => i !== driver)
    if (others.length === 0 && (!filter.any || (filter.onlyGame && byGame(accepts[driver]!)))) return { list: candidates, total: candidates.length }
    let total = 0
    const matches = this.matches
    for (let i = 0; i < candidates.length; i++) {
      const p = candidates[i]!
      if (filter.any && !this.passes(p, filter)) continue
      if (this.acceptsAll(p, others)) matches[total++] = p
    }
    return { list: matches, total }
  }

  private nextStamp(): number {
    if (++this.stamp === 0xffffffff) {
      this.marks.fill(0)
      this.stamp = 1
    }
    return this.stamp
  }

  /**
   * Relevance among word matches: names starting with q first (the exact name is the shortest of them, so position order
   * puts it first), then the others; each part in position order. `unfiltered`: every name starting with q is in `list`.
   */
  private relevancePage(text: string, list: Int32Array, total: number, unfiltered: boolean, page: { offset: number; limit: number }): number[] {
    const { offset, limit } = page
    const ids: number[] = []
    if (offset >= total || limit <= 0) return ids
    // A card's name starts with text when its clean name's rank is in [from, to): a range test, nothing to mark.
    const [from, to] = prefixRun((r) => this.cleanList[this.cleanByRank[r]!]!, this.cleanByRank.length, text)
    if (from === to) return this.idsOf(list.subarray(offset, Math.min(total, offset + limit)))
    const ranks = this.cleanRanks
    const cleanIds = this.cleanIds
    const starts = (p: number) => {
      const r = ranks[cleanIds[p]!]!
      return r >= from && r < to
    }
    let starting = this.cardsBeforeRank[to]! - this.cardsBeforeRank[from]!
    if (!unfiltered) {
      starting = 0
      for (let i = 0; i < total; i++) if (starts(list[i]!)) starting++
    }
    if (offset < starting) {
      if (unfiltered && starting <= SMALL_STARTS_WITH) {
        const sorted = this.byCleanName.slice(this.cardsBeforeRank[from]!, this.cardsBeforeRank[to]!).sort()
        for (let i = offset; i < sorted.length && ids.length < limit; i++) ids.push(this.ids[sorted[i]!]!)
      } else {
        for (let i = 0, seen = 0; i < total && ids.length < limit; i++) {
          const p = list[i]!
          if (starts(p) && seen++ >= offset) ids.push(this.ids[p]!)
        }
      }
    }
    let skip = Math.max(0, offset - starting)
    for (let i = 0; i < total && ids.length < limit; i++) {
      const p = list[i]!
      if (starts(p)) continue
      if (skip > 0) skip--
      else ids.push(this.ids[p]!)
    }
    return ids
  }

  /**
   * The page of `list[0..total)` by a rank. Dense matches walk the whole order and keep the marked (cheaper when
   * k·n < total²); sparse ones keep the k lowest ranks in a heap, or sort every rank when k is large.
   */
  private rankedPage(list: Int32Array, total: number, by: { rank: Int32Array; order: Int32Array }, page: { offset: number; limit: number }): number[] {
    const { offset, limit } = page
    if (offset >= total || limit <= 0) return []
    const k = Math.min(total, offset + limit)
    const positions: number[] = []
    if (k * this.size < total * total) {
      const stamp = this.nextStamp()
      for (let i = 0; i < total; i++) this.marks[list[i]!] = stamp
      for (let r = 0; r < this.size && positions.length < k; r++) {
        const p = by.order[r]!
        if (this.marks[p] === stamp) positions.push(p)
      }
      return this.idsOf(positions.slice(offset))
    }
    let ranks: ArrayLike<number>
    if (k > HEAP_LIMIT) {
      const all = new Int32Array(total)
      for (let i = 0; i < total; i++) all[i] = by.rank[list[i]!]!
      ranks = all.sort().subarray(0, k)
    } else ranks = lowest(total, (i) => by.rank[list[i]!]!, k)
    const ids: number[] = []
    for (let i = offset; i < ranks.length; i++) ids.push(this.ids[by.order[ranks[i]!]!]!)
    return ids
  }

  private idsOf(positions: ArrayLike<number>): number[] {
    const ids = new Array<number>(positions.length)
    for (let i = 0; i < positions.length; i++) ids[i] = this.ids[positions[i]!]!
    return ids
  }

  /**
   * The up to 8 dictionary words at least 0.3 similar to `word`, most similar first, ties by word. Candidates are the words
   * sharing a trigram with it, their shared trigrams counted through the trigram lists (similarity is shared over union).
   */
  private correctionsOf(word: string): Int32Array {
    const kept = this.corrections.get(word)
    if (kept) return kept
    const own = trigramsOf(word)
    const reached = this.countShared(own)
    const close: { w: number; score: number }[] = []
    for (let i = 0; i < reached; i++) {
      const w = this.touched[i]!
      const shared = this.counts[w]!
      const score = similarityFromCounts(shared, this.wordTrigrams[w]!, own.length)
      if (score >= SIMILARITY_THRESHOLD) close.push({ w, score })
    }
    this.clearShared(reached)
    close.sort((a, b) => b.score - a.score || compareCodePoints(this.dictionary[a.w]!, this.dictionary[b.w]!))
    const fixes = Int32Array.from(close.slice(0, MAX_CORRECTIONS), ({ w }) => w)
    this.corrections.set(word, fixes)
    return fixes
  }

  /** Counts in `counts` each dictionary word's trigrams among `trigrams` (distinct); the words reached are `touched[0..returned)`. */
  private countShared(trigrams: string[]): number {
    const counts = this.counts
    const touched = this.touched
    const values = this.trigramWords.values
    let reached = 0
    for (const trigram of trigrams) {
      const slot = this.trigramSlots.get(trigram)
      if (slot === undefined) continue
      for (let j = this.trigramWords.start[slot]!, end = this.trigramWords.start[slot + 1]!; j < end; j++) {
        const w = values[j]!
        const count = counts[w]!
        counts[w] = count + 1
        if (count === 0) touched[reached++] = w
      }
    }
    return reached
  }

  private clearShared(reached: number): void {
    for (let i = 0; i < reached; i++) this.counts[this.touched[i]!] = 0
  }

  /** The fuzzy matches, written to the scratch `matches` (in no particular order); how many. */
  private fuzzyMatches(accepts: WordAccept[], filter: Filter): number {
    const sizeOf = (accept: WordAccept) => {
      let size = this.cards.estimate(accept)
      for (const w of accept.fixes) size += this.cards.ofWord(w).length
      return size
    }
    let driver = 0
    let least = Number.POSITIVE_INFINITY
    for (let i = 0; i < accepts.length; i++) {
      const size = sizeOf(accepts[i]!)
      if (size < least) [driver, least] = [i, size]
    }
    if (least === 0) return 0
    const others = accepts.filter((_, i) => i !== driver)
    const stamp = this.nextStamp()
    const marks = this.marks
    const matches = this.matches
    let total = 0
    const consider = (candidates: Int32Array) => {
      for (let i = 0; i < candidates.length; i++) {
        const p = candidates[i]!
        if (marks[p] === stamp) continue
        marks[p] = stamp
        if (filter.any && !this.passes(p, filter)) continue
        if (this.acceptsAll(p, others)) matches[total++] = p
      }
    }
    const accept = accepts[driver]!
    consider(this.cards.of(accept))
    for (const w of accept.fixes) consider(this.cards.ofWord(w))
    return total
  }

  /**
   * Fuzzy matches by their word similarity to q (strict with several words), then position (shorter name, then id): one
   * number per match, (1 - score) in float4 bits then position, so the page is the k lowest numbers.
   *
   * Scoring is the cost (a microsecond or two per name), so only the names that can reach the page are scored. A stretch's
   * similarity is shared / (|q| + distinct - shared) <= shared / |q|, and a name shares with q at most the sum over its
   * words of what each word shares (counted through the trigram lists): a bound per match. Matches are visited by bound,
   * highest first, and the visit stops once a bound cannot beat the k-th best exact key.
   */
  private fuzzyPage(text: string, severalWords: boolean, total: number, page: { offset: number; limit: number }): number[] {
    const { offset, limit } = page
    if (offset >= total || limit <= 0) return []
    const k = Math.min(total, offset + limit)
    const n = this.size
    const score = severalWords ? strictWordSimilarityTo(text) : wordSimilarityTo(text)
    if (++this.cleanStamp === 0xffffffff) {
      this.cleanMarks.fill(0)
      this.cleanStamp = 1
    }
    const keyOf = (p: number) => {
      const c = this.cleanIds[p]!
      if (this.cleanMarks[c] !== this.cleanStamp) {
        this.cleanMarks[c] = this.cleanStamp
        this.cleanScores[c] = scoreBits(score(this.cleanList[c]!))
      }
      return this.cleanScores[c]! * n + p
    }

    const own = trigramsOf(text)
    // A deep page, or a q without trigrams (every score 0): score every match.
    if (k > HEAP_LIMIT || own.length === 0)
      return this.idsOfKeys(
        lowest(total, (i) => keyOf(this.matches[i]!), k),
        offset,
        n,
      )

    // Each match's bound: the trigrams its name's words share with q, at most |q|.
    const reached = this.countShared(own)
    const counts = this.counts
    const values = this.cleanWords.values
    const bounds = new Int32Array(total)
    const inBound = new Int32Array(own.length + 2)
    for (let i = 0; i < total; i++) {
      const c = this.cleanIds[this.matches[i]!]!
      let shared = 0
      for (let j = this.cleanWords.start[c]!, end = this.cleanWords.start[c + 1]!; j < end; j++) shared += counts[values[j]!]!
      bounds[i] = Math.min(shared, own.length)
      inBound[bounds[i]!]!++
    }
    this.clearShared(reached)
    // Matches grouped by bound, highest first (a counting sort). Within a group they stay in the order found, which is
    // mostly by position already (each card list is): a match whose bound cannot enter the page is not scored.
    const starts = new Int32Array(own.length + 2)
    for (let b = own.length; b > 0; b--) starts[b - 1] = starts[b]! + inBound[b]!
    const next = starts.slice()
    const grouped = new Int32Array(total)
    for (let i = 0; i < total; i++) grouped[next[bounds[i]!]!++] = this.matches[i]!

    const heap = new Float64Array(k) // max-heap of the k lowest exact keys so far
    let size = 0
    for (let b = own.length; b >= 0; b--) {
      const bound = scoreBits(Math.fround(b / own.length)) * n
      if (size === k && bound > heap[0]!) break // this group and every later one (lower bounds) cannot enter
      for (let i = starts[b]!, end = starts[b]! + inBound[b]!; i < end; i++) {
        const p = grouped[i]!
        if (size === k && bound + p > heap[0]!) continue
        const key = keyOf(p)
        if (size < k) heapPush(heap, size++, key)
        else if (key < heap[0]!) heapReplaceTop(heap, k, key)
      }
    }
    return this.idsOfKeys(drain(heap, size), offset, n)
  }

  /** The ids of keys (position in the last place: key mod n) from `offset` on. */
  private idsOfKeys(keys: Float64Array, offset: number, n: number): number[] {
    const ids: number[] = []
    for (let i = offset; i < keys.length; i++) ids.push(this.ids[keys[i]! % n]!)
    return ids
  }

  /**
   * Type-ahead (Scryfall's /cards/autocomplete is the model): up to `limit` distinct display names, first those whose clean
   * name starts with `text`, then those where every word of `text` starts a word of the name; each part by clean name
   * length, then name. No fuzzy pass: a type-ahead box sees words being typed, and a half-typed word is not a misspelling.
   */
  autocomplete(text: string, gameId: number | undefined, limit: number): string[] {
    if (text.length < 2 || limit <= 0) return []
    const inGame = (e: number) => gameId === undefined || listOf(this.entryGames, e).includes(gameId)
    // Part 1: the names starting with text; entries are numbered in the answer's order, so the `limit` lowest.
    const [from, to] = prefixRun((i) => this.cleanNameOfEntry(this.entriesByCleanName[i]!), this.entriesByCleanName.length, text)
    const first: number[] = []
    for (let i = from; i < to; i++) {
      const e = this.entriesByCleanName[i]!
      if (first.length === limit && e > first[limit - 1]!) continue
      if (!inGame(e)) continue
      let at = first.length
      while (at > 0 && first[at - 1]! > e) at--
      first.splice(at, 0, e)
      if (first.length > limit) first.pop()
    }
    const names = first.map((e) => this.entryNames[e]!)
    if (names.length === limit) return names
    // Part 2: every word of text starts a word of the name, and the name does not start with text (those were part 1).
    const accepts = text
      .split(' ')
      .filter((word) => word.length > 0)
      .map((word) => this.acceptOf(word, EMPTY))
    let driver = 0
    for (let i = 1; i < accepts.length; i++) if (this.entries.estimate(accepts[i]!) < this.entries.estimate(accepts[driver]!)) driver = i
    const candidates = this.entries.of(accepts[driver]!)
    for (let i = 0; i < candidates.length && names.length < limit; i++) {
      const e = candidates[i]!
      if (this.cleanNameOfEntry(e).startsWith(text) || !inGame(e)) continue
      const c = this.entryCleanIds[e]!
      if (accepts.every((accept, j) => j === driver || this.cleanAccepts(c, accept))) names.push(this.entryNames[e]!)
    }
    return names
  }

  private cleanNameOfEntry(e: number): string {
    return this.cleanList[this.entryCleanIds[e]!]!
  }
}
