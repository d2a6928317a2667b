/**
 * Key-guarded catalog reads on the `large` demo catalog (204,431 cards; search is judged on a
 * catalog of 100k cards or more, bench/README.md "Budgets"), through the real service with the
 * Redis quota store, loaded through bench/load.ts's `load` (wrk when installed, autocannon otherwise;
 * the output says which), each run a fixed number of requests:
 *
 * - `GET /v1/cards/:id` and `GET /v1/cards/:id/history` (PostgreSQL, across many ids), each against
 *   a bare Bun.serve sending a body of the same size, in the same run: p99 judged.
 * - `GET /v1/search` over a mix of exact names, misspellings (every one of them goes to the fuzzy
 *   pass: no catalog word starts with it), 2-letter prefixes, longer prefixes and two-word queries,
 *   some with a game, type, sort or a deep page; alternating rounds with `GET /v1/cards/:id/prices`
 *   (a keyed read answered from the snapshot) on the same service: p99 at 50 connections and server
 *   CPU per search (the service and PostgreSQL) over the card-prices read's, median round, judged;
 *   each class of the mix alone, and the mix at 10 connections, reported.
 * - `GET /v1/cards/autocomplete` over 2–5 character prefixes, some with a game: p99 at 50
 *   connections judged, CPU per request over the card-prices read's reported.
 *
 *   BENCH_LARGE_DATABASE_URL=postgres://postgres@127.0.0.1:5432/tcg_bench_large \
 *   BENCH_REDIS_URL=redis://127.0.0.1:6379 bun bench/catalog-keyed.bench.ts
 *
 * Seeds the `large` demo catalog on its first run (about 2 minutes). Exits 1 if a budget fails.
 */
import { cpus, loadavg, totalmem } from 'node:os'
import { sql } from 'drizzle-orm'
import { openPostgres } from '../src/db/client'
import { TIER_POLICY } from '../src/modules/auth/tiers'
import { spawnUntilListening } from '../test/helpers/process'
import { benchAccounts, postgresCpuMeter, prepareBenchDatabase, spawnBenchService } from './database'
import { type BenchRequest, keyedRequests, type LoadRun, load, wrkInstalled } from './load'
import { type BudgetRow, reportBudgets } from './report'

const DATABASE_URL = process.env.BENCH_LARGE_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/tcg_bench_large'
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'
/** A fixed count per measured run, on a fresh Business account: never near the quota. */
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 20_000)
/** Warm-up of the PostgreSQL reads, judged on latency alone. */
const WARMUP_REQUESTS = Math.min(5_000, REQUESTS)
/** Warm-up of the CPU comparisons: with 5,000 the JIT was still busy in the first measured run (bench/README.md "Warm-up"). */
const CPU_WARMUP_REQUESTS = Math.min(20_000, REQUESTS)
/** A bound on one run's time, never reached by a healthy run: a run that stops at it short of its count fails. */
const RUN_SECONDS_LIMIT = 120
/** Alternating card-prices and search runs; the CPU budget is judged on the median round. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
if (Math.max(REQUESTS, CPU_WARMUP_REQUESTS) > TIER_POLICY.business.dailyQuota) throw new Error('BENCH_REQUESTS exceeds the business quota')
/** bench/README.md "Budgets". */
const SEARCH_P99_MS = 10
const SEARCH_CPU_RATIO = 3
const AUTOCOMPLETE_P99_MS = 5
const SAMPLED_NAMES = 80
/** Prefixes far from the first page: page 20 of 50 starts at the 951st match. */
const DEEP_PAGE = 20

