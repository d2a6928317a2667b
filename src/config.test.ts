import { describe, expect, test } from 'bun:test'
import { DEFAULT_USER_AGENT, loadConfig } from './config'
import { TCGCSV_URL } from './modules/ingest/sources/tcgcsv-url'
import { ConfigError } from './shared/errors'

/** The ConfigError's lines (after its heading), or [] when the environment is accepted. */
function refusals(env: Record<string, string>): string[] {
  try {
    loadConfig(env)
    return []
  } catch (caught) {
    expect(caught).toBeInstanceOf(ConfigError)
    return (caught as Error).message
      .split('\n')
      .slice(1)
      .map((line) => line.trim())
  }
}

describe('loadConfig', () => {
  test('defaults describe the embedded, single-node setup', () => {
    expect(loadConfig({})).toEqual({
      port: 3000,
      host: '127.0.0.1',
      databaseUrl: undefined,
      dataDir: './data',
      redisUrl: undefined,
      redisKeyPrefix: 'tcg:',
      cookieSecure: false,
      trustedProxies: [],
      maxBodyBytes: 1_048_576,
      requestTimeoutSeconds: 10,
      databaseConnectTimeoutSeconds: 3,
      databaseStatementTimeoutSeconds: 5,
      marketplaceSource: 'demo',
      marketplaceUrl: undefined,
      marketplaceTimeoutMs: 2_000,
      marketplaceCategories: undefined,
      marketplacePacingMs: 100,
      marketplaceDailyRequests: 9_000,
      marketplaceUserAgent: DEFAULT_USER_AGENT,
      demoData: true,
      jobsEnabled: true,
      leaderRetrySeconds: 5,
      conditionRecrawlPerMinute: 120,
      webhookSecretKey: undefined,
      webhookSecretKeyFile: undefined,
      webhookAllowPrivateTargets: false,
      logLevel: 'info',
      accessLog: true,
      metricsPort: 9464,
      metricsHost: '127.0.0.1',
      demoScale: 'small',
    })
  })

  test("METRICS_PORT picks the metrics listener's port, 0 turning it off; METRICS_HOST its interface", () => {
    expect(loadConfig({ METRICS_PORT: '0' }).metricsPort).toBe(0)
    expect(loadConfig({ METRICS_PORT: '9100', METRICS_HOST: '0.0.0.0' })).toMatchObject({ metricsPort: 9100, metricsHost: '0.0.0.0' })
    expect(refusals({ METRICS_PORT: '70000' })).toEqual([expect.stringContaining('METRICS_PORT')])
    expect(refusals({ METRICS_PORT: '9.5' })).toEqual([expect.stringContaining('METRICS_PORT')])
  })

  test('TRUSTED_PROXIES: addresses and CIDR ranges, read as ranges; a bad entry stops the start, saying which and why', () => {
    expect(loadConfig({ TRUSTED_PROXIES: ' 10.0.0.7, 172.20.0.0/16,2001:db8::/32 ,::ffff:192.0.2.1' }).trustedProxies).toEqual([
      '10.0.0.7/32',
      '172.20.0.0/16',
      '2001:db8::/32',
      '192.0.2.1/32',
    ])
    expect(loadConfig({ TRUSTED_PROXIES: '' }).trustedProxies).toEqual([])
    const [problem, ...others] = refusals({ TRUSTED_PROXIES: '10.0.0.7,balancer,10.0.0.1/8,0.0.0.0/0,172.20.0.0/33,127.1' })
    expect(others).toEqual([])
    expect(problem).toStartWith('TRUSTED_PROXIES: ')
    expect(problem).not.toContain('"10.0.0.7"')
    for (const wrong of [
      '"balancer" is neither',
      '"10.0.0.1/8" has bits set past its prefix: the range is 10.0.0.0/8',
      '"0.0.0.0/0" would trust every address',
      '"172.20.0.0/33" is neither',
      '"127.1" is neither',
    ]) {
      expect(problem).toContain(wrong)
    }
    expect(problem).toContain('e.g. 10.0.0.7,172.20.0.0/16')
  })

  test('WEBHOOK_SECRET_KEY_FILE names a file holding the key, and excludes WEBHOOK_SECRET_KEY', () => {
    expect(loadConfig({ WEBHOOK_SECRET_KEY_FILE: '/run/secrets/webhook_secret_key' })).toMatchObject({
      webhookSecretKeyFile: '/run/secrets/webhook_secret_key',
      webhookSecretKey: undefined,
    })
    const key = 'q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80='
    const problems = refusals({ WEBHOOK_SECRET_KEY: key, WEBHOOK_SECRET_KEY_FILE: '/run/secrets/webhook_secret_key' })
    expect(problems).toEqual([expect.stringContaining('WEBHOOK_SECRET_KEY_FILE: set together with WEBHOOK_SECRET_KEY; keep one of them')])
    expect(problems.join()).not.toContain(key)
  })

  test('ACCESS_LOG=false turns the access log off', () => {
    expect(loadConfig({ ACCESS_LOG: 'false' }).accessLog).toBe(false)
    expect(loadConfig({ ACCESS_LOG: 'true' }).accessLog).toBe(true)
    expect(refusals({ ACCESS_LOG: 'sometimes' })).toEqual([expect.stringContaining('ACCESS_LOG')])
  })

  test('listens on loopback only unless HOST says otherwise, so the demo account is not on the network', () => {
    expect(loadConfig({}).host).toBe('127.0.0.1')
    expect(loadConfig({ DATABASE_URL: 'postgres://u@db/tcg' }).host).toBe('127.0.0.1')
    expect(loadConfig({ HOST: '0.0.0.0' }).host).toBe('0.0.0.0')
    expect(loadConfig({ HOST: '::' }).host).toBe('::')
  })

  test('reads every variable', () => {
    const config = loadConfig({
      PORT: '8080',
      HOST: '0.0.0.0',
      DATABASE_URL: 'postgres://u@db:5432/tcg',
      DATA_DIR: '/var/tcg',
      REDIS_URL: 'redis://cache:6379',
      LOG_LEVEL: 'debug',
      DEMO_SCALE: 'large',
      MAX_BODY_BYTES: '2097152',
      REQUEST_TIMEOUT_SECONDS: '30',
      DATABASE_CONNECT_TIMEOUT_SECONDS: '2',
      DATABASE_STATEMENT_TIMEOUT_SECONDS: '15',
      MARKETPLACE_URL: 'https://marketplace.example/api',
      MARKETPLACE_TIMEOUT_MS: '500',
      JOBS_ENABLED: 'false',
      LEADER_RETRY_SECONDS: '2',
      CONDITION_RECRAWL_PER_MINUTE: '0',
      WEBHOOK_SECRET_KEY: 'q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80=',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    })
    expect(config).toMatchObject({ port: 8080, host: '0.0.0.0', databaseUrl: 'postgres://u@db:5432/tcg', redisUrl: 'redis://cache:6379', logLevel: 'debug', demoScale: 'large' })
    expect(config).toMatchObject({ maxBodyBytes: 2_097_152, requestTimeoutSeconds: 30, databaseConnectTimeoutSeconds: 2, databaseStatementTimeoutSeconds: 15 })
    expect(config).toMatchObject({ marketplaceSource: 'http', marketplaceUrl: 'https://marketplace.example/api', marketplaceTimeoutMs: 500 })
    expect(config).toMatchObject({ jobsEnabled: false, leaderRetrySeconds: 2, conditionRecrawlPerMinute: 0 })
    expect(config).toMatchObject({ webhookSecretKey: 'q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80=', webhookAllowPrivateTargets: true })
    expect(Object.isFrozen(config)).toBe(true)
  })

  test('a malformed WEBHOOK_SECRET_KEY stops the start, and the message never shows it', () => {
    for (const key of ['too-short', 'q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq8==', `${'A'.repeat(43)}=x`]) {
      let message = ''
      try {
        loadConfig({ WEBHOOK_SECRET_KEY: key })
      } catch (caught) {
        expect(caught).toBeInstanceOf(ConfigError)
        message = (caught as Error).message
      }
      expect(message).toContain(`WEBHOOK_SECRET_KEY=(${key.length} characters, not shown): must be 32 random bytes in base64`)
      expect(message).not.toContain(key)
    }
  })

  test('reports every bad variable at once', () => {
    let error: unknown
    try {
      loadConfig({ PORT: 'eighty', DEMO_SCALE: 'huge', DATABASE_URL: 'mysql://x', LOG_LEVEL: 'loud' })
    } catch (caught) {
      error = caught
    }
    expect(error).toBeInstanceOf(ConfigError)
    const message = (error as Error).message
    for (const name of ['PORT', 'DEMO_SCALE', 'DATABASE_URL', 'LOG_LEVEL']) expect(message).toContain(name)
  })

  test('rejects an out-of-range port', () => {
    expect(() => loadConfig({ PORT: '70000' })).toThrow(/PORT/)
  })

  test('each bad variable says what it accepts: the allowed values, the range or the form', () => {
    let error: unknown
    try {
      loadConfig({
        PORT: '70000',
        DATABASE_URL: 'mysql://x',
        REDIS_URL: 'http://cache:6379',
        REDIS_KEY_PREFIX: 'has spaces',
        COOKIE_SECURE: 'yes',
        LOG_LEVEL: 'loud',
        DEMO_SCALE: 'huge',
      })
    } catch (caught) {
      error = caught
    }
    expect(error).toBeInstanceOf(ConfigError)
    expect(
      (error as Error).message
        .split('\n')
        .slice(1)
        .map((line) => line.trim()),
    ).toEqual([
      'PORT="70000": must be an integer from 0 to 65535',
      'DATABASE_URL="mysql://x": must be a postgres:// or postgresql:// URL',
      'REDIS_URL="http://cache:6379": must be a redis:// or rediss:// URL',
      'REDIS_KEY_PREFIX="has spaces": must be 1 to 64 characters, each a letter, digit, colon, underscore, dot or hyphen',
      'COOKIE_SECURE="yes": must be true or false',
      'LOG_LEVEL="loud": must be one of: debug, info, warn, error, silent',
      'DEMO_SCALE="huge": must be one of: tiny, small, medium, large',
    ])
  })

  test('a port is taken only as written in digits, never truncated', () => {
    for (const port of ['1.5', '1e3', '0x10', '-1', 'eighty']) {
      expect(() => loadConfig({ PORT: port })).toThrow(`PORT="${port}": must be an integer from 0 to 65535`)
    }
    expect(loadConfig({ PORT: '08080' }).port).toBe(8080)
  })

  test('COOKIE_SECURE reads true/false and 1/0', () => {
    for (const [value, secure] of [
      ['true', true],
      ['1', true],
      ['false', false],
      ['0', false],
    ] as const) {
      expect(loadConfig({ COOKIE_SECURE: value }).cookieSecure).toBe(secure)
    }
  })
})

