import { and, asc, count, desc, eq, exists, gte, lte, notExists, type SQL, sql } from 'drizzle-orm'
import { alias } from 'drizzle-orm/pg-core'
import type { Executor } from '../../db/client'
import { cardPrices, cards, games, sets } from '../../db/schema'
import type { Page } from '../../shared/model'
import { cardWithPriceColumns, primaryPrice } from '../catalog/repo'
import type { SearchFilter, SearchSort } from './model'

// Matching (DESIGN decision 11). `cards.clean_name` is lowercase and accent-free (cleanName at sync
// time), and q went through the same function, so case, accents and punctuation never matter.
//   - By words (full text, index cards_clean_name_fts_idx): every word of q is a prefix of a word
//     of the name ("pika" → "pikachu", "trainer zoe" → "pokemon trainer zoe").
//   - Fuzzy (pg_trgm, index cards_clean_name_trgm_idx): when no card matches by words under the
//     same filters, names similar to q ("charzard" → "charizard").
// Fuzzy matches are a fallback rather than extra rows because the trigram index is lossy: "charzard"
// reads ~1,500 candidates of 40,000 cards to keep one, so a search that finds its words never
// scans for them; and a name found by its words has nothing to gain from names that merely
// resemble it (0.3 similarity lets "wandering leviathan" match every other leviathan).
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

/** Full-text match: every word of q is a prefix of a word of the name (index: cards_clean_name_fts_idx). */
const wordMatch = (text: string) => sql`${tsvector} @@ to_tsquery('simple', ${prefixTsQuery(text)})`

/**
 * Trigram match (index: cards_clean_name_trgm_idx), for misspellings, with the similarity that
 * ranks it. One word: the whole name is similar (`%`, pg_trgm.similarity_threshold 0.3: "charzard"
 * → "charizard", "chraizard" too) or a stretch of it is (`<%`, word_similarity_threshold 0.6:
 * "cindrblade" → "cinderblade raider"). Several words: a run of whole words of the name is similar
 * (`<<%`, strict_word_similarity_threshold 0.5: "pokemon trainr" → "pokemon trainer zoe"), as
 * whole-name similarity would let "silevreye stalker" match every other stalker (646 cards of 40,000).
 */
function fuzzyMatch(text: string) {
  if (text.includes(' ')) return { where: sql`${text} <<% ${cards.cleanName}`, score: sql`strict_word_similarity(${text}, ${cards.cleanName})` }
  return { where: sql`(${cards.cleanName} % ${text} or ${text} <% ${cards.cleanName})`, score: sql`word_similarity(${text}, ${cards.cleanName})` }
}

/** Prices are needed for every match (not only the page's) when they filter or order. */
const needsPrices = (filter: SearchFilter) =>
  filter.minPrice !== undefined || filter.maxPrice !== undefined || filter.sort === 'price_asc' || filter.sort === 'price_desc'

/** Every filter but q, as one condition (undefined: none). */
function filterConditions(db: Executor, filter: SearchFilter, primary: ReturnType<typeof primaryPrice>) {
  return and(
    filter.game === undefined ? undefined : eq(games.slug, filter.game),
    filter.type === undefined ? undefined : eq(cards.productType, filter.type),
    filter.setId === undefined ? undefined : eq(cards.setId, filter.setId),
    filter.rarity === undefined ? undefined : eq(cards.rarity, filter.rarity),
    filter.printing === undefined
      ? undefined
      : exists(
          db
            .select({ one: sql`1` })
            .from(cardPrices)
            .where(and(eq(cardPrices.cardId, cards.id), eq(cardPrices.printing, filter.printing))),
        ),
    filter.minPrice === undefined ? undefined : gte(primary.marketPrice, filter.minPrice),
    filter.maxPrice === undefined ? undefined : lte(primary.marketPrice, filter.maxPrice),
  )
}

/**
 * The matching cards that pass the filters, with what the orders need: a word match is tiered
 * 0 (the exact name), 1 (the name starts with q) or 2 (every word of q starts a word of the name);
 * a fuzzy match is tier 3. Fuzzy matches are looked for only when no card matches by words (under
 * the same filters): a one-time filter on the second branch, so a search that finds its words
 * never pays for the trigram scan, which reads far more candidates than it keeps.
 */
