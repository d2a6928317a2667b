import { TypeCompiler } from '@sinclair/typebox/compiler'
import { stringify } from 'csv-stringify/sync'
import type { Database } from '../../db/client'
import { AppError, invalidQuery, notFound } from '../../shared/errors'
import { JSON_CONTENT_TYPE } from '../../shared/http'
import { parseIdList } from '../../shared/id-list'
import { cleanName } from '../../shared/text'
import { resolveCredits, TIER_POLICY, type Tier, type TierPolicy } from '../auth/tiers'
import type { Price } from '../catalog/model'
import * as catalog from '../catalog/queries'
import { toCard, toPrice } from '../catalog/service'
import type { HistoryRange, HistoryRow } from '../history/model'
import * as history from '../history/queries'
import { historyWindow, newestSalesOf, windowMeta } from '../history/service'
import { type CardWithPrices, MAX_BULK_CARD_IDS, MAX_BULK_HISTORY_IDS, ResolveMarketplaceBody, ResolveNameBody } from './model'
import * as repo from './repo'

/** Each card's prices, primary printing first, from one statement for all the cards. */
async function pricesByCard(db: Database, cardIds: number[]): Promise<Map<number, Price[]>> {
  const byCard = new Map<number, Price[]>()
  for (const row of await catalog.findPricesOfCards(db, cardIds)) {
    const price = toPrice(row)
    const list = byCard.get(row.cardId)
    if (list) list.push(price)
    else byCard.set(row.cardId, [price])
  }
  return byCard
}

/**
 * Cards with their prices and each printing's newest recorded sales (Pro and up: docs/adr/0093-sales-in-pro-card-prices.md), by id: three statements run together, whatever the number of ids.
 */
async function cardsWithPrices(db: Database, ids: number[]): Promise<Map<number, CardWithPrices>> {
  const [rows, prices, withSales] = await Promise.all([catalog.findCardsBy(db, 'id', ids), pricesByCard(db, ids), newestSalesOf(db, ids)])
  return new Map(rows.map((row) => [row.id, { ...toCard(row), prices: (prices.get(row.id) ?? []).map(withSales) }]))
}

/** Full cards with their prices, in request order (a Pro route, so with sales). */
export async function bulkCards(db: Database, rawIds: string) {
  const ids = parseIdList(rawIds, MAX_BULK_CARD_IDS)
  const byId = await cardsWithPrices(db, ids)
  const data: CardWithPrices[] = []
  const missing: number[] = []
  for (const id of ids) {
    const card = byId.get(id)
    if (card) data.push(card)
    else missing.push(id)
  }
  return { data, meta: { requested: ids.length, found: data.length, not_found: missing, total: data.length } }
}

/**
 * The history of up to 50 cards in one window (the range clipped to the tier's window, as for one
 * card), as an object keyed by card id, optionally of one printing. Two statements run together:
 * which ids are cards, and every point of those cards in the window.
 *
 * A printing some of the cards lack just filters (those cards get an empty list). When no point
 * came back, a third statement checks that at least one of the cards has the printing: if none
 * has, it is a 400 listing theirs, as one card's history answers, so a misspelt printing is not
 * mistaken for "no history".
 */
export async function bulkHistory(db: Database, request: { rawIds: string; range: HistoryRange; printing?: string; policy: Pick<TierPolicy, 'historyDays'>; now: Date }) {
  const ids = parseIdList(request.rawIds, MAX_BULK_HISTORY_IDS)
  const window = historyWindow(request.range, request.policy, request.now)
  const [known, rows] = await Promise.all([
    catalog.findCardsBy(db, 'id', ids),
    history.findHistoryOfCards(db, ids, { from: window.from ?? undefined, to: window.to, printing: request.printing }),
  ])
  const found = new Set(known.map((card) => card.id))
  if (request.printing !== undefined && rows.length === 0 && found.size > 0) {
    const printings = await history.findPrintingsOfCards(db, [...found])
    if (!printings.includes(request.printing)) {
      const expected = printings.length > 0 ? `must be a printing of one of these cards: ${printings.join(', ')}` : 'these cards have no printings yet'
      throw invalidQuery(`'printing' ${expected} (got '${request.printing}')`, [{ field: 'printing', message: expected }])
    }
  }
  const data: Record<string, HistoryRow[]> = {}
  for (const id of ids) if (found.has(id)) data[id] = []
  for (const { card_id, ...row } of rows) data[card_id]!.push(row)
  return {
    data,
    meta: {
      ...windowMeta(window),
      requested: ids.length,
      found: found.size,
      not_found: ids.filter((id) => !found.has(id)),
      count: rows.length,
      total: rows.length,
    },
  }
}

