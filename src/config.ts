import { type Static, type TSchema, Type } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import packageJson from '../package.json' with { type: 'json' }
import { SOURCE_NAMES, type SourceName } from './modules/ingest/source'
import { DEMO_SCALES } from './modules/ingest/sources/demo-scales'
import { TCGCSV_URL } from './modules/ingest/sources/tcgcsv-url'
import { SECRET_KEY_BASE64 } from './modules/webhooks/secret-box'
import { parseTrustedProxies } from './shared/client-address'
import { ConfigError } from './shared/errors'
import { describeExpectation } from './shared/expectation'
import type { LogLevel } from './shared/logger'

/**
 * Sent to the marketplace unless MARKETPLACE_USER_AGENT says otherwise: the TCGCSV mirror refuses
 * generic agents (docs/adr/0098-choosing-the-source.md). An operator adds a contact by setting it.
 */
export const DEFAULT_USER_AGENT = `${packageJson.name}/${packageJson.version} (self-hosted trading card price API)`

/** Per source: the longest one marketplace request may take. tcgcsv's product lists run to megabytes. */
const DEFAULT_TIMEOUT_MS: Record<SourceName, number> = { demo: 2_000, http: 2_000, tcgcsv: 30_000 }

/**
 * The whole environment, parsed once at start: nothing else reads `process.env`, so docs/configuration.md lists every setting.
 * Every bad variable is reported together so a misconfigured deploy fails with one clear message;
 * `expected` words what a pattern accepts, which the schema alone cannot say readably.
 */
const Env = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 3000 }),
  // Loopback unless told otherwise: the embedded quickstart's demo account holds a Business key
  // (docs/adr/0105-listening-on-loopback-by-default.md); the container image sets 0.0.0.0.
  HOST: Type.String({ minLength: 1, default: '127.0.0.1' }),
  DATABASE_URL: Type.Optional(Type.String({ pattern: '^postgres(ql)?://', expected: 'must be a postgres:// or postgresql:// URL' })),
  DATA_DIR: Type.String({ minLength: 1, default: './data' }),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://', expected: 'must be a redis:// or rediss:// URL' })),
  REDIS_KEY_PREFIX: Type.String({
    pattern: '^[A-Za-z0-9:_.-]{1,64}$',
    default: 'tcg:',
    expected: 'must be 1 to 64 characters, each a letter, digit, colon, underscore, dot or hyphen',
  }),
  COOKIE_SECURE: Type.Boolean({ default: false }),
  // Checked entry by entry below (parseTrustedProxies), which says what is wrong with each.
  TRUSTED_PROXIES: Type.String({ default: '' }),
  MAX_BODY_BYTES: Type.Integer({ minimum: 1024, maximum: 67_108_864, default: 1_048_576 }),
  REQUEST_TIMEOUT_SECONDS: Type.Integer({ minimum: 1, maximum: 255, default: 10 }),
  DATABASE_CONNECT_TIMEOUT_SECONDS: Type.Integer({ minimum: 1, maximum: 60, default: 3 }),
  DATABASE_STATEMENT_TIMEOUT_SECONDS: Type.Integer({ minimum: 1, maximum: 600, default: 5 }),
  MARKETPLACE_SOURCE: Type.Optional(Type.Union(SOURCE_NAMES.map((name) => Type.Literal(name)))),
  MARKETPLACE_URL: Type.Optional(Type.String({ pattern: '^https?://', expected: 'must be an http:// or https:// URL' })),
  MARKETPLACE_TIMEOUT_MS: Type.Optional(Type.Integer({ minimum: 50, maximum: 60_000 })),
  MARKETPLACE_CATEGORIES: Type.Optional(
    Type.String({
      pattern: '^ *[1-9][0-9]{0,8} *(, *[1-9][0-9]{0,8} *)*$',
      expected: 'must be positive category ids separated by commas, e.g. 1,3,68',
    }),
  ),
  MARKETPLACE_PACING_MS: Type.Integer({ minimum: 0, maximum: 10_000, default: 100 }),
  MARKETPLACE_DAILY_REQUESTS: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 9_000 }),
  MARKETPLACE_USER_AGENT: Type.String({
    pattern: '^[\\x20-\\x7E]{1,256}$',
    default: DEFAULT_USER_AGENT,
    expected: 'must be 1 to 256 printable ASCII characters naming this client, e.g. my-shop-prices/1.0 (ops@example.com)',
  }),
  DEMO_DATA: Type.Optional(Type.Boolean()),
  JOBS_ENABLED: Type.Boolean({ default: true }),
  LEADER_RETRY_SECONDS: Type.Integer({ minimum: 1, maximum: 60, default: 5 }),
  CONDITION_RECRAWL_PER_MINUTE: Type.Integer({ minimum: 0, maximum: 60_000, default: 120 }),
  WEBHOOK_SECRET_KEY: Type.Optional(
    Type.String({
      // 32 bytes in base64 are 44 characters ending in one '='.
      pattern: SECRET_KEY_BASE64.source,
      secret: true,
      expected: 'must be 32 random bytes in base64 (44 characters), as `openssl rand -base64 32` prints',
    }),
  ),
  // Read at start by loadSecretBox: a Docker or compose secret (/run/secrets/...) rather than a variable.
  WEBHOOK_SECRET_KEY_FILE: Type.Optional(Type.String({ minLength: 1 })),
  WEBHOOK_ALLOW_PRIVATE_TARGETS: Type.Boolean({ default: false }),
  LOG_LEVEL: Type.Union(
    ['debug', 'info', 'warn', 'error', 'silent'].map((level) => Type.Literal(level)),
    { default: 'info' },
  ),
  ACCESS_LOG: Type.Boolean({ default: true }),
  METRICS_PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 9464 }),
  // Loopback unless told otherwise, like HOST: the metrics are for the operator's scraper, not the public.
  METRICS_HOST: Type.String({ minLength: 1, default: '127.0.0.1' }),
  DEMO_SCALE: Type.Union(
    DEMO_SCALES.map((scale) => Type.Literal(scale)),
    { default: 'small' },
  ),
})

