import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import fc from 'fast-check'
import { freshDatabase, selectRows } from '../../test/helpers/db'
import {
  similarity,
  similarityFromCounts,
  similarityOfTrigrams,
  strictWordSimilarity,
  strictWordSimilarityTo,
  trigramKeysOf,
  trigramsOf,
  wordSimilarity,
  wordSimilarityTo,
} from './trigram'

// The oracle is pg_trgm itself: every pair is scored by PostgreSQL and by the TypeScript, in one
// statement per batch (PGlite, in a C.UTF-8 locale, gives the same answers as PostgreSQL).

const { db } = await freshDatabase('empty')

interface Scored {
  trigrams: string[]
  similarity: number
  wordSimilarity: number
  strictWordSimilarity: number
}

/** PostgreSQL's answers for each pair [a, b], in order; float4 values cast to float8 so they reach JavaScript exactly. */
async function scoredByPostgres(pairs: readonly (readonly [string, string])[]): Promise<Scored[]> {
  const rows = await selectRows<{ t: string[]; s: number; w: number; sw: number }>(
    db,
    sql`select to_json(show_trgm(e.pair->>0)) as t, similarity(e.pair->>0, e.pair->>1)::float8 as s,
          word_similarity(e.pair->>0, e.pair->>1)::float8 as w, strict_word_similarity(e.pair->>0, e.pair->>1)::float8 as sw
        from jsonb_array_elements(${JSON.stringify(pairs)}::jsonb) with ordinality as e(pair, i) order by e.i`,
  )
  return rows.map((row) => ({ trigrams: row.t, similarity: Number(row.s), wordSimilarity: Number(row.w), strictWordSimilarity: Number(row.sw) }))
}

// pg_trgm stores a trigram of more than 3 bytes as 3 bytes of its legacy CRC-32 (pg_crc.h: the
// reflected table driven MSB-first), and show_trgm prints those as `0x%06x` unless all three
// bytes are ASCII letters, digits or spaces. The test maps our string trigrams the same way to
// compare with show_trgm; the library itself compares the characters (see trigram.ts).
const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
  return c >>> 0
})
const encoder = new TextEncoder()
const printable = (byte: number) => byte === 32 || (byte >= 48 && byte <= 57) || (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122)

function asShownByPostgres(trigram: string): string {
  const bytes = encoder.encode(trigram)
  if (bytes.length === 3) return trigram
  let crc = 0xffffffff
  for (const byte of bytes) crc = (CRC_TABLE[((crc >>> 24) ^ byte) & 0xff]! ^ (crc << 8)) >>> 0
  crc = (crc ^ 0xffffffff) >>> 0
  // The first three bytes of the little-endian word.
  const kept = [crc & 0xff, (crc >>> 8) & 0xff, (crc >>> 16) & 0xff]
  if (kept.every(printable)) return String.fromCharCode(...kept)
  return `0x${((kept[0]! << 16) | (kept[1]! << 8) | kept[2]!).toString(16).padStart(6, '0')}`
}

const sortedAsPostgres = (trigrams: readonly string[]) => trigrams.map(asShownByPostgres).sort()

/** Compares every pair with PostgreSQL; returns the pairs that differ, with both answers. */
async function differences(pairs: readonly (readonly [string, string])[]) {
  const expected = await scoredByPostgres(pairs)
  const found: unknown[] = []
  pairs.forEach(([a, b], index) => {
    const pg = expected[index]!
    const ours: Scored = {
      trigrams: sortedAsPostgres(trigramsOf(a)),
      similarity: similarity(a, b),
      wordSimilarity: wordSimilarity(a, b),
      strictWordSimilarity: strictWordSimilarity(a, b),
    }
    const theirs = { ...pg, trigrams: [...pg.trigrams].sort() }
    const prepared = {
      similarity: similarityOfTrigrams(trigramKeysOf(a), trigramKeysOf(b)),
      similarityOfStrings: similarityOfTrigrams(trigramsOf(a), trigramsOf(b)),
      wordSimilarity: wordSimilarityTo(a)(b),
      strictWordSimilarity: strictWordSimilarityTo(a)(b),
    }
    const same =
      Bun.deepEquals(ours, theirs) &&
      prepared.similarity === pg.similarity &&
      prepared.similarityOfStrings === pg.similarity &&
      prepared.wordSimilarity === pg.wordSimilarity &&
      prepared.strictWordSimilarity === pg.strictWordSimilarity
    if (!same) found.push({ a, b, postgres: theirs, typescript: ours, prepared })
  })
  return found
}

describe('trigramsOf', () => {
  test('pads each word with two spaces before and one after, lowercases, and sorts the unique trigrams', () => {
    expect(trigramsOf('cat')).toEqual(['  c', ' ca', 'at ', 'cat'])
    expect(trigramsOf('Cat, cat!')).toEqual(['  c', ' ca', 'at ', 'cat'])
    expect(trigramsOf('a')).toEqual(['  a', ' a '])
    expect(trigramsOf('')).toEqual([])
    expect(trigramsOf(' -- ')).toEqual([])
  })

  test('counts characters, not UTF-16 units', () => {
    expect(trigramsOf('𠀀')).toEqual(['  𠀀', ' 𠀀 '])
    expect(trigramsOf('ΣΟ-ｶ')).toEqual(['  σ', '  ｶ', ' σο', ' ｶ ', 'σο '])
  })
})

