import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { cleanName } from '../../shared/text'
import { similarity, strictWordSimilarity, wordSimilarity } from '../../shared/trigram'
import { type IndexQuery, type IndexSort, type SearchableCard, SearchIndex } from './search-index'

let nextId = 1
/** A card with defaults: game 1, set 10, 'Cards', 'Common', Normal printing, no price. */
function card(name: string, fields: Partial<SearchableCard> = {}): SearchableCard {
  return {
    id: nextId++,
    name,
    cleanName: cleanName(name),
    gameId: 1,
    setId: 10,
    productType: 'Cards',
    rarity: 'Common',
    printings: ['Normal'],
    marketPrice: null,
    ...fields,
  }
}

const everything = { sort: 'relevance', offset: 0, limit: 1000 } as const
const query = (text: string, fields: Partial<IndexQuery> = {}): IndexQuery => ({ ...everything, text, ...fields })
const idsOf = (cards: SearchableCard[]) => cards.map((c) => c.id)

describe('SearchIndex: word matches', () => {
  const exact = card('Charizard', { id: 500 })
  const exactToo = card('Charizard', { id: 400 })
  const starts = card('Charizard Star', { id: 100 })
  const startsLonger = card('Charizard Star Extra', { id: 50 })
  const contains = card('Dark Charizard', { id: 200 })
  const shortContains = card('X Charizard', { id: 300 })
  const other = card('Blastoise', { id: 600 })
  const index = SearchIndex.build([exact, exactToo, starts, startsLonger, contains, shortContains, other])

  test('tiers: exact names, then names starting with q, then word matches; each by name length, then id', () => {
    expect(index.search(query('charizard'))).toEqual({ ids: idsOf([exactToo, exact, starts, startsLonger, shortContains, contains]), total: 6 })
  })

  test('a prefix of a word, and several words each a prefix of some word (possibly the same)', () => {
    expect(index.search(query('char')).ids).toEqual(idsOf([exactToo, exact, starts, startsLonger, shortContains, contains]))
    expect(index.search(query('ch st'))).toEqual({ ids: idsOf([starts, startsLonger]), total: 2 })
    // No name starts with "c ch cha": all are plain word matches, by length, then id.
    expect(index.search(query('c ch cha'))).toEqual({ ids: idsOf([exactToo, exact, shortContains, starts, contains, startsLonger]), total: 6 })
    expect(index.search(query('dark char')).ids).toEqual(idsOf([contains]))
    // The shortest list ("x": X Charizard) drives, and its card lacks the other word.
    expect(index.search(query('x dark', { sort: 'name' })).total).toBe(0)
    // "harizard" is inside a word, not its start: no word match, and the fuzzy pass finds the look-alikes.
    expect(index.search(query('arizard')).ids).not.toContain(other.id)
  })

  test('a name starting with q beats a shorter name that only contains it (string prefix, not word prefix)', () => {
    const a = card('Charmander Ab')
    const b = card('Ab Char')
    const c = card('Char Abomasnow')
    const d = card('Ab Charm Ab')
    const index = SearchIndex.build([b, c, a, d])
    expect(index.search(query('char')).ids).toEqual(idsOf([a, c, b, d]))
    expect(index.search(query('char ab')).ids).toEqual(idsOf([c, b, d, a]))
  })

  test('paging: offset and limit, an exact total, past the end empty with the total', () => {
    const all = index.search(query('charizard')).ids
    for (let offset = 0; offset <= 7; offset++) {
      for (const limit of [1, 2, 5]) {
        expect(index.search(query('charizard', { offset, limit }))).toEqual({ ids: all.slice(offset, offset + limit), total: 6 })
      }
    }
    expect(index.search(query('charizard', { offset: 600, limit: 20 }))).toEqual({ ids: [], total: 6 })
  })

  test('no match at all', () => {
    expect(index.search(query('qzxj'))).toEqual({ ids: [], total: 0 })
  })
})

