import { describe, expect, test } from 'bun:test'
import { type SQL, sql } from 'drizzle-orm'
import { PRIMARY_PRINTING_FIRST, selectRows } from '../../../test/helpers/db'
import { seededCatalogServer } from '../../../test/helpers/server'
import { cleanName } from '../../shared/text'

const { database, server, proKey, freeKey } = await seededCatalogServer()

const get = (path: string, key: string | null = proKey) => server.json(path, key ?? undefined)
const search = (params: Record<string, string | number>, key?: string | null) =>
  get(`/v1/search?${new URLSearchParams(Object.entries(params).map(([k, v]): [string, string] => [k, String(v)]))}`, key)
const rows = <T>(query: SQL) => selectRows<T>(database.db, query)
const idList = (ids: number[]) =>
  sql.join(
    ids.map((id) => sql`${id}`),
    sql`, `,
  )

/** Every match of a search, page by page (100 a page), checking that meta adds up. */
async function everyMatch(params: Record<string, string | number>): Promise<any[]> {
  const found: any[] = []
  for (let page = 1; ; page++) {
    const { status, body } = await search({ ...params, per_page: 100, page })
    expect(status).toBe(200)
    found.push(...body.data)
    if (!body.meta.has_more) {
      expect(body.meta.total).toBe(found.length)
      return found
    }
  }
}

/** The card as stored, and its primary printing's price computed independently (docs/adr/0011-primary-printing.md). */
type StoredCard = {
  id: number
  name: string
  clean_name: string
  rarity: string
  product_type: string
  marketplace_id: number
  set_id: number
  set_name: string
  set_slug: string
  game_slug: string
  game_name: string
  printing: string | null
  market_price: number | null
}
async function storedCards(ids: number[]): Promise<Map<number, StoredCard>> {
  if (ids.length === 0) return new Map()
  const found = await rows<StoredCard>(sql`
    select c.id, c.name, c.clean_name, c.rarity, c.product_type, c.marketplace_id, c.set_id, s.name as set_name, s.slug as set_slug,
      g.slug as game_slug, g.name as game_name, p.printing, p.market_price
    from cards c join sets s on s.id = c.set_id join games g on g.id = c.game_id
    left join lateral (
      select cp.printing, cp.market_price from card_prices cp where cp.card_id = c.id
      order by ${PRIMARY_PRINTING_FIRST}
      limit 1) p on true
    where c.id in (${idList(ids)})`)
  return new Map(found.map((card) => [card.id, card]))
}

/** Every word of q starts a word of the name: a word match (else, a fuzzy one). */
const matchesByWords = (cleanName: string, q: string) => {
  const words = cleanName.split(' ')
  return q.split(' ').every((part) => words.some((word) => word.startsWith(part)))
}
/** The relevance tiers the API promises: exact name, name starting with q, word match, fuzzy match. */
function tierOf(cleanName: string, q: string): number {
  if (cleanName === q) return 0
  if (cleanName.startsWith(q)) return 1
  return matchesByWords(cleanName, q) ? 2 : 3
}

// Facts read straight from the database, to search for and compare against.
const [famous] = await rows<{ id: number; name: string; clean_name: string }>(sql`
  select c.id, c.name, c.clean_name from cards c join games g on g.id = c.game_id
  where g.slug = 'pokemon' and c.clean_name ~ '^[a-z]{8,}$' order by c.id limit 1`)
const [twoWords] = await rows<{ id: number; name: string; clean_name: string }>(sql`
  select c.id, c.name, c.clean_name from cards c join games g on g.id = c.game_id
  where g.slug = 'pokemon' and c.clean_name ~ '^[a-z]{4,} [a-z]{4,}$' order by c.id limit 1`)
const [accented] = await rows<{ id: number; name: string; clean_name: string }>(sql`
  select id, name, clean_name from cards where name ~ '[éëáñÉ]' order by id limit 1`)
/** A name several cards share: ties among exact matches go by id. */
const [shared] = await rows<{ clean_name: string; name: string }>(sql`
  select clean_name, min(name) as name from cards where product_type = 'Cards' and clean_name like '% %'
  group by clean_name having count(*) > 1
  order by count(*) desc, clean_name limit 1`)