export interface Config {
  port: number
  host: string
  /** PostgreSQL when set; embedded PGlite under `dataDir` otherwise. */
  databaseUrl: string | undefined
  dataDir: string
  /** Redis when set; in-process stores otherwise. */
  redisUrl: string | undefined
  /** Namespaces every Redis key and channel, so several deployments (or test runs) can share one Redis. */
  redisKeyPrefix: string
  /** Adds `Secure` to the session cookie: set it whenever the service is reached over HTTPS. */
  cookieSecure: boolean
  /**
   * The proxies (CIDR ranges) whose X-Forwarded-For is believed for the client's address: the load
   * balancer's addresses. Empty: none, the socket's peer is the client (src/shared/client-address.ts).
   */
  trustedProxies: readonly string[]
  /** Larger request bodies are refused with 413 before they are read. */
  maxBodyBytes: number
  /** A connection idle this long (a stalled body, a silent client) is closed. */
  requestTimeoutSeconds: number
  /** PostgreSQL: how long to wait for a connection, and for one statement of a request. */
  databaseConnectTimeoutSeconds: number
  databaseStatementTimeoutSeconds: number
  /**
   * Where catalog and prices come from: the built-in `demo` generator, the `tcgcsv` mirror of the
   * public TCGplayer catalog, or a marketplace speaking the service's own `http` protocol.
   */
  marketplaceSource: SourceName
  /** http: the marketplace's URL; tcgcsv: the mirror's (TCGCSV_URL unless set); demo: undefined. */
  marketplaceUrl: string | undefined
  /** How long one marketplace request may take before it counts as failed (default 2 s; tcgcsv 30 s). */
  marketplaceTimeoutMs: number
  /** tcgcsv: the categories synced; undefined for every category the source supports. */
  marketplaceCategories: number[] | undefined
  /** tcgcsv: the least time between the starts of two requests to the mirror. */
  marketplacePacingMs: number
  /** tcgcsv: requests allowed per UTC day, below the mirror's own limit. */
  marketplaceDailyRequests: number
  /** tcgcsv: the User-Agent sent on every request. */
  marketplaceUserAgent: string
  /**
   * Whether a start with the demo source fills an empty catalog with generated data: by default
   * in embedded mode only, so invented prices never land in a DATABASE_URL database unasked.
   */
  demoData: boolean
  /** Whether this node competes to lead the scheduled jobs (syncs, re-crawl); API-only nodes set false. */
  jobsEnabled: boolean
  /** How often a node that does not lead tries to take the leader lock. */
  leaderRetrySeconds: number
  /** Cards the condition re-crawl refreshes per minute (0: off): bounds the request rate to the marketplace. */
  conditionRecrawlPerMinute: number
  /**
   * The key webhook signing secrets are encrypted under (AES-256-GCM), base64. Unset: the
   * embedded default keeps a generated one in DATA_DIR; with DATABASE_URL, webhooks cannot be created.
   */
  webhookSecretKey: string | undefined
  /** A file holding that key instead (exclusive with `webhookSecretKey`), read by loadSecretBox. */
  webhookSecretKeyFile: string | undefined
  /** Lets webhooks target private, loopback and link-local addresses (local development and tests). */
  webhookAllowPrivateTargets: boolean
  logLevel: LogLevel
  /** One info line per request (docs/adr/0121-request-ids-and-the-access-log.md). */
  accessLog: boolean
  /** The Prometheus metrics' own listener (docs/adr/0122-prometheus-metrics-on-their-own-listener.md); port 0 turns it off. */
  metricsPort: number
  metricsHost: string
  demoScale: Static<typeof Env>['DEMO_SCALE']
}