describe('SearchIndex: filters', () => {
  const a = card('Golem', { gameId: 1, setId: 1, rarity: 'Rare', printings: ['Normal', 'Holofoil'], marketPrice: 5 })
  const b = card('Golem', { gameId: 2, setId: 2, rarity: 'rare', printings: ['Holofoil'], marketPrice: 10 })
  const c = card('Golem Box', { gameId: 1, setId: 3, productType: 'Sealed Products', printings: [], marketPrice: null })
  const d = card('Golem Deck', { gameId: 1, setId: 1, rarity: 'Rare', printings: ['Foil'], marketPrice: 1 })
  const index = SearchIndex.build([a, b, c, d])

  test('each filter, and together', () => {
    expect(index.search(query('golem', { gameId: 2 })).ids).toEqual([b.id])
    expect(index.search(query('golem', { setId: 1 })).ids).toEqual([a.id, d.id])
    expect(index.search(query('golem', { type: 'Sealed Products' })).ids).toEqual([c.id])
    expect(index.search(query('golem', { rarity: 'Rare' })).ids).toEqual([a.id, d.id])
    expect(index.search(query('golem', { rarity: 'RARE' })).total).toBe(0)
    expect(index.search(query('golem', { printing: 'Holofoil' })).ids).toEqual([a.id, b.id])
    expect(index.search(query('golem', { printing: 'Reverse Holofoil' })).total).toBe(0)
    expect(index.search(query('golem', { type: 'No Such Type' })).total).toBe(0)
    expect(index.search(query('golem', { gameId: 1, rarity: 'Rare', printing: 'Normal' })).ids).toEqual([a.id])
  })

  test('prices are inclusive, on the primary market price; unpriced cards are left out by either bound', () => {
    expect(index.search(query('golem', { minPrice: 5 })).ids).toEqual([a.id, b.id])
    expect(index.search(query('golem', { maxPrice: 5 })).ids).toEqual([a.id, d.id])
    expect(index.search(query('golem', { minPrice: 5, maxPrice: 5 })).ids).toEqual([a.id])
    expect(index.search(query('golem', { minPrice: 0 })).total).toBe(3)
  })
})

describe('SearchIndex: sorts', () => {
  const cards = [
    card('Zed Golem', { id: 1, marketPrice: 3 }),
    card('golem', { id: 2, marketPrice: null }),
    card('Alpha Golem', { id: 3, marketPrice: 3 }),
    card('Beta Golem', { id: 4, marketPrice: 1 }),
    card('Éclair Golem', { id: 5, marketPrice: null }),
    card('alpha Golem', { id: 6, marketPrice: 7.5 }),
  ]
  const index = SearchIndex.build(cards)

  test('price_asc and price_desc: unpriced last, ties by id', () => {
    expect(index.search(query('golem', { sort: 'price_asc' })).ids).toEqual([4, 1, 3, 6, 2, 5])
    expect(index.search(query('golem', { sort: 'price_desc' })).ids).toEqual([6, 1, 3, 4, 2, 5])
  })

  test('name: by display name in code-point order, then id', () => {
    expect(index.search(query('golem', { sort: 'name' })).ids).toEqual([3, 4, 1, 6, 2, 5])
  })

  test('name order is by code point, also past the Basic Multilingual Plane', () => {
    // U+FF21 (fullwidth A) sorts before U+1D538 (a surrogate pair in UTF-16, so `<` alone would put it first).
    const astral = card('A\u{1D538} Golem', { id: 1 })
    const fullwidth = card('A\uFF21 Golem', { id: 2 })
    const plain = card('Golem', { id: 3 })
    const longer = card('Golem X', { id: 4 })
    const found = SearchIndex.build([astral, fullwidth, plain, longer]).search(query('golem', { sort: 'name' }))
    expect(found.ids).toEqual([2, 1, 3, 4])
  })

  test('every sort pages consistently', () => {
    for (const sort of ['relevance', 'price_asc', 'price_desc', 'name'] as const) {
      const all = index.search(query('golem', { sort })).ids
      const paged = [0, 2, 4].flatMap((offset) => index.search(query('golem', { sort, offset, limit: 2 })).ids)
      expect(paged).toEqual(all)
    }
  })
})

