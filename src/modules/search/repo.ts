import { and, asc, count, desc, eq, exists, gte, lte, notExists, type SQL, sql } from 'drizzle-orm'
import { alias } from 'drizzle-orm/pg-core'
import type { Database, Executor } from '../../db/client'
import { preparedQueries } from '../../db/prepared'
import { cardPrices, cards, games, searchWords, sets } from '../../db/schema'
import type { Page } from '../../shared/model'
import { cardWithPriceColumns, primaryPrice } from '../catalog/queries'
import type { SearchFilter, SearchSort } from './model'

// Matching (docs/adr/0042-matching-by-words-then-by-corrected-words.md). `cards.clean_name` is lowercase and accent-free (cleanName at sync
// time), and q went through the same function, so case, accents and punctuation never matter.
//   - By words (full text, index cards_clean_name_fts_idx): every word of q is a prefix of a word
//     of the name ("pika" → "pikachu", "trainer zoe" → "pokemon trainer zoe").
//   - Fuzzy (pg_trgm on the word dictionary search_words, then the same full-text index): when no
//     card matches by words under the same filters, every word of q may also be a close
//     misspelling of a word of the name ("charzard" → "charizard").
// Fuzzy matches are a fallback rather than extra rows: a name found by its words has nothing to
// gain from names that merely resemble it, and a search that finds its words never pays for the
// corrections.
// The text-search configuration is written into the SQL, never bound, so the expression is the
// index's own; q reaches the database only as bound parameters.

const tsvector = sql`to_tsvector('simple', ${cards.cleanName})`

/**
 * `word1:* & word2:*`: each cleaned word as a prefix. Cleaned words hold only letters and digits,
 * so none can be read as a tsquery operator; the string is bound as a parameter.
 */
export function prefixTsQuery(text: string): string {
  return text
    .split(' ')
    .filter((word) => word.length > 0)
    .map((word) => `${word}:*`)
    .join(' & ')
}

/** What changes the SQL of a search: which filters are given, the order, and one word or several. */
interface SearchShape {
  game: boolean
  type: boolean
  setId: boolean
  rarity: boolean
  printing: boolean
  minPrice: boolean
  maxPrice: boolean
  sort: SearchSort
  severalWords: boolean
}

function shapeOf(filter: SearchFilter): SearchShape {
  return {
    game: filter.game !== undefined,
    type: filter.type !== undefined,
    setId: filter.setId !== undefined,
    rarity: filter.rarity !== undefined,
    printing: filter.printing !== undefined,
    minPrice: filter.minPrice !== undefined,
    maxPrice: filter.maxPrice !== undefined,
    sort: filter.sort,
    severalWords: filter.text.includes(' '),
  }
}

/** The values of a search's placeholders. */
function valuesOf(filter: SearchFilter, page?: Page) {
  return {
    text: filter.text,
    tsquery: prefixTsQuery(filter.text),
    game: filter.game,
    type: filter.type,
    setId: filter.setId,
    rarity: filter.rarity,
    printing: filter.printing,
    minPrice: filter.minPrice,
    maxPrice: filter.maxPrice,
    limit: page?.perPage,
    offset: page && (page.page - 1) * page.perPage,
  }
}
const text = sql.placeholder('text')

/** Full-text match: every word of q is a prefix of a word of the name (index: cards_clean_name_fts_idx). */
const wordMatch = sql`${tsvector} @@ to_tsquery('simple', ${sql.placeholder('tsquery')})`

/**
 * Fuzzy match, for misspellings: every word of q starts a word of the name or is close to one.
 * Each word's corrections are the dictionary words (search_words, a few hundred to a few thousand
 * rows, trigram-indexed) at least pg_trgm.similarity_threshold (0.3) similar to it, the 8 closest:
 * "charzard" → charizard, "sksypire" → skyspire. The cards are then found by their words, like a
 * word match, through the full-text index. The query `(charzard:* | charizard | chariizard)` is
 * built in SQL from bound values; dictionary words hold only letters and digits, as q's do.
 * Comparing word by word keeps "pokemon trainr" from matching every other pokemon card, and costs
 * a short lookup per word instead of a similarity check of every name sharing a few trigrams with q
 * (1,500 of 40,000 for "monofang").
 */