describe('similarity functions', () => {
  test('charzard corrects to charizard as in PostgreSQL', () => {
    expect(similarity('charzard', 'charizard')).toBe(Math.fround(7 / 12))
    expect(wordSimilarity('charzard', 'pokemon charizard ex')).toBe(Math.fround(7 / 12))
    expect(similarityFromCounts(7, 9, 10)).toBe(Math.fround(7 / 12))
    expect(similarityFromCounts(0, 0, 3)).toBe(0)
  })

  test('hand-picked cases equal pg_trgm', async () => {
    const pairs: [string, string][] = [
      ['charzard', 'charizard'],
      ['charzard', 'pokemon charizard ex'],
      ['charzard ex', 'pokemon charizard ex'],
      ['', ''],
      ['', 'pikachu'],
      ['pikachu', ''],
      ['a', 'a'],
      ['a', 'b a c'],
      ['x y z', 'x'],
      ['pika pika', 'pikachu pikachu pika'],
      ['dark dark dark', 'dark magician'],
      ['pokemon trainer zoe', 'zoe'],
      ['the mind sculptor jace', 'jace the mind sculptor'],
      ['onion', 'onion onion'],
      ['sksypire', 'skyspire skyspire of the deep'],
      ['monofang', 'mono fang monofang'],
      ['ab', 'aba bab abab'],
      // The lower end moves only on a strictly better ratio: moving on ties gives 0.2 here, not 0.2105263.
      ['cr zr', 'zcbzzr bbr czcbcr bccc'],
      ['cz a baaz caz', 'ccab baaab abarba'],
      ['Charizard EX', 'pokémon: charizard-ex'],
      ['straße', 'die strasse'],
      ['ΣΟΦΙΑ', 'σοφια σοφία'],
      ['ポケモン', 'ポケモン カード'],
      ['𠀀𠀁', 'x 𠀀𠀁𠀂'],
      ['æther', 'aether vial æther'],
      ['İstanbul', 'istanbul'],
    ]
    expect(await differences(pairs)).toEqual([])
  })
})

// Clean-name-like words (cleanName's output: lowercase letters and digits of any script, single
// spaces). A small alphabet makes pairs share trigrams often, so the word similarities are rarely 0.
const ASCII_FEW = ['a', 'b', 'c', 'r', 'z', '1']
const UNICODE_FEW = ['ß', 'ø', 'λ', 'ж', 'ポ', 'ン', '日', '𠀀', '٣']
const ASCII_ALL = 'abcdefghijklmnopqrstuvwxyz0123456789'.split('')
const UNICODE_ALL = [...UNICODE_FEW, 'æ', 'ω', 'ς', 'и', 'ケ', 'モ', '本', 'ı', 'ŀ', 'ǆ', 'ꙮ', 'ا', '한', '𝔘']

const wordOver = (alphabet: string[]) => fc.array(fc.constantFrom(...alphabet), { minLength: 1, maxLength: 7 }).map((chars) => chars.join(''))
const nameOver = (alphabet: string[]) => fc.array(wordOver(alphabet), { minLength: 1, maxLength: 4 }).map((words) => words.join(' '))

/** q mistyped from a word of the name, or unrelated: the shapes search sees. */
const pairOver = (alphabet: string[]) =>
  fc.oneof(
    fc.tuple(nameOver(alphabet), nameOver(alphabet)),
    fc.tuple(nameOver(alphabet), fc.nat(), fc.nat(), fc.constantFrom(...alphabet)).map(([name, pick, at, char]): [string, string] => {
      const words = name.split(' ')
      const chars = Array.from(words[pick % words.length]!)
      const position = at % (chars.length + 1)
      return [[...chars.slice(0, position), char, ...chars.slice(position + 1)].join(''), name]
    }),
  )

describe('against pg_trgm on random clean names', () => {
  const runs = (alphabet: string[]) =>
    fc.assert(
      fc.asyncProperty(fc.array(pairOver(alphabet), { minLength: 200, maxLength: 300 }), async (pairs) => {
        expect(await differences(pairs)).toEqual([])
      }),
      { numRuns: 8 },
    )

  test('few ASCII characters', () => runs(ASCII_FEW))
  test('all ASCII letters and digits', () => runs(ASCII_ALL))
  test('few characters with other scripts', () => runs([...ASCII_FEW, ...UNICODE_FEW]))
  test('many characters with other scripts', () => runs([...ASCII_ALL, ...UNICODE_ALL]))

  test('messy text: case, punctuation, runs of spaces', () =>
    fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.tuple(
            fc.string({ unit: fc.constantFrom('a', 'B', 'c', 'Z', '1', ' ', '-', '!', ' ', 'Σ', 'ß', 'Ø', 'İ', 'ǅ', '½', '²'), maxLength: 16 }),
            fc.string({ unit: fc.constantFrom('a', 'b', 'c', 'z', '1', ' ', '.', 'σ', 'ς', 'ø', 'ǆ'), maxLength: 24 }),
          ),
          { minLength: 100, maxLength: 200 },
        ),
        async (pairs) => {
          expect(await differences(pairs)).toEqual([])
        },
      ),
      { numRuns: 5 },
    ))
})