describe('SearchIndex: the fuzzy pass', () => {
  const charizard = card('Charizard')
  const charizardEx = card('Charizard EX')
  const chariizard = card('Chariizard Rex', { gameId: 2 })
  const blastoise = card('Blastoise')
  const darkEx = card('Dark EX')
  const index = SearchIndex.build([charizard, charizardEx, chariizard, blastoise, darkEx])

  test('a misspelling finds its corrections, ranked by word similarity, then name length and id', () => {
    const found = index.search(query('charzard'))
    expect(found.total).toBe(3)
    expect(found.ids.slice(0, 2)).toEqual([charizard.id, charizardEx.id])
    expect(new Set(found.ids)).toEqual(new Set([charizard.id, charizardEx.id, chariizard.id]))
    expect(index.search(query('blastoies')).ids).toEqual([blastoise.id])
  })

  test('only when no card matches by words, under the same filters', () => {
    expect(index.search(query('charizard')).ids).toEqual([charizard.id, charizardEx.id])
    expect(index.search(query('charizard', { gameId: 2 })).ids).toEqual([chariizard.id])
  })

  test('fuzzy matches respect the filters', () => {
    expect(index.search(query('charzard', { gameId: 2 })).ids).toEqual([chariizard.id])
    expect(index.search(query('charzard', { gameId: 3 })).total).toBe(0)
  })

  test('several words are corrected word by word: each must be matched', () => {
    // "ex" has the shorter list and drives; Dark EX has no word close to "charzard".
    expect(index.search(query('charzard ex'))).toEqual({ ids: [charizardEx.id], total: 1 })
    expect(index.search(query('charzard ex')).ids).not.toContain(blastoise.id)
    expect(index.search(query('charzard zzzz')).total).toBe(0)
  })

  test('a word has at most 8 corrections: the most similar, ties by word', () => {
    const letters = 'abcdefghij'
    const cards = [...letters].map((letter) => card(`Charizard${letter}`))
    const found = SearchIndex.build(cards).search(query('charizardx'))
    for (const c of cards) expect(similarity(c.cleanName, 'charizardx')).toBe(similarity(cards[0]!.cleanName, 'charizardx'))
    expect(new Set(found.ids)).toEqual(new Set(idsOf(cards.slice(0, 8))))
  })
})

describe('SearchIndex: autocomplete', () => {
  const cards = [
    card('Charizard', { gameId: 1 }),
    card('Charizard', { gameId: 2 }),
    card('Charmander', { gameId: 1 }),
    card('Chair', { gameId: 2 }),
    card('Dark Charizard', { gameId: 1 }),
    card('Ancient Chant', { gameId: 2 }),
    card('CHAIR', { gameId: 1 }),
    card('Blastoise', { gameId: 1 }),
  ]
  const index = SearchIndex.build(cards)

  test('names starting with the text first, then word matches; each by clean name length, then name; distinct', () => {
    expect(index.autocomplete('cha', undefined, 20)).toEqual(['CHAIR', 'Chair', 'Charizard', 'Charmander', 'Ancient Chant', 'Dark Charizard'])
    expect(index.autocomplete('char', undefined, 20)).toEqual(['Charizard', 'Charmander', 'Dark Charizard'])
    expect(index.autocomplete('dark ch', undefined, 20)).toEqual(['Dark Charizard'])
    expect(index.autocomplete('ch dar', undefined, 20)).toEqual(['Dark Charizard'])
  })

  test('limit and game', () => {
    expect(index.autocomplete('cha', undefined, 3)).toEqual(['CHAIR', 'Chair', 'Charizard'])
    expect(index.autocomplete('cha', undefined, 5)).toEqual(['CHAIR', 'Chair', 'Charizard', 'Charmander', 'Ancient Chant'])
    expect(index.autocomplete('cha', 2, 20)).toEqual(['Chair', 'Charizard', 'Ancient Chant'])
    expect(index.autocomplete('cha', 3, 20)).toEqual([])
  })

  test('no fuzzy pass, and nothing under 2 characters', () => {
    expect(index.autocomplete('charzard', undefined, 20)).toEqual([])
    expect(index.autocomplete('c', undefined, 20)).toEqual([])
  })
})

describe('SearchIndex: size', () => {
  test('bytes and words are reported', () => {
    const index = SearchIndex.build([card('Charizard EX'), card('Dark Charizard')])
    expect(index.words).toBe(3)
    expect(index.bytes).toBeGreaterThan(0)
    expect(SearchIndex.build([]).search(query('ab'))).toEqual({ ids: [], total: 0 })
    expect(SearchIndex.build([]).autocomplete('ab', undefined, 20)).toEqual([])
  })
})