/** A word spread over many cards of many games, sets, rarities and prices. */
const [common] = await rows<{ word: string }>(sql`
  select w as word from cards c, unnest(string_to_array(c.clean_name, ' ')) w
  where c.product_type = 'Cards' and length(w) >= 5 group by w order by count(distinct c.game_id) desc, w limit 1`)
/** A word found in both cards and sealed products. */
const [bothTypes] = await rows<{ word: string }>(sql`
  select w as word from cards c, unnest(string_to_array(c.clean_name, ' ')) w
  where length(w) >= 4 group by w having count(distinct c.product_type) = 2 order by count(*) desc, w limit 1`)

/**
 * Cards added to the seeded catalog (copies of real rows under new names) so the relevance tiers
 * have something to order: "<Name> Star" starts with the name, "Dark <Name>" contains it, and
 * "<Naame> Rex" (a doubled letter) in another game only resembles it.
 */
const famousWord = famous!.clean_name
const middle = Math.floor(famousWord.length / 2)
const addCard = async (copyOf: number, name: string) => {
  const [added] = await rows<{ id: number; game_id: number }>(sql`
    insert into cards (set_id, game_id, marketplace_id, name, clean_name, number, rarity, image_url, marketplace_url, product_type,
      foil_only, total_listings, shipping_category_id, product_status_id, hp, custom_attributes, updated_at)
    select set_id, game_id, (select max(marketplace_id) + 1 from cards), ${name}, ${cleanName(name)}, number, rarity, image_url,
      marketplace_url, product_type, foil_only, total_listings, shipping_category_id, product_status_id, hp, custom_attributes, updated_at
    from cards where id = ${copyOf} returning id, game_id`)
  return added!.id
}
const [elsewhere] = await rows<{ id: number; slug: string }>(sql`
  select c.id, g.slug from cards c join games g on g.id = c.game_id
  where c.game_id <> (select game_id from cards where id = ${famous!.id}) order by c.id limit 1`)
const starred = await addCard(famous!.id, `${famous!.name} Star`)
const dark = await addCard(famous!.id, `Dark ${famous!.name}`)
const lookalikeName = `${famous!.name.slice(0, middle + 1)}${famous!.name.slice(middle)} Rex` // "Chariizard Rex"
const lookalike = await addCard(elsewhere!.id, lookalikeName)
// As a sync does: the new snapshot, whose search index holds the new names and their words, is built before the searches.
await server.refreshSnapshot()

