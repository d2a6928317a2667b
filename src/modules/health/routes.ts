import { Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { type Clock, withTimeout } from '../../shared/clock'
import { LiteralUnion } from '../../shared/model'
import { SOURCE_NAMES } from '../ingest/source'
import { rssMb, type SnapshotStatus } from '../snapshot/store'
import { type HealthDeps, readDataState } from './service'

const Check = Type.Union([Type.Literal('ok'), Type.Literal('empty'), Type.Literal('error'), Type.Literal('not_configured')])

const Readiness = Type.Object({
  status: Type.Union([Type.Literal('ready'), Type.Literal('degraded'), Type.Literal('not_ready')], {
    description: '`degraded`: serving, but Redis or the database fails (`checks` says which)',
  }),
  checks: Type.Object({
    database: Check,
    data: Check,
    redis: Check,
    quota: Type.Union([Type.Literal('shared'), Type.Literal('local'), Type.Literal('degraded')], {
      description: 'shared: Redis counters; local: no Redis configured (one node); degraded: Redis configured but failing',
    }),
  }),
  snapshot: Type.Union(
    [
      Type.Object({
        version: Type.String(),
        source: Type.Union([Type.Literal('postgres'), Type.Literal('redis')], {
          description: 'Where its rows came from: Postgres, or the copy another node left in Redis',
        }),
        built_at: Type.String({ format: 'date-time' }),
        age_seconds: Type.Integer({ minimum: 0 }),
        build_ms: Type.Integer({ minimum: 0, description: 'From the build start until its prices were in service, ms' }),
        cards: Type.Integer({ minimum: 0 }),
        prices: Type.Integer({ minimum: 0 }),
        search_index_ms: Type.Integer({ minimum: 0, description: "The search index's build after the prices were in service, ms" }),
        search_version: Type.String({
          description: 'The snapshot search and autocomplete answer from: `version`, or the one before while the new search index is built',
        }),
        search_index_bytes: Type.Integer({ minimum: 0, description: "The search index's size in memory (its arrays and strings, estimated), bytes" }),
        search_index_words: Type.Integer({ minimum: 0, description: 'Distinct words of the card names the search index holds' }),
      }),
      Type.Null(),
    ],
    { description: 'The price snapshot in service (card prices, bulk prices, top movers, search); null until the first one is built' },
  ),
  memory: Type.Object(
    { rss_mb: Type.Integer({ minimum: 0, description: "The process's resident set size now, MB (2^20 bytes)" }) },
    { description: "This node's memory: what an orchestrator's memory limit is compared with" },
  ),
  jobs: Type.Object(
    {
      leader: Type.Boolean({ description: 'Whether this node leads the scheduled jobs (syncs, condition re-crawl); one node leads' }),
      last_sync: Type.Object(
        Object.fromEntries(
          [3, 2, 1, 0].map((tier) => [
            `tier_${tier}`,
            Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
              description: `Tier ${tier}: when its least recently synced game was last synced; null when one never was, the tier has no games, or the database does not answer`,
            }),
          ]),
        ),
        { description: 'Per update tier, the instant by which every game of the tier was last synced' },
      ),
    },
    { description: 'The price sync schedule as this node sees it' },
  ),
  source: Type.Object(
    {
      name: LiteralUnion(SOURCE_NAMES, {
        description: "`demo`: generated data; `tcgcsv`: the public TCGplayer catalog through the TCGCSV mirror; `http`: a marketplace speaking this service's own protocol",
      }),
      capabilities: Type.Object(
        {
          listings: Type.Boolean({
            description: 'Live listings per condition. Without them `/v1/cards/{id}/prices/conditions` and `/v1/bulk/conditions` answer 404 `CONDITION_PRICES_UNAVAILABLE`',
          }),
          sales: Type.Boolean({ description: 'Daily sales. Without them `avg_sales_price` and `sales_volume` stay null in prices and history' }),
          past_prices: Type.Boolean({ description: "Prices of past days. Without them history starts at the catalog's first sync" }),
        },
        { description: 'What the source provides; what it lacks is answered as unavailable, never made up' },
      ),
    },
    { description: 'The marketplace source this node reads (MARKETPLACE_SOURCE), the one that filled the catalog' },
  ),
})

const NO_SYNC = { tier_3: null, tier_2: null, tier_1: null, tier_0: null }

/**
 * How long a check may take before it counts as failed: /ready answers within this even while a
 * dependency hangs (a database that accepts connections but never answers), as a load balancer's
 * probe, which gives up after a second or two, needs.
 */