const correctedTsQuery = sql`to_tsquery('simple', (
  select string_agg('(' || q.part || ':*' || coalesce(corrections.words, '') || ')', ' & ')
  from unnest(string_to_array(${text}, ' ')) as q(part)
  left join lateral (
    select string_agg(' | ' || closest.word, '') as words
    from (
      select ${searchWords.word} as word from ${searchWords}
      where ${searchWords.word} % q.part
      order by similarity(${searchWords.word}, q.part) desc, ${searchWords.word}
      limit 8
    ) closest
  ) corrections on true
))`

/**
 * Fuzzy matches rank by how well the closest stretch of the name matches q: word_similarity with
 * one word, strict_word_similarity (whole words) with several.
 */
const fuzzyScore = (severalWords: boolean) => (severalWords ? sql`strict_word_similarity(${text}, ${cards.cleanName})` : sql`word_similarity(${text}, ${cards.cleanName})`)

/** Prices are needed for every match (not only the page's) when they filter or order. */
const needsPrices = (shape: SearchShape) => shape.minPrice || shape.maxPrice || shape.sort === 'price_asc' || shape.sort === 'price_desc'

/** Every filter but q, as one condition (undefined: none). */
function filterConditions(db: Executor, shape: SearchShape, primary: ReturnType<typeof primaryPrice>) {
  return and(
    shape.game ? eq(games.slug, sql.placeholder('game')) : undefined,
    shape.type ? eq(cards.productType, sql.placeholder('type')) : undefined,
    shape.setId ? eq(cards.setId, sql.placeholder('setId')) : undefined,
    shape.rarity ? eq(cards.rarity, sql.placeholder('rarity')) : undefined,
    shape.printing
      ? exists(
          db
            .select({ one: sql`1` })
            .from(cardPrices)
            .where(and(eq(cardPrices.cardId, cards.id), eq(cardPrices.printing, sql.placeholder('printing')))),
        )
      : undefined,
    shape.minPrice ? gte(primary.marketPrice, sql.placeholder('minPrice')) : undefined,
    shape.maxPrice ? lte(primary.marketPrice, sql.placeholder('maxPrice')) : undefined,
  )
}

/**
 * The matching cards that pass the filters, with what the orders need. Relevance: a word match is
 * tiered 0 (the exact name), 1 (the name starts with q) or 2 (every word of q starts a word of the
 * name), a fuzzy match 3 and ranked within it by its word similarity to q; then shorter names
 * first (the less a name adds to q, the closer it is), then the id. Length rather than trigram
 * similarity orders the word matches because a prefix such as "holl" matches 1,500 of 40,000 cards,
 * and scoring each by similarity() tripled the statement's time. Fuzzy matches are looked for only
 * when no card matches by words (under the same filters): a one-time filter on the second branch.
 * The word matches are a WITH query that both branches read, so the full-text match runs once (a
 * prefix such as "of:*" or "the:*" makes it cost milliseconds); the statement must therefore start
 * with it: `db.with(wordMatches)`.
 */
function matchingCards(db: Executor, shape: SearchShape) {
  const branch = (rank: { tier: SQL; score: SQL }, match: SQL, gate?: SQL) => {
    const primary = primaryPrice(db)
    let query = db
      .select({
        id: sql<number>`${cards.id}`.as('card_id'),
        name: sql<string>`${cards.name}`.as('card_name'),
        marketPrice: (needsPrices(shape) ? sql<number | null>`${primary.marketPrice}` : sql<number | null>`null::double precision`).as('card_market_price'),
        tier: rank.tier.mapWith(Number).as('tier'),
        score: rank.score.mapWith(Number).as('score'),
        length: sql<number>`length(${cards.cleanName})`.as('name_length'),
      })
      .from(cards)
      .$dynamic()
    // The primary price's subquery reads the game's kind.
    if (shape.game || needsPrices(shape)) query = query.innerJoin(games, eq(games.id, cards.gameId))
    if (needsPrices(shape)) query = query.leftJoinLateral(primary, sql`true`)
    return query.where(and(match, filterConditions(db, shape, primary), gate))
  }
  const wordMatches = db.$with('word_matches').as(
    branch(
      {
        tier: sql`case when ${cards.cleanName} = ${text} then 0 when starts_with(${cards.cleanName}, ${text}) then 1 else 2 end`,
        score: sql`0::real`,
      },
      wordMatch,
    ),
  )
  const noWordMatch = notExists(db.select({ one: sql`1` }).from(wordMatches))
  const similar = branch({ tier: sql`3`, score: fuzzyScore(shape.severalWords) }, sql`${tsvector} @@ ${correctedTsQuery}`, noWordMatch)
  return { wordMatches, matches: db.select().from(wordMatches).unionAll(similar).as('matches') }
}