describe('GET /v1/search: matching', () => {
  test('the fixtures exist', () => {
    for (const fact of [famous, twoWords, accented, shared, common, bothTypes, elsewhere]) expect(fact).toBeDefined()
  })

  test('an exact name ranks first, then names starting with it, then names containing it; ids and fields are the stored cards', async () => {
    const { status, body } = await search({ q: famous!.name })
    expect(status).toBe(200)
    expect(body.data.map((c: any) => c.id)).toEqual([famous!.id, starred, dark])
    expect(body.data[0]).toMatchObject({ id: famous!.id, name: famous!.name, clean_name: famous!.clean_name })
    expect(Object.keys(body.data[0]).sort()).toEqual(
      [
        'foil_only',
        'game_name',
        'game_slug',
        'id',
        'image_url',
        'low_price',
        'lowest_with_shipping',
        'market_price',
        'marketplace_id',
        'median_price',
        'name',
        'number',
        'clean_name',
        'price_updated_at',
        'printing',
        'product_type',
        'rarity',
        'set_name',
        'set_slug',
        'total_listings',
      ].sort(),
    )
    // The lookalike is fuzzy only: not shown while cards match by words.
    expect(body.data.map((c: any) => c.id)).not.toContain(lookalike)

    // Several cards share this name: all of them, in id order.
    const exact = await rows<{ id: number }>(sql`select id from cards where clean_name = ${shared!.clean_name} order by id`)
    const all = await everyMatch({ q: shared!.name })
    expect(all.slice(0, exact.length).map((c) => c.id)).toEqual(exact.map((row) => row.id))
    expect(all.slice(exact.length).every((c) => c.clean_name !== shared!.clean_name)).toBe(true)

    const stored = await storedCards([...all, ...body.data].map((c) => c.id))
    for (const card of [...all, ...body.data]) {
      const expected = stored.get(card.id)!
      expect(expected).toBeDefined()
      expect({
        id: card.id,
        name: card.name,
        clean_name: card.clean_name,
        rarity: card.rarity,
        product_type: card.product_type,
        marketplace_id: card.marketplace_id,
        set_name: card.set_name,
        game_name: card.game_name,
        set_slug: card.set_slug,
        game_slug: card.game_slug,
        printing: card.printing,
        market_price: card.market_price,
      }).toEqual({
        id: expected.id,
        name: expected.name,
        clean_name: expected.clean_name,
        rarity: expected.rarity,
        product_type: expected.product_type,
        marketplace_id: expected.marketplace_id,
        set_name: expected.set_name,
        game_name: expected.game_name,
        set_slug: expected.set_slug,
        game_slug: expected.game_slug,
        printing: expected.printing,
        market_price: expected.market_price,
      })
    }
  })

  test('a misspelt name still finds the card first', async () => {
    const dropped = famousWord.slice(0, middle) + famousWord.slice(middle + 1) // "charizard" → "charzard"
    const swapped = famousWord.slice(0, middle) + famousWord[middle + 1] + famousWord[middle] + famousWord.slice(middle + 2) // → "charziard"
    const early = famousWord.slice(0, 2) + famousWord[3] + famousWord[2] + famousWord.slice(4) // → "chraizard"
    for (const q of [dropped, swapped, early, `${famousWord.slice(0, middle)}${famousWord.slice(middle + 1)} star`]) {
      expect(matchesByWords(famousWord, q)).toBe(false)
      const { status, body } = await search({ q })
      expect({ q, status, first: body.data[0]?.id }).toEqual({ q, status: 200, first: q.endsWith(' star') ? starred : famous!.id })
      const ids = body.data.map((c: any) => c.id)
      if (!q.endsWith(' star')) expect(ids).toEqual(expect.arrayContaining([famous!.id, starred, dark, lookalike]))
    }
    // A misspelt part of a longer name.
    const [first, second] = twoWords!.clean_name.split(' ') as [string, string]
    const partial = first.slice(0, 3) + first.slice(4)
    const { body } = await search({ q: partial })
    expect(body.data.map((c: any) => c.id)).toContain(twoWords!.id)
    const { body: both } = await search({ q: `${partial} ${second}` })
    expect(both.data[0]?.clean_name).toBe(twoWords!.clean_name)
    // Several words are compared word by word: sharing only the correctly spelt word is not enough.
    expect(both.data.every((c: any) => c.clean_name.split(' ').some((w: string) => w.startsWith(first.slice(0, 3))))).toBe(true)
    const sharingSecond = await rows<{ n: number }>(
      sql`select count(*)::int as n from cards where clean_name like ${`% ${second}`} and clean_name not like ${`${first.slice(0, 3)}%`}`,
    )
    expect(sharingSecond[0]!.n).toBeGreaterThan(0)
  })

  test('fuzzy matches are shown only when no card matches by words, under the same filters', async () => {
    const plain = await everyMatch({ q: famousWord })
    expect(plain.every((c) => matchesByWords(c.clean_name, famousWord))).toBe(true)
    // In the lookalike's game nothing matches by words, so the resemblance shows.
    const there = await everyMatch({ q: famousWord, game: elsewhere!.slug })
    expect(there.map((c) => c.id)).toEqual([lookalike])
  })

  test('a prefix finds the card; so does a whole word plus the prefix of the next', async () => {
    const prefix = famousWord.slice(0, 4)
    const found = await everyMatch({ q: prefix })
    expect(found.map((c) => c.id)).toEqual(expect.arrayContaining([famous!.id, starred, dark]))
    expect(found.every((c) => matchesByWords(c.clean_name, prefix))).toBe(true)
    // Names starting with the prefix come before the rest.
    const starts = found.map((c) => c.clean_name.startsWith(prefix))
    expect(starts).toEqual([...starts].sort((a, b) => Number(b) - Number(a)))

    const [first, second] = twoWords!.clean_name.split(' ')
    const { body } = await search({ q: `${first} ${second!.slice(0, 2)}` })
    expect(body.data.map((c: any) => c.id)).toContain(twoWords!.id)
    expect(body.data[0].clean_name.startsWith(`${first} ${second!.slice(0, 2)}`)).toBe(true)
  })

  test('case and accents do not matter', async () => {
    // A prefix, plain, uppercase or accented, finds the same cards in the same order.
    const prefix = famousWord.slice(0, 4)
    const plain = (await everyMatch({ q: prefix })).map((c) => c.id)
    expect(plain).toContain(famous!.id)
    for (const q of [prefix.toUpperCase(), prefix.replace(/[aeiou]/, (vowel) => `${vowel}\u0301`).normalize('NFC'), `${prefix[0]!.toUpperCase()}${prefix.slice(1)}!`]) {
      expect({ q, ids: (await everyMatch({ q })).map((c) => c.id) }).toEqual({ q, ids: plain })
    }
    const stripped = accented!.name.normalize('NFD').replace(/\p{Diacritic}/gu, '')
    for (const q of [accented!.name.toUpperCase(), stripped, stripped.toLowerCase(), accented!.name.normalize('NFD')]) {
      const { body } = await search({ q })
      expect({ q, first: body.data[0]?.clean_name }).toEqual({ q, first: accented!.clean_name })
      expect(body.data.map((c: any) => c.id)).toContain(accented!.id)
    }
    // An accent the stored name does not have.
    const accents: Record<string, string> = { a: 'á', e: 'é', i: 'ï', o: 'ö', u: 'ú' }
    const withAccent = famous!.name.replace(/[aeiou]/, (vowel) => accents[vowel]!) // "Charizard" → "Chárizard"
    expect(withAccent).not.toBe(famous!.name)
    const { body } = await search({ q: withAccent.toUpperCase() })
    expect(body.data.map((c: any) => c.id)).toEqual([famous!.id, starred, dark])
  })

  test('relevance: exact, name prefix, word match, fuzzy (by word similarity); then shorter names, then id', async () => {
    const word = common!.word
    const [first] = twoWords!.clean_name.split(' ') as [string]
    const misspelt = (w: string) => w.slice(0, 3) + w.slice(2) // a doubled letter: "golem" → "gollem"
    for (const q of [word, word.slice(0, 3), misspelt(word), `${first} ${word}`, `${misspelt(first)} ${misspelt(word)}`]) {
      const found = await everyMatch({ q })
      expect({ q, some: found.length > 0 }).toEqual({ q, some: true })
      const tiers = found.map((c) => tierOf(c.clean_name, q))
      expect({ q, tiers }).toEqual({ q, tiers: [...tiers].sort((a, b) => a - b) })
      // Fuzzy matches only when nothing matched by words.
      expect({ q, mixed: tiers.includes(3) && tiers.some((t) => t < 3) }).toEqual({ q, mixed: false })
      const scores = new Map(
        (
          await rows<{ id: number; ws: number; sws: number }>(sql`
            select id, word_similarity(${q}, clean_name) as ws, strict_word_similarity(${q}, clean_name) as sws
            from cards where id in (${idList(found.map((c) => c.id))})`)
        ).map((row) => [row.id, row]),
      )
      // Word matches by name length; fuzzy ones by (strict, with several words) word similarity, then
      // name length; higher keys first.
      const key = (card: { id: number; clean_name: string }, tier: number) => {
        const { ws, sws } = scores.get(card.id)!
        return [tier < 3 ? 0 : q.includes(' ') ? sws : ws, -card.clean_name.length]
      }
      for (let i = 1; i < found.length; i++) {
        if (tiers[i - 1] !== tiers[i]) continue
        const [a, b] = [found[i - 1], found[i]]
        const [ka, kb] = [key(a, tiers[i]!), key(b, tiers[i]!)]
        const inOrder = ka[0]! > kb[0]! || (ka[0] === kb[0] && (ka[1]! > kb[1]! || (ka[1] === kb[1] && a.id < b.id)))
        expect({ q, a: a.clean_name, b: b.clean_name, inOrder }).toEqual({ q, a: a.clean_name, b: b.clean_name, inOrder: true })
      }
    }
  })

  test('q is only ever data: SQL and tsquery syntax neither fail nor widen the search', async () => {
    const prefix = famous!.clean_name.slice(0, 4)
    // Operators and quotes are punctuation, folded away like any other: the prefix alone remains.
    for (const q of [`${prefix} & | ! :* ( ) <->`, `${prefix}\\`, `"${prefix}"`, `'${prefix}':*`]) {
      const { status, body } = await search({ q })
      expect({ q, status }).toEqual({ q, status: 200 })
      expect(body.data.map((c: any) => c.id)).toContain(famous!.id)
    }
    const [{ n }] = (await rows<{ n: number }>(sql`select count(*)::int as n from cards`)) as [{ n: number }]
    const injected = await search({ q: `${prefix}' or 1=1 --` })
    expect(injected.status).toBe(200)
    expect(injected.body.meta.total).toBeLessThan(n / 10)
    const none = await search({ q: 'qzxjvwqzxj' })
    expect(none.body).toMatchObject({ data: [], meta: { total: 0, page: 1, has_more: false } })
  })
})