/**
 * The custom attributes the CSV export gives a column each, `custom_attributes.<name>`: every name
 * the spec lists per game kind, then those the demo source uses for the kinds it does not, in
 * that order. Any other attribute goes, as JSON, to `custom_attributes.other`. The same columns
 * for every set (docs/adr/0095-set-export-every-card-stable-columns.md).
 */
export const EXPORT_ATTRIBUTES = [
  // creature-battle
  'stage',
  'energyType',
  'hp',
  'weakness',
  'resistance',
  'retreatCost',
  'attack1',
  'attack2',
  'attack3',
  'attack4',
  'cardType',
  'flavorText',
  // mana-based
  'color',
  'manaCost',
  'power',
  'toughness',
  'subType',
  'oracleText',
  // monster duel
  'attribute',
  'level',
  'attack',
  'defense',
  'description',
  // action and ink games (the demo source's names)
  'class',
  'pitch',
  'inkColor',
  'inkCost',
  'loreValue',
] as const

/** How the CSV export writes a list value (energyType): its items joined by this. */
export const EXPORT_LIST_SEPARATOR = '|'

/**
 * CSV export columns, the same for every set: the price row's columns as they were first exported
 * (docs/adr/0041-card-prices-and-card-fields.md), then the sales and the rest of the card, then
 * one column per custom attribute. One row per card and printing; a card without prices is one row
 * with empty price cells.
 */
export const EXPORT_COLUMNS = [
  'card_id',
  'name',
  'marketplace_id',
  'product_type',
  'foil_only',
  'printing',
  'market_price',
  'market_price_as_of',
  'low_price',
  'median_price',
  'lowest_with_shipping',
  'buylist_price',
  'price_change_24h',
  'price_change_7d',
  'price_change_30d',
  'last_updated_at',
  'image_url',
  'sales_volume',
  'avg_sales_price',
  'sales_as_of',
  'number',
  'rarity',
  'clean_name',
  'product_status_id',
  'shipping_category_id',
  'total_listings',
  'marketplace_url',
  'hp',
  ...EXPORT_ATTRIBUTES.map((name) => `custom_attributes.${name}` as const),
  'custom_attributes.other',
] as const

const KNOWN_ATTRIBUTES = new Set<string>(EXPORT_ATTRIBUTES)

/** A card's CSV rows: one per printing, or one with empty price cells when it has no prices. */
function csvRows(card: CardWithPrices): Record<string, unknown>[] {
  const { prices, custom_attributes, ...fields } = card
  const base: Record<string, unknown> = { ...fields, card_id: card.id }
  const other: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(custom_attributes)) {
    const cell = Array.isArray(value) ? value.join(EXPORT_LIST_SEPARATOR) : value
    if (KNOWN_ATTRIBUTES.has(name)) base[`custom_attributes.${name}`] = cell
    else other[name] = value
  }
  if (Object.keys(other).length > 0) base['custom_attributes.other'] = JSON.stringify(other)
  if (prices.length === 0) return [base]
  return prices.map(({ card_id: _cardId, ...price }) => ({ ...base, ...price }))
}

/** Cards per statement while exporting: memory stays bounded whatever the size of the set. */
export const EXPORT_BATCH_CARDS = 250

/** A set export's file name and media type, without reading its rows (HEAD); 404 for an unknown set. */
export async function describeExport(db: Database, request: { setId: number; format: 'json' | 'csv'; now: Date }) {
  const set = await catalog.findSet(db, request.setId)
  if (!set) throw notFound(`Set ${request.setId}`)
  const date = request.now.toISOString().slice(0, 10)
  const filename = `${set.gameSlug}-${set.slug}-prices-${date}.${request.format}`
  return { set, filename, contentType: request.format === 'csv' ? 'text/csv; charset=utf-8' : JSON_CONTENT_TYPE }
}

/**
 * Every card and sealed product of a set with its prices (docs/adr/0095-set-export-every-card-stable-columns.md), streamed: the set's card ids in number order, sealed products last (one
 * statement), then the cards, their prices and sales a batch of cards at a time, each batch written
 * out before the next is read. JSON is `{ data, meta, rate_limit }`, a card with its prices (an
 * empty list when it has none) per item, with meta last (it holds the counts); CSV is RFC 4180
 * with a header row, EXPORT_COLUMNS, one row per card and printing, empty fields for nulls. 404
 * for an unknown set, before anything is sent.
 */
