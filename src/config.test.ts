import { describe, expect, test } from 'bun:test'
import { ConfigError, loadConfig } from './config'

describe('loadConfig', () => {
  test('defaults describe the embedded, single-node setup', () => {
    expect(loadConfig({})).toEqual({
      port: 3000,
      host: '0.0.0.0',
      databaseUrl: undefined,
      dataDir: './data',
      redisUrl: undefined,
      redisKeyPrefix: 'tcg:',
      cookieSecure: false,
      maxBodyBytes: 1_048_576,
      requestTimeoutSeconds: 10,
      databaseConnectTimeoutSeconds: 3,
      databaseStatementTimeoutSeconds: 5,
      marketplaceUrl: undefined,
      marketplaceTimeoutMs: 2_000,
      jobsEnabled: true,
      leaderRetrySeconds: 5,
      conditionRecrawlPerMinute: 120,
      webhookSecretKey: undefined,
      webhookAllowPrivateTargets: false,
      logLevel: 'info',
      demoScale: 'small',
    })
  })

  test('reads every variable', () => {
    const config = loadConfig({
      PORT: '8080',
      HOST: '127.0.0.1',
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
    expect(config).toMatchObject({ port: 8080, host: '127.0.0.1', databaseUrl: 'postgres://u@db:5432/tcg', redisUrl: 'redis://cache:6379', logLevel: 'debug', demoScale: 'large' })
    expect(config).toMatchObject({ maxBodyBytes: 2_097_152, requestTimeoutSeconds: 30, databaseConnectTimeoutSeconds: 2, databaseStatementTimeoutSeconds: 15 })
    expect(config).toMatchObject({ marketplaceUrl: 'https://marketplace.example/api', marketplaceTimeoutMs: 500, jobsEnabled: false, leaderRetrySeconds: 2, conditionRecrawlPerMinute: 0 })
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
    expect((error as Error).message.split('\n').slice(1).map((line) => line.trim())).toEqual([
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
    for (const [value, secure] of [['true', true], ['1', true], ['false', false], ['0', false]] as const) {
      expect(loadConfig({ COOKIE_SECURE: value }).cookieSecure).toBe(secure)
    }
  })
})