const PROBE_TIMEOUT_MS = 2_000

/** The check's verdict, or 'error' when it throws or is too slow (an unreachable dependency is an answer here). */
export async function probe<T extends string>(clock: Clock, check: () => Promise<T>): Promise<T | 'error'> {
  try {
    return await withTimeout(clock, check(), PROBE_TIMEOUT_MS, () => new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`))
  } catch {
    return 'error'
  }
}

/** Liveness and readiness for load balancers and orchestrators. */
export function healthRoutes(
  deps: HealthDeps & {
    quotaMode: () => 'shared' | 'local' | 'degraded'
    snapshot: () => SnapshotStatus | null
    /** Absent on a node that runs no scheduler (tests): it does not lead. */
    isLeader?: () => boolean
  },
) {
  const { name, capabilities } = deps.source
  const source = { name, capabilities: { listings: capabilities.listings, sales: capabilities.sales, past_prices: capabilities.pastPrices } }
  return new Elysia({ name: 'health-routes' })
    .get('/health', () => ({ status: 'ok' as const }), {
      response: { 200: Type.Object({ status: Type.Literal('ok') }) },
      detail: {
        tags: ['Health'],
        summary: 'Liveness: the process answers',
        description: 'Always `{ status: "ok" }` while the process runs; it checks nothing else. Use `/ready` to decide whether to send traffic.',
      },
    })
    .get(
      '/ready',
      async ({ set }) => {
        let lastSync: Record<string, string | null> = NO_SYNC
        const [data, redis] = await Promise.all([
          probe(deps.clock, async () => {
            const { empty, lastSync: tiers } = await readDataState(deps.db)
            lastSync = tiers
            return empty ? ('empty' as const) : ('ok' as const)
          }),
          deps.redis ? probe(deps.clock, async () => (await deps.redis!.ping(), 'ok' as const)) : ('not_configured' as const),
        ])
        // A database check that timed out may still finish later: what it finds then is not this answer's.
        if (data === 'error') lastSync = NO_SYNC
        const database = data !== 'error'
        const quota = deps.quotaMode()
        // A node with a price snapshot keeps serving through a Redis or database outage (bulk prices,
        // top movers and changes for keys it knows; 503 elsewhere), so it stays in the pool: every
        // node shares the database, and taking them all out would stop what still works.
        const snapshot = deps.snapshot()
        const serving = data !== 'empty' && snapshot !== null
        const degraded = !database || redis === 'error' || quota === 'degraded'
        set.status = serving ? 200 : 503
        return {
          status: !serving ? ('not_ready' as const) : degraded ? ('degraded' as const) : ('ready' as const),
          checks: { database: database ? ('ok' as const) : ('error' as const), data, redis, quota },
          snapshot,
          memory: { rss_mb: rssMb() },
          jobs: { leader: deps.isLeader?.() ?? false, last_sync: lastSync },
          source,
        }
      },
      {
        response: {
          200: Readiness,
          503: Type.Object(Readiness.properties, {
            description: '`not_ready`: the catalog is empty or no snapshot exists yet; `checks` says which',
          }),
        },
        detail: {
          tags: ['Health'],
          summary: 'Readiness: can this node serve?',
          description:
            '200 `ready` when the database answers, the catalog is loaded and the price snapshot is built. 200 `degraded` ' +
            'when the snapshot is built but a dependency fails, and `checks` names it: `redis: error` (quotas are counted on ' +
            'this node until it returns) or `database: error` (the price snapshot routes still answer keys seen within the ' +
            'hour; everything else answers 503 `SERVICE_UNAVAILABLE`). 503 `not_ready` when the catalog is empty or no ' +
            'snapshot exists yet. Each check gives up after 2 s, so this answers within about 2 s even then. `snapshot` ' +
            "gives its version, source, build time and age, and the search index's size; `memory` the process's resident " +
            'set size; `jobs` whether this node leads the scheduled syncs and, per ' +
            'update tier, when its games were last synced. `source` names the marketplace source and what it provides, on ' +
            "which parts of the API depend: without `listings`, condition prices (one card's and bulk) answer 404 " +
            '`CONDITION_PRICES_UNAVAILABLE`; without `sales`, `avg_sales_price` and `sales_volume` stay null; without ' +
            "`past_prices`, history starts at the catalog's first sync. `demo` and `http` provide all three; `tcgcsv` " +
            'has no listings or sales.',
        },
      },
    )
}