describe('GET /v1/search: filters', () => {
  /** The filtered search equals the unfiltered one with the non-qualifying cards taken out, and is smaller. */
  async function expectNarrows(q: string, filter: Record<string, string | number>, qualifies: (ids: number[]) => Promise<Set<number>>) {
    const all = await everyMatch({ q })
    const kept = await qualifies(all.map((c) => c.id))
    const filtered = await everyMatch({ q, ...filter })
    expect(filtered.length).toBeGreaterThan(0)
    expect(filtered.length).toBeLessThan(all.length)
    expect(filtered.map((c) => c.id)).toEqual(all.filter((c) => kept.has(c.id)).map((c) => c.id))
    return filtered
  }
  const idsOf = (found: { id: number }[]) => new Set(found.map((row) => row.id))

  test('game', async () => {
    const q = common!.word
    const [first] = (await search({ q })).body.data
    const [{ slug }] = (await rows<{ slug: string }>(sql`select g.slug from cards c join games g on g.id = c.game_id where c.id = ${first.id}`)) as [{ slug: string }]
    const filtered = await expectNarrows(q, { game: slug }, async (ids) =>
      idsOf(await rows(sql`select c.id from cards c join games g on g.id = c.game_id where g.slug = ${slug} and c.id in (${idList(ids)})`)),
    )
    expect(filtered.every((c) => c.game_name === first.game_name)).toBe(true)
  })

  test('type', async () => {
    for (const type of ['Cards', 'Sealed Products']) {
      const filtered = await expectNarrows(bothTypes!.word, { type }, async (ids) =>
        idsOf(await rows(sql`select id from cards where product_type = ${type} and id in (${idList(ids)})`)),
      )
      expect(filtered.every((c) => c.product_type === type)).toBe(true)
    }
  })

  test('set_id', async () => {
    const q = common!.word
    const [first] = (await search({ q })).body.data
    const [{ set_id }] = (await rows<{ set_id: number }>(sql`select set_id from cards where id = ${first.id}`)) as [{ set_id: number }]
    const filtered = await expectNarrows(q, { set_id }, async (ids) => idsOf(await rows(sql`select id from cards where set_id = ${set_id} and id in (${idList(ids)})`)))
    expect(filtered.every((c) => c.set_name === first.set_name)).toBe(true)
  })

  test('rarity (exact)', async () => {
    const q = common!.word
    const [{ rarity }] = (await rows<{ rarity: string }>(sql`
      select rarity from cards where clean_name like ${`%${q}%`} group by rarity order by count(*) desc, rarity limit 1`)) as [{ rarity: string }]
    const filtered = await expectNarrows(q, { rarity }, async (ids) => idsOf(await rows(sql`select id from cards where rarity = ${rarity} and id in (${idList(ids)})`)))
    expect(filtered.every((c) => c.rarity === rarity)).toBe(true)
    expect((await search({ q, rarity: rarity.toUpperCase() })).body.meta.total).toBe(0)
  })

  test('printing (exact): the card has a price for it, primary or not', async () => {
    const q = common!.word
    const all = await everyMatch({ q })
    // The least common printing among the matches that is not every match's.
    const [{ printing }] = (await rows<{ printing: string }>(sql`
      select printing from card_prices where card_id in (${idList(all.map((c) => c.id))})
      group by printing having count(*) < ${all.length} order by count(*), printing limit 1`)) as [{ printing: string }]
    const filtered = await expectNarrows(q, { printing }, async (ids) =>
      idsOf(await rows(sql`select card_id as id from card_prices where printing = ${printing} and card_id in (${idList(ids)})`)),
    )
    expect(filtered.length).toBeGreaterThan(0)
  })

  test('min_price and max_price, on the primary printing’s market price', async () => {
    const q = common!.word
    const all = await everyMatch({ q })
    const stored = await storedCards(all.map((c) => c.id))
    const prices = [...stored.values()]
      .map((c) => c.market_price)
      .filter((p): p is number => p !== null)
      .sort((a, b) => a - b)
    expect(prices.length).toBeGreaterThan(3)
    const low = prices[Math.floor(prices.length / 3)]!
    const high = prices[Math.floor((2 * prices.length) / 3)]!
    const inRange = (min: number, max: number) => async (ids: number[]) =>
      new Set(
        ids.filter((id) => {
          const p = stored.get(id)!.market_price
          return p !== null && p >= min && p <= max
        }),
      )
    for (const [filter, min, max] of [
      [{ min_price: low }, low, Infinity],
      [{ max_price: high }, 0, high],
      [{ min_price: low, max_price: high }, low, high],
    ] as const) {
      const filtered = await expectNarrows(q, filter, inRange(min, max))
      expect(filtered.every((c) => c.market_price !== null && c.market_price >= min && c.market_price <= max)).toBe(true)
    }
    // The bounds are inclusive.
    const exactly = await everyMatch({ q, min_price: low, max_price: low })
    expect(exactly.length).toBeGreaterThan(0)
    expect(exactly.every((c) => c.market_price === low)).toBe(true)
  })

  test('filters combine', async () => {
    const q = common!.word
    const all = await everyMatch({ q })
    const stored = await storedCards(all.map((c) => c.id))
    const pick = [...stored.values()].find((c) => c.market_price !== null)!
    const found = await everyMatch({ q, game: pick.game_slug, type: pick.product_type, rarity: pick.rarity, max_price: pick.market_price! })
    expect(found.map((c) => c.id)).toContain(pick.id)
    for (const card of found) {
      const s = stored.get(card.id)!
      expect(s.game_slug === pick.game_slug && s.product_type === pick.product_type && s.rarity === pick.rarity).toBe(true)
      expect(s.market_price! <= pick.market_price!).toBe(true)
    }
  })
})