function matchingCards(db: Executor, filter: SearchFilter) {
  const text = filter.text
  const branch = (rank: { tier: SQL; score: SQL; score2: SQL }, match: SQL, gate?: SQL) => {
    const primary = primaryPrice(db)
    let query = db
      .select({
        id: sql<number>`${cards.id}`.as('card_id'),
        name: sql<string>`${cards.name}`.as('card_name'),
        marketPrice: (needsPrices(filter) ? sql<number | null>`${primary.marketPrice}` : sql<number | null>`null::double precision`).as('card_market_price'),
        tier: rank.tier.mapWith(Number).as('tier'),
        score: rank.score.mapWith(Number).as('score'),
        score2: rank.score2.mapWith(Number).as('score2'),
      })
      .from(cards)
      .$dynamic()
    // The primary price's subquery reads the game's kind.
    if (filter.game !== undefined || needsPrices(filter)) query = query.innerJoin(games, eq(games.id, cards.gameId))
    if (needsPrices(filter)) query = query.leftJoinLateral(primary, sql`true`)
    return query.where(and(match, filterConditions(db, filter, primary), gate))
  }
  const similarity = sql`similarity(${cards.cleanName}, ${text})`
  // Word matches: the closer the whole name, the better (shorter names first).
  const byWords = branch(
    {
      tier: sql`case when ${cards.cleanName} = ${text} then 0 when starts_with(${cards.cleanName}, ${text}) then 1 else 2 end`,
      score: similarity,
      score2: sql`0::real`,
    },
    wordMatch(text),
  )
  // Fuzzy matches: the best-matching stretch of the name first, then the closer whole name.
  const noWordMatch = notExists(branch({ tier: sql`0`, score: sql`0::real`, score2: sql`0::real` }, wordMatch(text)))
  const fuzzy = fuzzyMatch(text)
  const similar = branch({ tier: sql`3`, score: fuzzy.score, score2: similarity }, fuzzy.where, noWordMatch)
  return byWords.unionAll(similar).as('matches')
}

/**
 * One page of matching cards as card-with-price rows, with the number of matches, in one
 * statement: the matches are ordered and counted by window functions and the page's ids kept;
 * names and the primary price are then read for those rows only. Every order ends with the card
 * id, so pages never repeat or skip a card. `total` is undefined when the page is empty (no
 * match, or past the end).
 */
export async function findSearchPage(db: Executor, filter: SearchFilter, page: Page) {
  const matches = matchingCards(db, filter)
  const orderBy: Record<SearchSort, SQL[]> = {
    relevance: [asc(matches.tier), desc(matches.score), desc(matches.score2)],
    price_asc: [sql`${matches.marketPrice} asc nulls last`],
    price_desc: [sql`${matches.marketPrice} desc nulls last`],
    name: [asc(matches.name)],
  }
  const ranked = db
    .select({
      id: matches.id,
      position: sql<number>`row_number() over (order by ${sql.join([...orderBy[filter.sort], asc(matches.id)], sql`, `)})`.as('position'),
      total: sql<number>`(count(*) over ())::int`.as('total'),
    })
    .from(matches)
    .orderBy(sql`"position"`)
    .limit(page.perPage)
    .offset((page.page - 1) * page.perPage)
    .as('ranked')

  const primary = primaryPrice(db)
  const rows = await db
    .select({ ...cardWithPriceColumns(primary), total: ranked.total })
    .from(ranked)
    .innerJoin(cards, eq(cards.id, ranked.id))
    .innerJoin(sets, eq(sets.id, cards.setId))
    .innerJoin(games, eq(games.id, cards.gameId))
    .leftJoinLateral(primary, sql`true`)
    .orderBy(asc(ranked.position))
  return { rows, total: rows[0]?.total }
}

const knownGames = alias(games, 'known_games')
const knownSets = alias(sets, 'known_sets')

/**
 * For an empty page: how many cards match, and whether the game and set filters name existing
 * ones (an aggregate answers one row even when nothing matches), in one statement.
 */
export async function countSearch(db: Executor, filter: SearchFilter) {
  const [row] = await db
    .select({
      total: count(),
      gameKnown:
        filter.game === undefined
          ? sql<boolean>`true`
          : sql<boolean>`exists (${db.select({ one: sql`1` }).from(knownGames).where(eq(knownGames.slug, filter.game))})`,
      setKnown:
        filter.setId === undefined
          ? sql<boolean>`true`
          : sql<boolean>`exists (${db.select({ one: sql`1` }).from(knownSets).where(eq(knownSets.id, filter.setId))})`,
    })
    .from(matchingCards(db, filter))
  return { total: row?.total ?? 0, gameKnown: row?.gameKnown ?? false, setKnown: row?.setKnown ?? false }
}