console.error('preparing the database')
const postgresVersion = await prepareBenchDatabase(DATABASE_URL, 'large')
console.error('database ready')
const database = await openPostgres(DATABASE_URL, { max: 2 })
const select = async <T>(query: ReturnType<typeof sql>) => (await database.db.execute(query)) as unknown as T[]
const [{ n: cardCount }] = (await select<{ n: number }>(sql`select count(*)::int as n from cards`)) as [{ n: number }]
// Ids spread over the whole table.
const cardIds = (await select<{ id: number }>(sql`select id from cards order by random() limit 500`)).map((r) => r.id)
const sampled = await select<{ name: string; clean_name: string; slug: string }>(
  sql`select c.name, c.clean_name, g.slug from cards c join games g on g.id = c.game_id where c.product_type = 'Cards' order by random() limit ${SAMPLED_NAMES}`,
)
// Every word of every name, sorted: a misspelling is kept only when no word starts with it, so it goes to the fuzzy pass.
const dictionary = (await select<{ word: string }>(sql`select distinct unnest(string_to_array(clean_name, ' ')) as word from cards`)).map((r) => r.word).sort()
function startsAWord(prefix: string): boolean {
  let low = 0
  let high = dictionary.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if (dictionary[middle]! < prefix) low = middle + 1
    else high = middle
  }
  return dictionary[low]?.startsWith(prefix) ?? false
}
/** A typo of a word of 5 letters or more: two letters swapped, one dropped or one doubled, whichever no catalog word starts with. */
function misspell(word: string): string | undefined {
  if (word.length < 5) return undefined
  const candidates = [word.slice(0, 2) + word[3] + word[2] + word.slice(4), word.slice(0, 2) + word.slice(3), word.slice(0, 3) + word[2] + word.slice(3)]
  return candidates.find((candidate) => candidate !== word && !startsAWord(candidate))
}

type SearchClass = 'exact name' | 'misspelling' | '2-letter prefix' | 'longer prefix' | 'two words'
const PLURAL: Record<SearchClass, string> = {
  'exact name': 'exact names',
  misspelling: 'misspellings',
  '2-letter prefix': '2-letter prefixes',
  'longer prefix': 'longer prefixes (3 letters or more)',
  'two words': 'two-word queries (a word and a prefix)',
}
interface SearchQuery {
  kind: SearchClass
  q: string
  slug: string
}
const queries: SearchQuery[] = []
for (const { name, clean_name, slug } of sampled) {
  const words = clean_name.split(' ')
  const first = words.find((word) => word.length >= 2)
  if (!first) continue
  queries.push({ kind: 'exact name', q: name, slug }, { kind: '2-letter prefix', q: first.slice(0, 2), slug })
  if (first.length >= 4) queries.push({ kind: 'longer prefix', q: first.slice(0, Math.max(3, Math.ceil(first.length / 2))), slug })
  const longest = words.filter((word) => /\p{Letter}/u.test(word)).toSorted((a, b) => b.length - a.length)[0] ?? ''
  const typo = misspell(longest)
  if (typo) queries.push({ kind: 'misspelling', q: typo, slug })
  if (words.length >= 2) queries.push({ kind: 'two words', q: `${words[0]} ${words[1]!.slice(0, Math.max(2, Math.ceil(words[1]!.length / 2)))}`, slug })
}
// The prefixes a type-ahead box sends first, whatever the sample drew.
for (const q of ['ch', 'pi', 'dr', 'bl', 'th']) queries.push({ kind: '2-letter prefix', q, slug: sampled[0]!.slug })

/** Filters, sorts and deep pages spread over each class by its own count, so every class gets some of each. */
const seen = new Map<SearchClass, number>()
const searchPaths = queries.map(({ kind, q, slug }) => {
  const j = seen.get(kind) ?? 0
  seen.set(kind, j + 1)
  const params = new URLSearchParams({ q })
  if (j % 4 === 1) params.set('game', slug)
  if (j % 5 === 2) params.set('type', 'Cards')
  if (j % 6 === 3) params.set('sort', 'price_asc')
  if (j % 6 === 4) params.set('sort', 'price_desc')
  if (j % 12 === 5) params.set('sort', 'name')
  if ((kind === '2-letter prefix' || kind === 'longer prefix') && j % 10 === 7) params.set('page', String(DEEP_PAGE))
  return `/v1/search?${params}`
})