// The reference: the rules written plainly, every card checked and the whole list sorted.

const byCodePoint = (a: string, b: string) => {
  const [x, y] = [[...a].map((c) => c.codePointAt(0)!), [...b].map((c) => c.codePointAt(0)!)]
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! - y[i]!
  return x.length - y.length
}
const wordsOfName = (c: SearchableCard) => c.cleanName.split(' ').filter((w) => w.length > 0)
const length = (s: string) => [...s].length

function referenceSearch(cards: readonly SearchableCard[], q: IndexQuery): { ids: number[]; total: number } {
  const words = q.text.split(' ')
  const passes = (c: SearchableCard) =>
    (q.gameId === undefined || c.gameId === q.gameId) &&
    (q.setId === undefined || c.setId === q.setId) &&
    (q.type === undefined || c.productType === q.type) &&
    (q.rarity === undefined || c.rarity === q.rarity) &&
    (q.printing === undefined || c.printings.includes(q.printing)) &&
    (q.minPrice === undefined || (c.marketPrice !== null && c.marketPrice >= q.minPrice)) &&
    (q.maxPrice === undefined || (c.marketPrice !== null && c.marketPrice <= q.maxPrice))
  let matches = cards.filter((c) => passes(c) && words.every((p) => wordsOfName(c).some((w) => w.startsWith(p))))
  let relevance: (a: SearchableCard, b: SearchableCard) => number
  if (matches.length > 0) {
    const tier = (c: SearchableCard) => (c.cleanName === q.text ? 0 : c.cleanName.startsWith(q.text) ? 1 : 2)
    relevance = (a, b) => tier(a) - tier(b) || length(a.cleanName) - length(b.cleanName) || a.id - b.id
  } else {
    const dictionary = [...new Set(cards.flatMap(wordsOfName))]
    const corrections = (p: string) =>
      dictionary
        .map((w) => ({ w, s: similarity(w, p) }))
        .filter(({ s }) => s >= 0.3)
        .sort((a, b) => b.s - a.s || byCodePoint(a.w, b.w))
        .slice(0, 8)
        .map(({ w }) => w)
    const fixes = words.map(corrections)
    matches = cards.filter((c) => passes(c) && words.every((p, i) => wordsOfName(c).some((w) => w.startsWith(p) || fixes[i]!.includes(w))))
    const scores = new Map(matches.map((c) => [c.id, words.length > 1 ? strictWordSimilarity(q.text, c.cleanName) : wordSimilarity(q.text, c.cleanName)]))
    const score = (c: SearchableCard) => scores.get(c.id)!
    relevance = (a, b) => score(b) - score(a) || length(a.cleanName) - length(b.cleanName) || a.id - b.id
  }
  const byPrice = (direction: 1 | -1) => (a: SearchableCard, b: SearchableCard) => {
    if (a.marketPrice === null || b.marketPrice === null) return a.marketPrice === b.marketPrice ? a.id - b.id : a.marketPrice === null ? 1 : -1
    return direction * (a.marketPrice - b.marketPrice) || a.id - b.id
  }
  const orders: Record<IndexSort, (a: SearchableCard, b: SearchableCard) => number> = {
    relevance,
    price_asc: byPrice(1),
    price_desc: byPrice(-1),
    name: (a, b) => byCodePoint(a.name, b.name) || a.id - b.id,
  }
  const sorted = [...matches].sort(orders[q.sort])
  return { ids: sorted.slice(q.offset, q.offset + q.limit).map((c) => c.id), total: matches.length }
}

function referenceAutocomplete(cards: readonly SearchableCard[], text: string, gameId: number | undefined, limit: number): string[] {
  if (text.length < 2) return []
  const inGame = cards.filter((c) => gameId === undefined || c.gameId === gameId)
  const words = text.split(' ')
  const order = (a: SearchableCard, b: SearchableCard) => length(a.cleanName) - length(b.cleanName) || byCodePoint(a.name, b.name)
  const first = inGame.filter((c) => c.cleanName.startsWith(text)).sort(order)
  const second = inGame.filter((c) => !c.cleanName.startsWith(text) && words.every((p) => wordsOfName(c).some((w) => w.startsWith(p)))).sort(order)
  return [...new Set([...first, ...second].map((c) => c.name))].slice(0, limit)
}