describe('GET /v1/search: sorting and paging', () => {
  test('price_asc and price_desc: by primary market price, unpriced last, ties by id', async () => {
    const q = common!.word
    const all = await everyMatch({ q })
    const ids = all.map((c) => c.id).sort((a, b) => a - b)
    const stored = await storedCards(ids)
    for (const sort of ['price_asc', 'price_desc'] as const) {
      const sorted = await everyMatch({ q, sort })
      expect(sorted.map((c) => c.id).sort((a, b) => a - b)).toEqual(ids)
      const expected = [...sorted].sort((a, b) => {
        const [pa, pb] = [stored.get(a.id)!.market_price, stored.get(b.id)!.market_price]
        if (pa === null || pb === null) return pa === pb ? a.id - b.id : pa === null ? 1 : -1
        return (sort === 'price_asc' ? pa - pb : pb - pa) || a.id - b.id
      })
      expect(sorted.map((c) => c.id)).toEqual(expected.map((c) => c.id))
    }
  })

  test('name: by name, then id', async () => {
    const q = common!.word
    const sorted = await everyMatch({ q, sort: 'name' })
    const expected = await rows<{ id: number }>(sql`select id from cards where id in (${idList(sorted.map((c) => c.id))}) order by name, id`)
    expect(sorted.map((c) => c.id)).toEqual(expected.map((row) => row.id))
  })

  test('small pages never repeat or skip a card, whatever the sort; past the end is empty with the total', async () => {
    const q = common!.word
    for (const sort of ['relevance', 'price_asc', 'price_desc', 'name']) {
      const whole = (await everyMatch({ q, sort })).map((c) => c.id)
      const paged: number[] = []
      for (let page = 1; page <= Math.ceil(whole.length / 7); page++) {
        const { body } = await search({ q, sort, per_page: 7, page })
        expect(body.meta).toEqual({ total: whole.length, page, per_page: 7, has_more: page * 7 < whole.length })
        paged.push(...body.data.map((c: any) => c.id))
      }
      expect(paged).toEqual(whole)
      expect(new Set(paged).size).toBe(paged.length)
    }
    const past = await search({ q, page: 999 })
    expect(past.status).toBe(200)
    expect(past.body.data).toEqual([])
    expect(past.body.meta.total).toBeGreaterThan(0)
    expect(past.body.meta.has_more).toBe(false)
  })

  test('per_page above 100 is served as 100', async () => {
    const q = common!.word
    const hundred = await search({ q, per_page: 100 })
    expect(hundred.body.meta.per_page).toBe(100)
    for (const perPage of [200, 101]) {
      const { status, body } = await search({ q, per_page: perPage })
      expect(status).toBe(200)
      expect(body.meta).toEqual(hundred.body.meta)
      expect(body.data).toEqual(hundred.body.data)
    }
  })
})