// Autocomplete: 2 to 5 characters of a word of a sampled name, some within the card's game.
const autocompletePaths = sampled.flatMap(({ clean_name, slug }, i) => {
  const words = clean_name.split(' ').filter((word) => word.length >= 2)
  const word = words[i % Math.max(1, words.length)]
  if (!word) return []
  const q = word.slice(0, 2 + (i % 4))
  return [`/v1/cards/autocomplete?${new URLSearchParams(i % 3 === 1 ? { q, game: slug } : { q })}`]
})

/** `BENCH_ONLY=history` runs only the scenarios whose name ends with it (`:id`, `history`, `search`, `autocomplete`). */
const ONLY = process.env.BENCH_ONLY
const runs = (name: string) => !ONLY || name.endsWith(ONLY)

const { freshKey, redisPrefix, cleanup } = benchAccounts(database.db, 'catalog')

const median = <T>(values: T[], by: (value: T) => number) => values.toSorted((a, b) => by(a) - by(b))[Math.floor((values.length - 1) / 2)]!
const us = (value: number) => value.toFixed(1)
const percent = (share: number) => `${(share * 100).toFixed(1)}%`
const count = (n: number) => n.toLocaleString('en-US')
/** wrk measures latency in microseconds, autocannon in whole milliseconds: each printed to what it resolves. */
const TOOL = wrkInstalled() ? 'wrk' : 'autocannon'
const ms = (value: number) => (TOOL === 'wrk' ? value.toFixed(2) : String(value))

console.error('starting the service')
const loadBefore = loadavg()
const rows: string[] = []
const notes: string[] = []
const budgets: BudgetRow[] = []
const app = await spawnBenchService(DATABASE_URL, REDIS_URL, redisPrefix)

/**
 * A run with PostgreSQL's CPU per request beside the server's: the reads from PostgreSQL spend much of
 * their CPU there, and a ratio of the service's process alone would flatter them. Every PostgreSQL
 * process on the machine counts, so nothing else may use it meanwhile (bench/README.md); what else
 * ran (the machine's busy CPU less the service's, PostgreSQL's and the client's, in cores) is printed.
 */
type Run = LoadRun & { postgresPerRequestUs: number; totalPerRequestUs: number; otherCores: number }
async function run(server: { url: string; child: { pid: number } }, requests: BenchRequest[], amount: number, connections: number): Promise<Run> {
  const postgresCpu = postgresCpuMeter()
  const measured = await load({ url: server.url, pid: server.child.pid, requests, connections, seconds: RUN_SECONDS_LIMIT, maxRequests: amount })
  if (!measured.capped) throw new Error(`${server.url}: ${measured.requests} of ${amount} requests in ${RUN_SECONDS_LIMIT} s`)
  const postgresSeconds = postgresCpu()
  const postgresPerRequestUs = (postgresSeconds / measured.requests) * 1e6
  const others = measured.machineBusySeconds - (measured.cpuPerRequestUs * measured.requests) / 1e6 - postgresSeconds - measured.clientCpuSeconds
  return { ...measured, postgresPerRequestUs, totalPerRequestUs: measured.cpuPerRequestUs + postgresPerRequestUs, otherCores: Math.max(0, others) / measured.seconds }
}

function row(name: string, connections: number, distinct: number, ours: Run, p99: string, yardstick: string, theirs: Run, ratio: string) {
  rows.push(
    `| ${name} | ${connections} | ${distinct} | ${ms(ours.p50)} | ${p99} | ${Math.round(ours.rps)} | ${yardstick} | ${Math.round(theirs.rps)} | ${ms(theirs.p99)} | ` +
      `${us(ours.cpuPerRequestUs)} / ${us(theirs.cpuPerRequestUs)} | ${us(ours.postgresPerRequestUs)} / ${us(theirs.postgresPerRequestUs)} | ${ratio} | ` +
      `${percent(ours.steal)} / ${percent(theirs.steal)} | ${ours.otherCores.toFixed(2)} / ${theirs.otherCores.toFixed(2)} |`,
  )
}

