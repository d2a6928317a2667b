import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { unpack } from 'msgpackr'
import { accountWithKey } from '../../../test/helpers/auth'
import { selectRows } from '../../../test/helpers/db'
import { seededCatalogServer } from '../../../test/helpers/server'

// docs/adr/0083-every-list-answer-counts-its-items.md: every list-like answer's meta carries
// `total`, the number of items in `data` (rows for bulk history, whose data is keyed by card id),
// as the paged lists do. Over real HTTP on the seeded tiny catalog.
const { database, server, proKey } = await seededCatalogServer()
const businessKey = (await accountWithKey(database.db, 'business')).key

const [fixture] = await selectRows<{ card_id: number; set_id: number }>(
  database.db,
  sql`select c.id as card_id, c.set_id from cards c join card_prices cp on cp.card_id = c.id
      group by c.id having count(*) > 1 order by c.id limit 1`,
)
const { card_id: cardId, set_id: setId } = fixture!
const someIds = (await selectRows<{ id: number }>(database.db, sql`select id from cards order by id limit 7`)).map((row) => row.id)

/** Items a `data` counts: an array's length; an object keyed by card id counts its lists' rows. */
const itemsOf = (data: unknown) => (Array.isArray(data) ? data.length : Object.values(data as Record<string, unknown[]>).reduce((n, list) => n + list.length, 0))

const LISTS: [string, string][] = [
  ['card history', `/v1/cards/${cardId}/history`],
  ['card history, all', `/v1/cards/${cardId}/history?range=all`],
  ['detailed history', `/v1/cards/${cardId}/history/detailed`],
  ['top movers', '/v1/prices/top-movers?limit=7'],
  ['price changes', '/v1/prices/changes?since=2026-11-19T00:00:00Z&limit=5'],
  ['bulk prices', `/v1/bulk/prices?ids=${someIds.join(',')}`],
  ['bulk cards', `/v1/bulk/cards?ids=${someIds.join(',')}`],
  ['card condition prices', `/v1/cards/${cardId}/prices/conditions`],
  ['bulk conditions', `/v1/bulk/conditions?ids=${someIds.join(',')}`],
  ['bulk history', `/v1/bulk/history?ids=${someIds.slice(0, 3).join(',')}`],
  ['set prices', `/v1/sets/${setId}/prices`],
  ['set export', `/v1/export/set/${setId}`],
]

describe('meta.total on every list-like answer', () => {
  for (const [name, path] of LISTS) {
    test(`${name}: meta.total is an integer counting the items in data`, async () => {
      const { status, body } = await server.json(path, businessKey)
      expect(status).toBe(200)
      expect(itemsOf(body.data)).toBeGreaterThan(0)
      expect(body.meta.total).toBe(itemsOf(body.data))
    })
  }

  test('the OpenAPI document requires total, an integer, in each of these answers', async () => {
    const doc = (await (await server.get('/openapi.json')).json()) as any
    const resolve = (schema: any): any => (schema?.$ref ? resolve(doc.components.schemas[schema.$ref.split('/').at(-1)]) : schema)
    for (const [name, path] of LISTS) {
      const template = path.split('?')[0]!.replace(/\/\d+(?=\/|$)/g, '/{id}')
      const schema = resolve(doc.paths[template].get.responses['200'].content['application/json'].schema)
      const meta = resolve(schema.properties.meta)
      expect(meta.required, name).toContain('total')
      expect(meta.properties.total.type, name).toBe('integer')
    }
  })

  test('msgpack answers carry the same total; a 304 is still a 304', async () => {
    const path = `/v1/bulk/prices?ids=${someIds.join(',')}`
    const json = await server.json(path, proKey)
    const packed = await server.get(path, { headers: { 'x-api-key': proKey, accept: 'application/msgpack' } })
    const body = unpack(new Uint8Array(await packed.arrayBuffer())) as any
    expect(body.meta.total).toBe(json.body.meta.total)
    expect(body.meta.total).toBe(body.data.length)
    const again = await server.get(path, { headers: { 'x-api-key': proKey, 'if-none-match': json.headers.get('etag')! } })
    expect(again.status).toBe(304)
    const history = await server.get(`/v1/bulk/history?ids=${someIds.slice(0, 3).join(',')}`, { headers: { 'x-api-key': businessKey, accept: 'application/msgpack' } })
    const historyBody = unpack(new Uint8Array(await history.arrayBuffer())) as any
    expect(historyBody.meta.total).toBe(itemsOf(historyBody.data))
  })
})