describe('choosing the marketplace source', () => {
  test('demo by default; MARKETPLACE_URL alone means http, as before MARKETPLACE_SOURCE existed', () => {
    expect(loadConfig({})).toMatchObject({ marketplaceSource: 'demo', marketplaceUrl: undefined })
    expect(loadConfig({ MARKETPLACE_URL: 'http://127.0.0.1:4100' })).toMatchObject({
      marketplaceSource: 'http',
      marketplaceUrl: 'http://127.0.0.1:4100',
      marketplaceTimeoutMs: 2_000,
    })
    expect(loadConfig({ MARKETPLACE_SOURCE: 'http', MARKETPLACE_URL: 'https://m.example' })).toMatchObject({ marketplaceSource: 'http', marketplaceUrl: 'https://m.example' })
    // An empty variable is an unset one (as an env file or a compose file leaves it).
    expect(loadConfig({ MARKETPLACE_URL: '' }).marketplaceSource).toBe('demo')
  })

  test('tcgcsv reads the public mirror unless MARKETPLACE_URL names another, with a 30 s timeout and the mirror settings', () => {
    expect(loadConfig({ MARKETPLACE_SOURCE: 'tcgcsv' })).toMatchObject({
      marketplaceSource: 'tcgcsv',
      marketplaceUrl: TCGCSV_URL,
      marketplaceTimeoutMs: 30_000,
      marketplaceCategories: undefined,
      marketplacePacingMs: 100,
      marketplaceDailyRequests: 9_000,
      marketplaceUserAgent: DEFAULT_USER_AGENT,
    })
    expect(
      loadConfig({
        MARKETPLACE_SOURCE: 'tcgcsv',
        MARKETPLACE_URL: 'http://127.0.0.1:4200/mirror',
        MARKETPLACE_TIMEOUT_MS: '45000',
        MARKETPLACE_CATEGORIES: '3, 1,68,3',
        MARKETPLACE_PACING_MS: '0',
        MARKETPLACE_DAILY_REQUESTS: '500',
        MARKETPLACE_USER_AGENT: 'card-shop-prices/2.1 (ops@shop.example)',
      }),
    ).toMatchObject({
      marketplaceUrl: 'http://127.0.0.1:4200/mirror',
      marketplaceTimeoutMs: 45_000,
      marketplaceCategories: [3, 1, 68],
      marketplacePacingMs: 0,
      marketplaceDailyRequests: 500,
      marketplaceUserAgent: 'card-shop-prices/2.1 (ops@shop.example)',
    })
  })

  test('the default User-Agent names this service and its version, never a generic client', () => {
    expect(DEFAULT_USER_AGENT).toMatch(/^tcg-price-api\/\d+\.\d+\.\d+ \(.+\)$/)
  })

  test('DEMO_DATA defaults to on in embedded mode and off with DATABASE_URL; either can be said outright', () => {
    expect(loadConfig({}).demoData).toBe(true)
    expect(loadConfig({ DATABASE_URL: 'postgres://u@db/tcg' }).demoData).toBe(false)
    expect(loadConfig({ DATABASE_URL: 'postgres://u@db/tcg', DEMO_DATA: 'true' }).demoData).toBe(true)
    expect(loadConfig({ DEMO_DATA: 'false' }).demoData).toBe(false)
    expect(loadConfig({ MARKETPLACE_SOURCE: 'tcgcsv', DEMO_DATA: 'false' }).demoData).toBe(false)
  })

  test('a source contradicted by another variable is refused, saying which variable to drop or set', () => {
    expect(refusals({ MARKETPLACE_SOURCE: 'http' })).toEqual([
      'MARKETPLACE_URL: must be set when MARKETPLACE_SOURCE is http (the marketplace speaking the protocol of src/modules/ingest/sources/serve.ts)',
    ])
    expect(refusals({ MARKETPLACE_SOURCE: 'demo', MARKETPLACE_URL: 'https://user:secret@m.example' })).toEqual([
      'MARKETPLACE_URL: the demo source reads no URL; drop MARKETPLACE_URL, or set MARKETPLACE_SOURCE to http or tcgcsv',
    ])
    expect(refusals({ MARKETPLACE_URL: 'https://m.example', MARKETPLACE_CATEGORIES: '1' })).toEqual([
      'MARKETPLACE_CATEGORIES: only the tcgcsv source takes it, and MARKETPLACE_SOURCE is http; drop it',
    ])
    expect(refusals({ MARKETPLACE_CATEGORIES: '1' })).toEqual(['MARKETPLACE_CATEGORIES: only the tcgcsv source takes it, and MARKETPLACE_SOURCE is demo; drop it'])
    expect(refusals({ MARKETPLACE_SOURCE: 'tcgcsv', DEMO_DATA: 'true' })).toEqual([
      'DEMO_DATA=true: asks for generated demo data, but MARKETPLACE_SOURCE is tcgcsv; drop DEMO_DATA',
    ])
    // The mirror's pacing, budget and agent are tuning, harmless under another source.
    expect(refusals({ MARKETPLACE_PACING_MS: '50', MARKETPLACE_DAILY_REQUESTS: '10', MARKETPLACE_USER_AGENT: 'x/1' })).toEqual([])
  })

  test('the URL is never echoed in a refusal: it may carry credentials', () => {
    expect(refusals({ MARKETPLACE_SOURCE: 'demo', MARKETPLACE_URL: 'https://user:secret@m.example' }).join('\n')).not.toContain('secret')
  })

  test('each new variable out of its range or form is refused with what it accepts, all at once', () => {
    expect(
      refusals({
        MARKETPLACE_SOURCE: 'tcgplayer',
        MARKETPLACE_TIMEOUT_MS: '10',
        MARKETPLACE_CATEGORIES: '1,0,x',
        MARKETPLACE_PACING_MS: '10001',
        MARKETPLACE_DAILY_REQUESTS: '0',
        MARKETPLACE_USER_AGENT: 'bad\u0007agent',
        DEMO_DATA: 'maybe',
      }),
    ).toEqual([
      'MARKETPLACE_SOURCE="tcgplayer": must be one of: demo, tcgcsv, http',
      'MARKETPLACE_TIMEOUT_MS="10": must be an integer from 50 to 60000',
      'MARKETPLACE_CATEGORIES="1,0,x": must be positive category ids separated by commas, e.g. 1,3,68',
      'MARKETPLACE_PACING_MS="10001": must be an integer from 0 to 10000',
      'MARKETPLACE_DAILY_REQUESTS="0": must be an integer from 1 to 1000000',
      'MARKETPLACE_USER_AGENT="bad\\u0007agent": must be 1 to 256 printable ASCII characters naming this client, e.g. my-shop-prices/1.0 (ops@example.com)',
      'DEMO_DATA="maybe": must be true or false',
    ])
    expect(refusals({ MARKETPLACE_DAILY_REQUESTS: '1000001' })).toEqual(['MARKETPLACE_DAILY_REQUESTS="1000001": must be an integer from 1 to 1000000'])
    expect(refusals({ MARKETPLACE_USER_AGENT: 'a'.repeat(257) })[0]).toStartWith('MARKETPLACE_USER_AGENT=')
  })
})