/** The PostgreSQL reads against a bare Bun.serve sending one of their responses (the same bytes): p99 judged. */
async function againstBareServer(name: string, paths: string[], p99Ms: number) {
  console.error(`${name}: preparing`)
  const key = await freshKey()
  const sample = await fetch(app.url + paths[0], { headers: { 'x-api-key': key } })
  if (sample.status !== 200) throw new Error(`${name}: ${sample.status} ${await sample.text()}`)
  const bodyFile = `/tmp/tcg-bench-${process.pid}-${rows.length}.json`
  await Bun.write(bodyFile, await sample.arrayBuffer())
  const baseline = await spawnUntilListening(['bench/baseline-server.ts', bodyFile, '0'], process.env)
  try {
    await run(baseline, [{ path: '/' }], WARMUP_REQUESTS, 50)
    const bare = await run(baseline, [{ path: '/' }], REQUESTS, 50)
    console.error(`${name}: baseline done, loading the service`)
    const requests = keyedRequests(paths, [key])
    await run(app, requests, WARMUP_REQUESTS, 50)
    const ours = await run(app, requests, REQUESTS, 50)
    row(name, 50, paths.length, ours, ms(ours.p99), 'bare Bun.serve, same bytes', bare, (ours.totalPerRequestUs / bare.totalPerRequestUs).toFixed(1))
    budgets.push({
      bench: 'catalog-keyed',
      measure: `${name}: latency at 50 connections (${TOOL})`,
      value: `${ms(ours.p99)} ms p99`,
      budget: `≤ ${p99Ms} ms p99`,
      pass: ours.p99 <= p99Ms,
    })
  } finally {
    baseline.child.kill()
  }
}

/** Every distinct request once, before the load: each must answer 200; returns meta.total (search) or the names' count (autocomplete). */
async function probe(paths: string[]): Promise<number[]> {
  const key = await freshKey()
  const sizes: number[] = []
  for (let i = 0; i < paths.length; i += 10) {
    const batch = await Promise.all(
      paths.slice(i, i + 10).map(async (path) => {
        const response = await fetch(app.url + path, { headers: { 'x-api-key': key } })
        if (response.status !== 200) throw new Error(`${path}: ${response.status} ${await response.text()}`)
        const body = (await response.json()) as { data: unknown[]; meta?: { total?: number } }
        return body.meta?.total ?? body.data.length
      }),
    )
    sizes.push(...batch)
  }
  return sizes
}

const PRICES = 'GET /v1/cards/:id/prices'
const pricePaths = cardIds.map((id) => `/v1/cards/${id}/prices`)
/** A run of `paths` on a fresh account (no run nears the quota). */
const keyedRun = async (paths: string[], amount: number, connections: number) => run(app, keyedRequests(paths, [await freshKey()]), amount, connections)

/**
 * A route answered from memory against the keyed card-prices read on the same service: alternating
 * rounds at 50 connections, the round with the median CPU ratio reported, p99 the median of the rounds'.
 */
