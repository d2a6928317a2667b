import type { Executor } from '../../db/client'
import { invalidField, invalidQuery, notFound } from '../../shared/errors'
import { idsAsWritten } from '../../shared/id-list'
import { getCardPrices } from '../catalog/service'
import { newestSalesOf } from '../history/service'
import type { MoverDirection, MoverPeriod } from '../snapshot/model'
import type { ChangePosition, PriceSnapshot } from '../snapshot/snapshot'
import { MAX_BULK_PRICE_IDS } from './model'
import type { AnswerVariant } from './respond'

function gameIdOf(snapshot: PriceSnapshot, slug: string | undefined): number | undefined {
  if (slug === undefined) return undefined
  const gameId = snapshot.gameId(slug)
  if (gameId === undefined) throw notFound(`Game '${slug}'`)
  return gameId
}

const snapshotMeta = (snapshot: PriceSnapshot) => ({ snapshot_version: snapshot.version, as_of: snapshot.asOf })

/** Bulk price rows for the ids, in request order, from the snapshot's ready-made JSON; unknown ids in `meta.not_found`, cards without prices in `meta.unpriced`. */
export function bulkPrices(snapshot: PriceSnapshot, rawIds: string) {
  const selection = snapshot.selectBulk(idsAsWritten(rawIds, MAX_BULK_PRICE_IDS))
  return {
    rows: () => snapshot.bulkObjects(selection),
    json: (head: string, tail: string) => snapshot.bulkJson(selection, head, tail),
    meta: {
      requested: selection.count + selection.unpriced.length + selection.missing.length,
      found: selection.count + selection.unpriced.length,
      not_found: selection.missing,
      unpriced: selection.unpriced,
      total: selection.count,
      ...snapshotMeta(snapshot),
    },
  }
}

export function topMovers(snapshot: PriceSnapshot, query: { game?: string; direction?: MoverDirection; period?: MoverPeriod; printing?: string; type?: string; limit?: number }) {
  const gameId = gameIdOf(snapshot, query.game)
  const period = query.period ?? '24h'
  const direction = query.direction ?? 'up'
  const filter = { period, direction, gameId, type: query.type, printing: query.printing, limit: query.limit ?? 20 }
  const { json, count } = snapshot.topMoversJson(filter)
  return {
    rows: () => snapshot.topMovers(filter),
    json: (head: string, tail: string) => `${head}${json}${tail}`,
    meta: { period, direction, count, total: count, ...snapshotMeta(snapshot) },
  }
}

/** A cursor is the last row's place, base64url JSON: opaque to clients, stable across snapshots. */
const encodeCursor = (position: ChangePosition) => Buffer.from(JSON.stringify([position.at, position.cardId, position.printing])).toString('base64url')

function decodeCursor(cursor: string): ChangePosition {
  try {
    const [at, cardId, printing] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[]
    if (typeof at === 'string' && !Number.isNaN(Date.parse(at)) && Number.isSafeInteger(cardId) && typeof printing === 'string') {
      return { at: new Date(at).toISOString(), cardId: cardId as number, printing }
    }
  } catch {}
  throw invalidField('cursor', "must be a previous answer's meta.next, unchanged")
}

/**
 * The price rows updated after `since` (or after a cursor), oldest first, as a resumable feed:
 * `next` marks where the answer ended, so a client asks again with it now while `has_more`, and
 * later for whatever changed since.
 */
export function priceChanges(snapshot: PriceSnapshot, query: { since?: string; cursor?: string; game?: string; limit?: number }) {
  if ((query.since === undefined) === (query.cursor === undefined)) {
    const message = 'give exactly one of since and cursor'
    throw invalidQuery(message, [
      { field: 'since', message },
      { field: 'cursor', message },
    ])
  }
  const gameId = gameIdOf(snapshot, query.game)
  const position = query.cursor !== undefined ? decodeCursor(query.cursor) : { at: new Date(query.since!).toISOString(), cardId: Number.MAX_SAFE_INTEGER, printing: '' }
  const { rows, more } = snapshot.changesAfter(position, gameId, query.limit ?? 100)
  const last = rows.at(-1)
  const next = last ? { at: last.last_updated_at, cardId: last.card_id, printing: last.printing } : position
  return { data: rows, meta: { count: rows.length, total: rows.length, has_more: more, next: encodeCursor(next), ...snapshotMeta(snapshot) } }
}

/**
 * docs/adr/0093-sales-in-pro-card-prices.md: card prices carry each printing's newest recorded
 * sales from Pro up (the tiers with detailed history), and leave the fields out below. The one
 * rule the card-prices route and its repeats read.
 */
export const cardPricesVariant: AnswerVariant = (policy) => (policy.capabilities.has('detailed_history') ? 'sales' : '')

/**
 * A card's prices as `GET /v1/cards/:id/prices` answers them for the caller's variant: from the
 * snapshot (an unknown card or printing is refused from it first), then, for 'sales', with the
 * newest sales of each printing, one indexed read for the card (not kept in the snapshot: reading
 * them for every printing takes seconds). The answer is kept per variant, so a repeat reads nothing.
 */
export function cardPrices(db: Executor, snapshot: PriceSnapshot, id: number, printing: string | undefined, variant: string) {
  const plain = getCardPrices(snapshot, id, printing)
  if (variant === '') return plain
  return newestSalesOf(db, [id]).then((withSales) => ({ data: Array.isArray(plain.data) ? plain.data.map(withSales) : withSales(plain.data) }))
}
