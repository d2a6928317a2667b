/**
 * What a 500-id bulk price request costs when answered straight from PostgreSQL, for
 * `snapshot.bench.ts` to show what the price snapshot buys. A bare Bun.serve (no key, no quota,
 * no Elysia) answering `GET /v1/bulk/prices?ids=1,2,3` with one prepared statement through
 * postgres.js (10 connections): per card its primary printing's market_price, low_price,
 * price_change_24h and last_updated_at, and the first foil-type printing's market_price, in the
 * order asked (the printing order of docs/adr/0011-primary-printing.md, as `printingRank` in src/modules/catalog/repo.ts
 * and PRIMARY_PRINTING_FIRST in test/helpers/db.ts). Ids that name no card are left out.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/tcg_bench_large bun bench/bulk-from-postgres-server.ts [port]
 */
import postgres from 'postgres'
import { PRINTINGS_BY_KIND } from '../src/modules/catalog/printings'
import { MAX_BULK_PRICE_IDS } from '../src/modules/prices/model'
import { AppError } from '../src/shared/errors'
import { parseIdList } from '../src/shared/id-list'

const quote = (text: string) => `'${text.replaceAll("'", "''")}'`
// The game kind's printing names in order; a printing the kind does not list comes after them, by name.
const rank =
  'array_position(case g.kind ' +
  Object.entries(PRINTINGS_BY_KIND)
    .map(([kind, names]) => `when ${quote(kind)} then array[${names.map(quote).join(',')}]::text[]`)
    .join(' ') +
  ' end, cp.printing) nulls last, cp.printing'

const BULK_PRICES = `
select c.id as card_id, p.market_price, p.low_price, f.market_price as foil_market_price, p.price_change_24h, p.last_updated_at
from cards c
join games g on g.id = c.game_id
-- An inner join: a card without prices has no row, as the service answers (docs/adr/0047-bulk-price-rows-and-ids-lists.md).
join lateral (
  select cp.market_price, cp.low_price, cp.price_change_24h, cp.last_updated_at
  from card_prices cp where cp.card_id = c.id order by ${rank} limit 1
) p on true
left join lateral (
  select cp.market_price from card_prices cp where cp.card_id = c.id and cp.printing ilike '%foil%' order by ${rank} limit 1
) f on true
where c.id = any($1::int[])`

interface Row {
  card_id: number
  market_price: number | null
  low_price: number | null
  foil_market_price: number | null
  price_change_24h: number | null
  last_updated_at: Date | null
}

const sql = postgres(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/tcg_bench_large', { max: 10, onnotice: () => {} })

const server = Bun.serve({
  port: Number(process.argv[2] ?? 0),
  hostname: '127.0.0.1',
  async fetch(request) {
    const url = new URL(request.url)
    if (url.pathname !== '/v1/bulk/prices') return Response.json({ error: 'not found' }, { status: 404 })
    let ids: number[]
    try {
      ids = parseIdList(url.searchParams.get('ids') ?? '', MAX_BULK_PRICE_IDS)
    } catch (error) {
      if (error instanceof AppError) return Response.json({ error: error.message }, { status: 400 })
      throw error
    }
    const rows = (await sql.unsafe(BULK_PRICES, [ids] as never, { prepare: true })) as unknown as Row[]
    // Request order, as the service answers; the sort is in JS, not in the statement.
    const byId = new Map(rows.map((row) => [row.card_id, row]))
    const data = ids.flatMap((id) => byId.get(id) ?? [])
    return Response.json({ data })
  },
})
console.log(JSON.stringify({ msg: 'listening', url: `http://127.0.0.1:${server.port}` }))