async function againstCardPrices(name: string, paths: string[], p99Ms: number, cpuRatio: number | undefined) {
  console.error(`${name}: warming up`)
  await keyedRun(pricePaths, CPU_WARMUP_REQUESTS, 50)
  await keyedRun(paths, CPU_WARMUP_REQUESTS, 50)
  const rounds: { prices: Run; ours: Run; ratio: number }[] = []
  for (let round = 1; round <= ROUNDS; round++) {
    const prices = await keyedRun(pricePaths, REQUESTS, 50)
    const ours = await keyedRun(paths, REQUESTS, 50)
    rounds.push({ prices, ours, ratio: ours.totalPerRequestUs / prices.totalPerRequestUs })
    console.error(
      `${name}: round ${round} of ${ROUNDS}, p99 ${ms(ours.p99)} ms, server CPU per request ${rounds.at(-1)!.ratio.toFixed(2)}× the card-prices read's, ` +
        `other processes ${ours.otherCores.toFixed(2)} cores`,
    )
  }
  const { prices, ours, ratio } = median(rounds, (r) => r.ratio)
  const p99 = median(rounds, (r) => r.ours.p99).ours.p99
  const ratios = rounds.map((r) => r.ratio)
  const spread = `${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}`
  const roundsP99 = rounds.map((r) => ms(r.ours.p99)).join(', ')
  // The yardstick's own tail on the same server in the same rounds: what any kept answer's p99 is here (docs/adr/0129-the-rebuild-s-peak-and-the-type-ahead-s-tail.md).
  const pricesP99 = median(rounds, (r) => r.prices.p99).prices.p99
  row(name, 50, paths.length, ours, `${ms(p99)} (${roundsP99})`, PRICES, prices, `${ratio.toFixed(2)} (${spread})`)
  budgets.push(
    {
      bench: 'catalog-keyed',
      measure: `${name}: latency at 50 connections (${TOOL}), median of ${ROUNDS} rounds`,
      value: `${ms(p99)} ms p99 (rounds ${roundsP99})`,
      budget: `≤ ${p99Ms} ms p99`,
      pass: p99 <= p99Ms,
    },
    {
      bench: 'catalog-keyed',
      measure: `${name}: ${PRICES}'s latency in the same rounds (${TOOL}, 50 connections), median of ${ROUNDS} rounds`,
      value: `${ms(pricesP99)} ms p99 (rounds ${rounds.map((r) => ms(r.prices.p99)).join(', ')})`,
      budget: 'reported',
    },
    {
      bench: 'catalog-keyed',
      measure: `${name}: server CPU per request (the service and PostgreSQL) / ${PRICES}'s on the same service, median of ${ROUNDS} rounds`,
      value: `${ratio.toFixed(2)}× (${us(ours.totalPerRequestUs)} / ${us(prices.totalPerRequestUs)} µs, of which PostgreSQL ${us(ours.postgresPerRequestUs)} / ${us(prices.postgresPerRequestUs)}; rounds ${spread})`,
      budget: cpuRatio === undefined ? 'reported' : `≤ ${cpuRatio}×`,
      pass: cpuRatio === undefined ? undefined : ratio <= cpuRatio,
    },
  )
  return prices
}