/** Parses the environment; throws a ConfigError listing every invalid variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Readonly<Config> {
  const raw: Record<string, unknown> = {}
  for (const key of Object.keys(Env.properties)) {
    const value = env[key]
    if (value !== undefined && value !== '') raw[key] = value
  }
  const converted = Value.Convert(Env, Value.Default(Env, { ...raw })) as Record<string, unknown>
  // Convert reads '1.5' and '1e3' as 1: an integer is taken only as written in digits.
  for (const [name, schema] of Object.entries(Env.properties)) {
    const value = raw[name]
    if (schema.type === 'integer' && typeof value === 'string' && !/^\d+$/.test(value)) converted[name] = value
  }
  // One line per variable, saying what it accepts: the allowed values, the range, the form.
  const problems = new Map<string, string>()
  for (const error of Value.Errors(Env, converted)) {
    const name = error.path.slice(1)
    if (problems.has(name)) continue
    const schema: TSchema = Env.properties[name as keyof typeof Env.properties] ?? error.schema
    const expected = typeof schema.expected === 'string' ? schema.expected : describeExpectation(schema, error.message)
    // A secret is never echoed, not even a malformed one: the message lands in logs.
    const shown = schema.secret && typeof raw[name] === 'string' ? `(${raw[name].length} characters, not shown)` : JSON.stringify(raw[name])
    problems.set(name, `${name || '(root)'}=${shown}: ${expected}`)
  }
  const parsed = converted as Static<typeof Env>
  const proxies = parseTrustedProxies(parsed.TRUSTED_PROXIES)
  if (proxies.invalid.length > 0) {
    problems.set('TRUSTED_PROXIES', `TRUSTED_PROXIES: ${proxies.invalid.join('; ')}; it takes IP addresses and CIDR ranges separated by commas, e.g. 10.0.0.7,172.20.0.0/16`)
  }
  if (parsed.WEBHOOK_SECRET_KEY !== undefined && parsed.WEBHOOK_SECRET_KEY_FILE !== undefined) {
    problems.set('WEBHOOK_SECRET_KEY_FILE', 'WEBHOOK_SECRET_KEY_FILE: set together with WEBHOOK_SECRET_KEY; keep one of them (the file for Docker and compose secrets)')
  }
  if (!problems.has('MARKETPLACE_SOURCE')) {
    for (const [name, problem] of sourceProblems(parsed)) if (!problems.has(name)) problems.set(name, problem)
  }
  if (problems.size > 0) {
    throw new ConfigError(`Invalid environment:\n  ${[...problems.values()].join('\n  ')}`)
  }
  const source = marketplaceSourceOf(parsed)
  return Object.freeze({
    port: parsed.PORT,
    host: parsed.HOST,
    databaseUrl: parsed.DATABASE_URL,
    dataDir: parsed.DATA_DIR,
    redisUrl: parsed.REDIS_URL,
    redisKeyPrefix: parsed.REDIS_KEY_PREFIX,
    cookieSecure: parsed.COOKIE_SECURE,
    trustedProxies: Object.freeze(proxies.ranges),
    maxBodyBytes: parsed.MAX_BODY_BYTES,
    requestTimeoutSeconds: parsed.REQUEST_TIMEOUT_SECONDS,
    databaseConnectTimeoutSeconds: parsed.DATABASE_CONNECT_TIMEOUT_SECONDS,
    databaseStatementTimeoutSeconds: parsed.DATABASE_STATEMENT_TIMEOUT_SECONDS,
    marketplaceSource: source,
    marketplaceUrl: source === 'tcgcsv' ? (parsed.MARKETPLACE_URL ?? TCGCSV_URL) : parsed.MARKETPLACE_URL,
    marketplaceTimeoutMs: parsed.MARKETPLACE_TIMEOUT_MS ?? DEFAULT_TIMEOUT_MS[source],
    marketplaceCategories: parsed.MARKETPLACE_CATEGORIES === undefined ? undefined : [...new Set(parsed.MARKETPLACE_CATEGORIES.split(',').map(Number))],
    marketplacePacingMs: parsed.MARKETPLACE_PACING_MS,
    marketplaceDailyRequests: parsed.MARKETPLACE_DAILY_REQUESTS,
    marketplaceUserAgent: parsed.MARKETPLACE_USER_AGENT,
    demoData: parsed.DEMO_DATA ?? parsed.DATABASE_URL === undefined,
    jobsEnabled: parsed.JOBS_ENABLED,
    leaderRetrySeconds: parsed.LEADER_RETRY_SECONDS,
    conditionRecrawlPerMinute: parsed.CONDITION_RECRAWL_PER_MINUTE,
    webhookSecretKey: parsed.WEBHOOK_SECRET_KEY,
    webhookSecretKeyFile: parsed.WEBHOOK_SECRET_KEY_FILE,
    webhookAllowPrivateTargets: parsed.WEBHOOK_ALLOW_PRIVATE_TARGETS,
    logLevel: parsed.LOG_LEVEL as LogLevel,
    accessLog: parsed.ACCESS_LOG,
    metricsPort: parsed.METRICS_PORT,
    metricsHost: parsed.METRICS_HOST,
    demoScale: parsed.DEMO_SCALE,
  })
}

/** MARKETPLACE_SOURCE, or `http` where only MARKETPLACE_URL is set (how deployments chose it before the variable existed). */
function marketplaceSourceOf(env: Static<typeof Env>): SourceName {
  return (env.MARKETPLACE_SOURCE as SourceName | undefined) ?? (env.MARKETPLACE_URL ? 'http' : 'demo')
}

