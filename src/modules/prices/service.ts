import { notFound } from '../../shared/errors'
import { parseIdList } from '../../shared/id-list'
import type { PriceSnapshot } from '../snapshot/snapshot'
import { type BulkPriceRow, MAX_BULK_PRICE_IDS, type MoverDirection, type MoverPeriod } from './model'

const snapshotMeta = (snapshot: PriceSnapshot) => ({ snapshot_version: snapshot.version, as_of: snapshot.asOf })

/** Bulk price rows for the ids, in request order, from the snapshot's ready-made JSON; unknown ids in `meta.not_found`. */
export function bulkPrices(snapshot: PriceSnapshot, rawIds: string) {
  const ids = parseIdList(rawIds, MAX_BULK_PRICE_IDS)
  const data: BulkPriceRow[] = []
  const json: string[] = []
  const missing: number[] = []
  for (const id of ids) {
    const card = snapshot.card(id)
    if (!card) missing.push(id)
    else {
      data.push(card.bulk)
      json.push(card.bulkJson)
    }
  }
  return {
    data,
    dataJson: `[${json.join(',')}]`,
    meta: { requested: ids.length, found: data.length, not_found: missing, ...snapshotMeta(snapshot) },
  }
}

export function topMovers(
  snapshot: PriceSnapshot,
  query: { game?: string; direction?: MoverDirection; period?: MoverPeriod; printing?: string; type?: string; limit?: number },
) {
  const gameId = query.game === undefined ? undefined : snapshot.gameId(query.game)
  if (query.game !== undefined && gameId === undefined) throw notFound(`Game '${query.game}'`)
  const period = query.period ?? '24h'
  const direction = query.direction ?? 'up'
  const data = snapshot.topMovers({ period, direction, gameId, type: query.type, printing: query.printing, limit: query.limit ?? 20 })
  return { data, meta: { period, direction, count: data.length, ...snapshotMeta(snapshot) } }
}