try {
  if (runs('GET /v1/cards/:id'))
    await againstBareServer(
      'GET /v1/cards/:id',
      cardIds.map((id) => `/v1/cards/${id}`),
      20,
    )
  if (runs('GET /v1/cards/:id/history'))
    await againstBareServer(
      'GET /v1/cards/:id/history',
      cardIds.map((id) => `/v1/cards/${id}/history`),
      20,
    )

  if (runs('GET /v1/search')) {
    const name = 'GET /v1/search'
    console.error(`${name}: probing ${searchPaths.length} distinct requests`)
    const totals = await probe(searchPaths)
    const classes = [...seen.keys()].map((kind) => {
      const matches = queries.flatMap((query, i) => (query.kind === kind ? [totals[i]!] : []))
      const sorted = matches.toSorted((a, b) => a - b)
      return `${matches.length} ${PLURAL[kind]} (matches: median ${count(median(sorted, (n) => n))}, ${count(sorted[0]!)}–${count(sorted.at(-1)!)})`
    })
    const share = (test: (path: string) => boolean) => `${Math.round((100 * searchPaths.filter(test).length) / searchPaths.length)}%`
    notes.push(
      `Search mix, ${searchPaths.length} distinct requests of 50 results per page, taken in turn: ${classes.join(', ')}; ` +
        `${share((p) => p.includes('game='))} with game, ${share((p) => p.includes('type='))} with type=Cards, ` +
        `${share((p) => p.includes('sort='))} sorted by price or name, ${share((p) => p.includes('page='))} on page ${DEEP_PAGE}. ` +
        `Each misspelling is a typo no word of the catalog starts with, so it is answered by the fuzzy pass.`,
    )
    const prices = await againstCardPrices(name, searchPaths, SEARCH_P99_MS, SEARCH_CPU_RATIO)
    // The mix repeats its queries, and a repeat is a kept answer (as the card-prices read's are). What
    // a query costs the first time it is asked: the same queries with page sizes no run used, each once.
    const firstAsks = [47, 48, 49].flatMap((perPage) => searchPaths.map((path) => `${path}&per_page=${perPage}`))
    const cold = await keyedRun(firstAsks, firstAsks.length, 50)
    const coldRatio = cold.totalPerRequestUs / prices.totalPerRequestUs
    row(`${name}, each request asked once`, 50, firstAsks.length, cold, ms(cold.p99), PRICES, prices, coldRatio.toFixed(2))
    budgets.push({
      bench: 'catalog-keyed',
      measure: `${name}: every request a query not asked before (${firstAsks.length} requests, 50 connections): server CPU per request / ${PRICES}'s, and p99`,
      value: `${coldRatio.toFixed(2)}× (${us(cold.totalPerRequestUs)} / ${us(prices.totalPerRequestUs)} µs), ${ms(cold.p99)} ms p99`,
      budget: 'reported',
    })
    // Where the CPU goes: each class of the mix alone (reported in the detail table only).
    for (const kind of seen.keys()) {
      const paths = searchPaths.filter((_, i) => queries[i]!.kind === kind)
      const alone = await keyedRun(paths, Math.ceil(REQUESTS / 4), 50)
      row(`${name}, ${PLURAL[kind]} alone`, 50, paths.length, alone, ms(alone.p99), PRICES, prices, (alone.totalPerRequestUs / prices.totalPerRequestUs).toFixed(2))
    }
    // The former budget's concurrency, reported.
    const atTen = await keyedRun(searchPaths, REQUESTS, 10)
    row(name, 10, searchPaths.length, atTen, ms(atTen.p99), PRICES, prices, (atTen.totalPerRequestUs / prices.totalPerRequestUs).toFixed(2))
    budgets.push({ bench: 'catalog-keyed', measure: `${name}: latency at 10 connections (${TOOL})`, value: `${ms(atTen.p99)} ms p99`, budget: 'reported' })
  }

  if (runs('GET /v1/cards/autocomplete')) {
    const name = 'GET /v1/cards/autocomplete'
    console.error(`${name}: probing ${autocompletePaths.length} distinct requests`)
    const names = await probe(autocompletePaths)
    notes.push(
      `Autocomplete mix, ${autocompletePaths.length} distinct requests: prefixes of 2 to 5 characters of a word of a sampled card name, ` +
        `${autocompletePaths.filter((p) => p.includes('game=')).length} of them within the card's game; names answered: median ${median(names, (n) => n)}, ${Math.min(...names)}–${Math.max(...names)}.`,
    )
    await againstCardPrices(name, autocompletePaths, AUTOCOMPLETE_P99_MS, undefined)
  }
} finally {
  app.child.kill()
  await app.child.exited
  await cleanup(REDIS_URL)
  await database.close()
}

const load1 = (l: number[]) => l.map((n) => n.toFixed(2)).join(' ')
console.log(
  `\n${cpus().length} cores (${cpus()[0]?.model}), ${Math.round(totalmem() / 2 ** 30)} GiB, Bun ${Bun.version}, PostgreSQL ${postgresVersion}, ` +
    `large demo catalog (${cardCount} cards), Redis quota store, load average ${load1(loadBefore)} before / ${load1(loadavg())} after, ` +
    `${REQUESTS} requests per run after ${WARMUP_REQUESTS} warm-up (search and autocomplete: ${CPU_WARMUP_REQUESTS}, then ${ROUNDS} alternating rounds with ${PRICES}, ` +
    `the round with the median CPU ratio reported), every run on a fresh Business account, loaded by ${TOOL} on the same cores ` +
    `(${TOOL === 'wrk' ? 'wrk in its own process, one thread; latency measured in µs, printed in ms' : 'autocannon in this process; latency in whole ms'}); ` +
    `a run stops at its count, with at most one request per connection still in flight\n`,
)
for (const note of notes) console.log(`${note}\n`)
console.log(
  '| path | connections | distinct requests | p50 | p99 | req/s (client on the same cores) | yardstick | yardstick req/s | yardstick p99 | server CPU µs/request, ours / yardstick | PostgreSQL CPU µs/request, ours / yardstick | CPU ratio (server + PostgreSQL) | CPU steal during the run, ours / yardstick | other processes during the run, cores, ours / yardstick |',
)
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|')
for (const line of rows) console.log(line)
console.log('')
process.exit(reportBudgets(budgets) ? 0 : 1)