describe('SearchIndex: equals the rules written plainly', () => {
  // Words from a small alphabet, so prefixes, shared words, misspellings and ties happen.
  const word = fc.oneof(
    fc.constantFrom('char', 'charizard', 'charzard', 'chariizard', 'dark', 'star', 'ab', 'aba', 'abba', 'ex', 'pokémon', 'ß', 'ninetales', 'nine'),
    fc.stringMatching(/^[abcr]{1,6}$/),
  )
  const separator = fc.constantFrom(' ', ', ', '-', ' & ')
  const name = fc
    .tuple(fc.array(word, { minLength: 1, maxLength: 4 }), separator, fc.boolean())
    .map(([words, sep, capital]) => words.map((w) => (capital ? w[0]!.toUpperCase() + w.slice(1) : w)).join(sep))
  const catalog = fc.uniqueArray(
    fc.record({
      id: fc.integer({ min: 1, max: 10_000 }),
      name,
      gameId: fc.integer({ min: 1, max: 3 }),
      setId: fc.integer({ min: 1, max: 3 }),
      productType: fc.constantFrom('Cards', 'Sealed Products'),
      rarity: fc.constantFrom('Common', 'Rare', 'rare'),
      printings: fc.subarray(['Normal', 'Holofoil', 'Foil']),
      marketPrice: fc.option(fc.constantFrom(0.5, 1, 2, 2, 10), { nil: null }),
    }),
    { selector: (c) => c.id, minLength: 0, maxLength: 40 },
  )
  const text = fc
    .array(
      fc.oneof(
        word.map((w) => cleanName(w)),
        word.chain((w) => fc.integer({ min: 1, max: Math.max(1, cleanName(w).length) }).map((n) => cleanName(w).slice(0, n))),
      ),
      { minLength: 1, maxLength: 3 },
    )
    .map((words) => words.filter((w) => w.length > 0).join(' '))
    .filter((t) => t.length > 0)
  const shape = fc.record(
    {
      gameId: fc.integer({ min: 1, max: 3 }),
      type: fc.constantFrom('Cards', 'Sealed Products'),
      setId: fc.integer({ min: 1, max: 3 }),
      rarity: fc.constantFrom('Common', 'Rare'),
      printing: fc.constantFrom('Normal', 'Holofoil', 'Foil', 'Unlimited'),
      minPrice: fc.constantFrom(0, 1, 2),
      maxPrice: fc.constantFrom(1, 2, 10),
    },
    { requiredKeys: [] },
  )
  const paging = fc.record({
    sort: fc.constantFrom('relevance', 'price_asc', 'price_desc', 'name') as fc.Arbitrary<IndexSort>,
    offset: fc.integer({ min: 0, max: 12 }),
    limit: fc.integer({ min: 1, max: 12 }),
  })

  test('search', () => {
    fc.assert(
      fc.property(catalog, fc.array(fc.tuple(text, shape, paging), { minLength: 1, maxLength: 8 }), (raw, queries) => {
        const cards = raw.map((c) => ({ ...c, cleanName: cleanName(c.name) }))
        const index = SearchIndex.build(cards)
        for (const [t, filters, page] of queries) {
          const q: IndexQuery = { text: t, ...filters, ...page }
          expect({ q, found: index.search(q) }).toEqual({ q, found: referenceSearch(cards, q) })
        }
      }),
      { numRuns: 150 },
    )
  })

  test('autocomplete', () => {
    fc.assert(
      fc.property(
        catalog,
        fc.array(fc.tuple(text, fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }), fc.integer({ min: 1, max: 20 })), { minLength: 1, maxLength: 8 }),
        (raw, asks) => {
          const cards = raw.map((c) => ({ ...c, cleanName: cleanName(c.name) }))
          const index = SearchIndex.build(cards)
          for (const [t, game, limit] of asks) {
            expect({ t, game, limit, names: index.autocomplete(t, game, limit) }).toEqual({ t, game, limit, names: referenceAutocomplete(cards, t, game, limit) })
          }
        },
      ),
      { numRuns: 150 },
    )
  })
})