/**
 * One page of matching cards as card-with-price rows, with the number of matches: the matches are
 * ordered and counted by window functions and the page's ids kept; names and the primary price
 * are then read for those rows only. Every order ends with the card id, so pages never repeat or
 * skip a card.
 */
const searchPage = preparedQueries((db, shape: SearchShape) => {
  const { wordMatches, matches } = matchingCards(db, shape)
  const orderBy: Record<SearchSort, SQL[]> = {
    relevance: [asc(matches.tier), desc(matches.score), asc(matches.length)],
    price_asc: [sql`${matches.marketPrice} asc nulls last`],
    price_desc: [sql`${matches.marketPrice} desc nulls last`],
    name: [asc(matches.name)],
  }
  const ranked = db
    .with(wordMatches)
    .select({
      id: matches.id,
      position: sql<number>`row_number() over (order by ${sql.join([...orderBy[shape.sort], asc(matches.id)], sql`, `)})`.as('position'),
      total: sql<number>`(count(*) over ())::int`.as('total'),
    })
    .from(matches)
    .orderBy(sql`"position"`)
    .limit(sql.placeholder('limit'))
    .offset(sql.placeholder('offset'))
    .as('ranked')

  const primary = primaryPrice(db)
  return db
    .select({ ...cardWithPriceColumns(primary), total: ranked.total })
    .from(ranked)
    .innerJoin(cards, eq(cards.id, ranked.id))
    .innerJoin(sets, eq(sets.id, cards.setId))
    .innerJoin(games, eq(games.id, cards.gameId))
    .leftJoinLateral(primary, sql`true`)
    .orderBy(asc(ranked.position))
    .prepare('search_page')
})

/** One statement, prepared per shape. `total` is undefined when the page is empty (no match, or past the end). */
export async function findSearchPage(db: Database, filter: SearchFilter, page: Page) {
  const rows = await searchPage(db, shapeOf(filter)).execute(valuesOf(filter, page))
  return { rows, total: rows[0]?.total }
}

const knownGames = alias(games, 'known_games')
const knownSets = alias(sets, 'known_sets')

const searchCount = preparedQueries((db, { shape, countMatches }: { shape: SearchShape; countMatches: boolean }) => {
  const known = {
    gameKnown: shape.game
      ? sql<boolean>`exists (${db
          .select({ one: sql`1` })
          .from(knownGames)
          .where(eq(knownGames.slug, sql.placeholder('game')))})`
      : sql<boolean>`true`,
    setKnown: shape.setId
      ? sql<boolean>`exists (${db
          .select({ one: sql`1` })
          .from(knownSets)
          .where(eq(knownSets.id, sql.placeholder('setId')))})`
      : sql<boolean>`true`,
  }
  if (!countMatches)
    return db
      .select({ total: sql<number>`0`, ...known })
      .from(sql`(select) as one_row`)
      .prepare('search_known')
  const { wordMatches, matches } = matchingCards(db, shape)
  return db
    .with(wordMatches)
    .select({ total: count(), ...known })
    .from(matches)
    .prepare('search_count')
})

/**
 * For an empty page: how many cards match, and whether the game and set filters name existing
 * ones (an aggregate answers one row even when nothing matches), in one statement. An empty first
 * page already says that nothing matches, so the matches are counted only past it.
 */
export async function countSearch(db: Database, filter: SearchFilter, page: Page) {
  const shape = shapeOf(filter)
  const countMatches = page.page > 1
  if (!countMatches && !shape.game && !shape.setId) return { total: 0, gameKnown: true, setKnown: true }
  const [row] = await searchCount(db, { shape, countMatches }).execute(valuesOf(filter))
  return { total: row?.total ?? 0, gameKnown: row?.gameKnown ?? false, setKnown: row?.setKnown ?? false }
}