export async function exportSet(
  db: Database,
  request: { setId: number; format: 'json' | 'csv'; now: Date; rateLimit: unknown; onError: (error: unknown) => void; batchCards?: number },
) {
  const { set, filename, contentType } = await describeExport(db, request)
  const cardIds = await catalog.findSetCardIds(db, set.id)
  const encoder = new TextEncoder()
  const batchCards = request.batchCards ?? EXPORT_BATCH_CARDS
  let batch = 0
  let count = 0
  // Set when the reader goes away (a client that hangs up): a batch still being read is dropped,
  // neither written to the closed stream nor reported as a failure.
  let cancelled = false
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const start = batch * batchCards
        const ids = cardIds.slice(start, start + batchCards)
        const byId = ids.length > 0 ? await cardsWithPrices(db, ids) : new Map<number, CardWithPrices>()
        if (cancelled) return
        // A card deleted since its id was read (a sync between the statements) is left out.
        const cards = ids.flatMap((id) => byId.get(id) ?? [])
        const first = batch === 0
        const last = start + batchCards >= cardIds.length
        batch++
        let text: string
        if (request.format === 'csv') {
          text = stringify(cards.flatMap(csvRows), { header: first, columns: [...EXPORT_COLUMNS], eof: true })
        } else {
          const items = cards.map((card, i) => (count + i === 0 ? '' : ',') + JSON.stringify(card)).join('')
          text = (first ? '{"data":[' : '') + items
          if (last) {
            const total = count + cards.length
            const meta = { set_id: set.id, set_name: set.name, game_slug: set.gameSlug, count: total, total, exported_at: request.now.toISOString() }
            text += `],"meta":${JSON.stringify(meta)},"rate_limit":${JSON.stringify(request.rateLimit)}}`
          }
        }
        count += cards.length
        if (text.length > 0) controller.enqueue(encoder.encode(text))
        if (last) controller.close()
      } catch (error) {
        if (cancelled) return
        request.onError(error)
        controller.error(error)
      }
    },
    cancel() {
      cancelled = true
    },
  })
  return { filename, stream, contentType }
}

/** The tier's resolve item limit when `items` exceed it (a tier without resolve has none to spare); undefined within it. */
function exceededItemLimit(tier: Tier, items: number): number | undefined {
  const limit = TIER_POLICY[tier].resolve?.maxItems ?? 0
  return items > limit ? limit : undefined
}

/** The item limit and credits of a resolve on this tier: 400 over the limit. */
function checkResolveItems(tier: Tier, items: number, field: string) {
  const limit = exceededItemLimit(tier, items)
  if (limit !== undefined) {
    const message = `must hold at most ${limit} items on the ${TIER_POLICY[tier].label} tier`
    throw new AppError('INVALID_PARAMETER', `Invalid body: '${field}' ${message} (got ${items})`, [{ field, message }])
  }
  return resolveCredits(tier, items)
}

/** The route's own body schemas, compiled once: the guard prices a body before the route validates it. */
const RESOLVE_BODIES = { ids: TypeCompiler.Compile(ResolveMarketplaceBody), names: TypeCompiler.Compile(ResolveNameBody) }

/**
 * What a resolve request costs: ceil(items × the tier's credit per item), judged before the route
 * validates the body, so judged here by the same schema; a body the route will refuse (anything the
 * schema refuses, such as an empty name or a null id, or over the tier's limit) costs 1, like any
 * refused request (docs/adr/0051-bulk-resolve-credits-and-matching.md).
 */
export function resolveCost(field: 'ids' | 'names') {
  const schema = RESOLVE_BODIES[field]
  return ({ body, tier }: { body: unknown; tier: Tier }) => {
    if (!schema.Check(body)) return 1
    const items = (body as Record<typeof field, unknown[]>)[field].length
    return exceededItemLimit(tier, items) === undefined ? resolveCredits(tier, items) : 1
  }
}

/** Marketplace product ids to cards with their prices, in request order; two statements in all. */
export async function resolveMarketplaceIds(db: Database, request: { ids: number[]; tier: Tier }) {
  const credits = checkResolveItems(request.tier, request.ids.length, 'ids')
  const rows = await catalog.findCardsBy(db, 'marketplaceId', request.ids)
  const prices = await pricesByCard(
    db,
    rows.map((row) => row.id),
  )
  const byMarketplaceId = new Map(rows.map((row) => [row.marketplaceId, row]))
  const resolved = []
  const missing: number[] = []
  for (const marketplaceId of request.ids) {
    const row = byMarketplaceId.get(marketplaceId)
    if (row) resolved.push({ marketplace_id: marketplaceId, card: toCard(row), prices: prices.get(row.id) ?? [] })
    else missing.push(marketplaceId)
  }
  return {
    data: { resolved, not_found: missing },
    meta: { requested: request.ids.length, resolved: resolved.length, credits_consumed: credits },
  }
}