describe('SearchIndex: large lists (every page strategy)', () => {
  // Thousands of cards over few words: 2-letter lists of thousands, starts-with sets above the sort-outright size, pages
  // deep enough for a full sort of ranks, and dense matches that walk the whole order.
  let seed = 7
  const random = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31
    return seed % n
  }
  const vocabulary = ['charizard', 'charmander', 'chandelure', 'dark', 'dragon', 'drake', 'star', 'storm', 'ex', 'abra', 'alakazam', 'ninetales']
  const cards = Array.from({ length: 6000 }, (_, i) =>
    card(Array.from({ length: 1 + random(3) }, () => vocabulary[random(vocabulary.length)]!).join(i % 7 === 0 ? ' - ' : ' '), {
      id: 100_000 - i * 3,
      gameId: 1 + random(3),
      setId: 1 + random(20),
      rarity: ['Common', 'Rare'][random(2)]!,
      printings: random(4) === 0 ? ['Holofoil'] : ['Normal'],
      marketPrice: random(5) === 0 ? null : random(200) / 4,
    }),
  )
  const index = SearchIndex.build(cards)

  test('equals the plain rules', () => {
    const texts = ['ch', 'char', 'charizard', 'dark ch', 'd', 'dr dr', 'st ex', 'charzard', 'dragn stor', 'ninetails']
    for (const text of texts) {
      for (const filters of [{}, { gameId: 2 }, { rarity: 'Rare', printing: 'Holofoil' }, { minPrice: 10, maxPrice: 20 }]) {
        for (const sort of ['relevance', 'price_asc', 'price_desc', 'name'] as const) {
          const all = referenceSearch(cards, query(text, { ...filters, sort, limit: 10_000 }))
          for (const [offset, limit] of [
            [0, 20],
            [980, 20],
            [2500, 100],
            [0, 3000],
            [all.total - 5, 20],
          ] as const) {
            const q = query(text, { ...filters, sort, offset: Math.max(0, offset), limit })
            expect({ q, found: index.search(q) }).toEqual({ q, found: { ids: all.ids.slice(q.offset, q.offset + limit), total: all.total } })
          }
        }
      }
    }
  })

  test('autocomplete', () => {
    for (const text of ['ch', 'char', 'dark ch', 'st', 'ex', 'ninetales', 'zz'])
      for (const game of [undefined, 1, 3])
        for (const limit of [1, 5, 20])
          expect({ text, game, limit, names: index.autocomplete(text, game, limit) }).toEqual({ text, game, limit, names: referenceAutocomplete(cards, text, game, limit) })
  })
})

describe('SearchIndex: state kept between calls', () => {
  test('cached prefix unions are evicted by size and answers stay the same', () => {
    // Words sharing 4-letter prefixes: each query "abcX" is a union over two words, cached; a few unions fill the cache.
    const letters = 'defghijk'
    const cards = Array.from({ length: 4 }, (_, i) => card([...letters].flatMap((l) => [`abc${l}a`, `abc${l}b`]).join(' '), { id: i + 1 }))
    const index = SearchIndex.build(cards)
    for (let round = 0; round < 3; round++) {
      for (const l of letters) {
        const q = query(`abc${l}`, { limit: 2, offset: round % 2 })
        expect(index.search(q)).toEqual(referenceSearch(cards, q))
      }
    }
  })

  test('the per-call stamps wrap around without stale marks', () => {
    const cards = [card('Dark Charizard'), card('Charizard'), card('Charizard Star'), card('Dragonite')]
    const index = SearchIndex.build(cards)
    const state = index as unknown as { stamp: number; cleanStamp: number }
    for (const text of ['charizard', 'charzard', 'dark']) {
      for (const sort of ['relevance', 'price_asc'] as const) {
        state.stamp = 0xfffffffe
        state.cleanStamp = 0xfffffffe
        for (let i = 0; i < 3; i++) expect(index.search(query(text, { sort }))).toEqual(referenceSearch(cards, query(text, { sort })))
      }
    }
  })
})
