/**
 * The server for auth-overhead.bench.ts: the real app (configured from the environment like
 * src/index.ts: DATABASE_URL, REDIS_URL or none, REDIS_KEY_PREFIX) plus two routes that differ only
 * in the key guard, for two kinds of work: a fixed body (the guard's whole cost shows) and one
 * indexed Postgres read (the work of a real keyed endpoint such as GET /v1/cards/:id/prices).
 * Expects a migrated database; prints one JSON "listening" line with its URL.
 */
import { Type } from '@sinclair/typebox'
import { createApp, stopApp } from '../src/app'
import { loadConfig } from '../src/config'
import { createDeps } from '../src/deps'
import { eq } from 'drizzle-orm'
import { cardPrices } from '../src/db/schema'
import { KEY_GUARD_ERRORS, withRateLimit } from '../src/modules/auth/guard'

// A price row, about the size of what the keyed catalog routes answer per card.
const PriceRow = Type.Object({
  data: Type.Object({
    card_id: Type.Integer(),
    condition: Type.String(),
    market_price: Type.Number(),
    low_price: Type.Number(),
    currency: Type.String(),
    updated_at: Type.String(),
  }),
})
const PRICE = {
  data: { card_id: 4242, condition: 'near_mint', market_price: 12.34, low_price: 10.5, currency: 'USD', updated_at: '2026-11-20T12:00:00.000Z' },
}
const handler = () => PRICE

// The work of a real keyed read (what GET /v1/cards/:id/prices does): one indexed Postgres query.
const PriceRows = Type.Object({
  data: Type.Array(
    Type.Object({ card_id: Type.Integer(), printing: Type.String(), market_price: Type.Union([Type.Number(), Type.Null()]), low_price: Type.Number() }),
  ),
})
const CardParams = Type.Object({ id: Type.Number({ multipleOf: 1, minimum: 1 }) })
const readPrices = async ({ params }: { params: { id: number } }) => {
  const rows = await deps.db
    .select({ card_id: cardPrices.cardId, printing: cardPrices.printing, market_price: cardPrices.marketPrice, low_price: cardPrices.lowPrice })
    .from(cardPrices)
    .where(eq(cardPrices.cardId, params.id))
  return { data: rows }
}

const deps = await createDeps(loadConfig())
// Typed loosely like test/helpers/probes.ts: the guard macro is registered by createApp's auth
// routes at runtime, which the returned app's type does not carry.
const base: any = createApp(deps)
// Both routes have a response schema, so both pay for validation and serialization alike.
const app = base
  .get('/bench/open/fixed', handler, { response: { 200: PriceRow } })
  .get('/bench/keyed/fixed', handler, {
    apiKey: { needs: 'catalog' },
    response: { 200: withRateLimit(PriceRow), ...KEY_GUARD_ERRORS },
  })
  .get('/bench/open/prices/:id', readPrices, { params: CardParams, response: { 200: PriceRows } })
  .get('/bench/keyed/prices/:id', readPrices, {
    apiKey: { needs: 'catalog' },
    params: CardParams,
    response: { 200: withRateLimit(PriceRows), ...KEY_GUARD_ERRORS },
  })
  .listen({ port: 0, hostname: '127.0.0.1' })
console.log(JSON.stringify({ msg: 'listening', url: `http://127.0.0.1:${app.server.port}` }))

// Stopping flushes the usage counters, so the bench can delete its accounts after this exits.
process.on('SIGTERM', async () => {
  await stopApp(app)
  await deps.close()
  process.exit(0)
})