/** A fuzzy candidate is taken only this similar to the name, and this far ahead of the next one. */
export const FUZZY_MIN_SCORE = 0.6
export const FUZZY_MIN_LEAD = 0.1

/**
 * Card names to cards. A name whose cleaned form (case, accents, punctuation set aside) is exactly
 * one card's is an exact match (score 1); several such cards make it ambiguous. Otherwise the most
 * similar names (trigram similarity) are the candidates: the best is a fuzzy match when it scores
 * at least FUZZY_MIN_SCORE and leads the next by FUZZY_MIN_LEAD, ambiguous when another is that
 * close, not found when none scores enough. Never a guess. Three statements in all (exact names,
 * similar names for the rest, then the cards and prices of every match and candidate).
 */
export async function resolveNames(db: Database, request: { names: string[]; game?: string; tier: Tier }) {
  const credits = checkResolveItems(request.tier, request.names.length, 'names')
  let gameId: number | undefined
  if (request.game !== undefined) {
    const game = await catalog.findGame(db, { slug: request.game })
    if (!game) throw notFound(`Game '${request.game}'`)
    gameId = game.id
  }
  const cleaned = request.names.map(cleanName)
  const exact = await repo.findCardsByCleanName(db, [...new Set(cleaned.filter((name) => name !== ''))], gameId)
  const exactByName = new Map<string, catalog.CardRecord[]>()
  for (const row of exact) exactByName.set(row.cleanName, [...(exactByName.get(row.cleanName) ?? []), row])

  const unmatched = [...new Set(cleaned.filter((name) => name !== '' && !exactByName.has(name)))]
  const similar = await repo.findSimilarNames(db, unmatched, gameId)
  const candidatesByName = new Map<string, { cardId: number; score: number }[]>()
  for (const candidate of similar) {
    const name = unmatched[candidate.position]!
    candidatesByName.set(name, [...(candidatesByName.get(name) ?? []), candidate])
  }

  const cardIds = [...new Set([...exact.map((row) => row.id), ...similar.map((candidate) => candidate.cardId)])]
  const known = new Map(exact.map((row) => [row.id, row]))
  const missingIds = cardIds.filter((id) => !known.has(id))
  const [more, prices] = await Promise.all([catalog.findCardsBy(db, 'id', missingIds), pricesByCard(db, cardIds)])
  for (const row of more) known.set(row.id, row)

  const candidate = (cardId: number, score: number) => {
    const row = known.get(cardId)!
    return { id: row.id, name: row.name, set_name: row.setName, set_slug: row.setSlug, game_name: row.gameName, game_slug: row.gameSlug, score }
  }
  const resolved = []
  const ambiguous = []
  const unknown: string[] = []
  for (const [i, query] of request.names.entries()) {
    const name = cleaned[i]!
    const exactRows = exactByName.get(name)
    if (exactRows?.length === 1) {
      const row = exactRows[0]!
      resolved.push({ query, match: 'exact' as const, score: 1, card: toCard(row), prices: prices.get(row.id) ?? [] })
    } else if (exactRows && exactRows.length > 1) {
      const sorted = [...exactRows].sort((a, b) => a.id - b.id).slice(0, repo.CANDIDATES_PER_NAME)
      ambiguous.push({ query, candidates: sorted.map((row) => candidate(row.id, 1)) })
    } else {
      const [best, next] = candidatesByName.get(name) ?? []
      const score = (value: number) => Math.round(value * 1000) / 1000
      if (!best || best.score < FUZZY_MIN_SCORE) unknown.push(query)
      else if (next && best.score - next.score < FUZZY_MIN_LEAD) {
        ambiguous.push({ query, candidates: candidatesByName.get(name)!.map((c) => candidate(c.cardId, score(c.score))) })
      } else {
        resolved.push({ query, match: 'fuzzy' as const, score: score(best.score), card: toCard(known.get(best.cardId)!), prices: prices.get(best.cardId) ?? [] })
      }
    }
  }
  return {
    data: { resolved, ambiguous, not_found: unknown },
    meta: { requested: request.names.length, resolved: resolved.length, credits_consumed: credits },
  }
}