describe('GET /v1/search: refusals and quota', () => {
  const expectInvalid = async (params: Record<string, string | number>, ...fields: string[]) => {
    const { status, body } = await search(params)
    expect({ params, status, code: body.error?.code }).toEqual({ params, status: 400, code: 'INVALID_PARAMETER' })
    for (const field of fields) {
      expect(body.error.message).toContain(field)
      expect(body.error.details.map((d: any) => d.field)).toContain(field)
    }
    expect(body.rate_limit.daily_limit).toBe(10_000)
  }

  test('q: missing, too short (also once trimmed), too long, or without letters or digits', async () => {
    await expectInvalid({}, 'q')
    await expectInvalid({ q: 'a' }, 'q')
    await expectInvalid({ q: '  a   ' }, 'q')
    await expectInvalid({ q: 'a'.repeat(201) }, 'q')
    await expectInvalid({ q: ` ${'a'.repeat(100)} ${'b'.repeat(100)} ` }, 'q')
    await expectInvalid({ q: '!?' }, 'q')
    expect((await search({ q: 'a'.repeat(200) })).status).toBe(200)
    expect((await search({ q: `  ${'a'.repeat(200)}  ` })).status).toBe(200)
    expect((await search({ q: 'ab' })).status).toBe(200)
  })

  test('bad filters and sorts name the parameter', async () => {
    await expectInvalid({ q: 'golem', min_price: 5, max_price: 1 }, 'min_price', 'max_price')
    await expectInvalid({ q: 'golem', min_price: -1 }, 'min_price')
    await expectInvalid({ q: 'golem', max_price: 'cheap' }, 'max_price')
    await expectInvalid({ q: 'golem', sort: 'cheap' }, 'sort')
    await expectInvalid({ q: 'golem', type: 'Foo' }, 'type')
    await expectInvalid({ q: 'golem', set_id: 0 }, 'set_id')
    await expectInvalid({ q: 'golem', set_id: 1.5 }, 'set_id')
    await expectInvalid({ q: 'golem', per_page: 0 }, 'per_page')
    await expectInvalid({ q: 'golem', per_page: 1.5 }, 'per_page')
    await expectInvalid({ q: 'golem', page: 0 }, 'page')
  })

  test('an unknown game or set is 404; a known one without matches is an empty page', async () => {
    const game = await search({ q: 'golem', game: 'no-such-game' })
    expect(game.status).toBe(404)
    expect(game.body.error.code).toBe('NOT_FOUND')
    expect(game.body.error.message).toContain('no-such-game')
    expect(game.body.rate_limit).toBeDefined()
    const set = await search({ q: 'golem', set_id: 99999999 })
    expect(set.status).toBe(404)
    expect(set.body.error.code).toBe('NOT_FOUND')
    const empty = await search({ q: 'qzxjvwqzxj', game: 'pokemon' })
    expect(empty.status).toBe(200)
    expect(empty.body.meta.total).toBe(0)
  })

  test('no key is 401 (even with bad parameters); every tier may search and gets rate_limit', async () => {
    const anonymous = await search({ q: 'golem' }, null)
    expect(anonymous.status).toBe(401)
    expect(anonymous.body.error.code).toBe('API_KEY_REQUIRED')
    expect((await search({ q: 'a' }, null)).status).toBe(401)
    expect((await search({ q: 'golem' }, 'tcg_live_notarealkeynotarealkeynotarealk')).status).toBe(401)

    const free = await search({ q: famous!.name }, freeKey)
    expect(free.status).toBe(200)
    expect(free.body.rate_limit).toMatchObject({ daily_limit: 100 })
    expect(free.headers.get('x-ratelimit-limit')).toBe('100')
    const again = await search({ q: famous!.name }, freeKey)
    expect(again.body.rate_limit.daily_remaining).toBe(free.body.rate_limit.daily_remaining - 1)
  })
})