/** The variables that contradict the chosen source, each with what to change. */
function sourceProblems(env: Static<typeof Env>): [string, string][] {
  const source = marketplaceSourceOf(env)
  const problems: [string, string][] = []
  if (source === 'http' && !env.MARKETPLACE_URL) {
    problems.push([
      'MARKETPLACE_URL',
      'MARKETPLACE_URL: must be set when MARKETPLACE_SOURCE is http (the marketplace speaking the protocol of src/modules/ingest/sources/serve.ts)',
    ])
  }
  // The URL is not echoed: it may carry credentials.
  if (source === 'demo' && env.MARKETPLACE_URL) {
    problems.push(['MARKETPLACE_URL', 'MARKETPLACE_URL: the demo source reads no URL; drop MARKETPLACE_URL, or set MARKETPLACE_SOURCE to http or tcgcsv'])
  }
  if (source !== 'tcgcsv' && env.MARKETPLACE_CATEGORIES !== undefined) {
    problems.push(['MARKETPLACE_CATEGORIES', `MARKETPLACE_CATEGORIES: only the tcgcsv source takes it, and MARKETPLACE_SOURCE is ${source}; drop it`])
  }
  if (source !== 'demo' && env.DEMO_DATA === true) {
    problems.push(['DEMO_DATA', `DEMO_DATA=true: asks for generated demo data, but MARKETPLACE_SOURCE is ${source}; drop DEMO_DATA`])
  }
  return problems
}
