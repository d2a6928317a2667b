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
    })
    expect(config).toMatchObject({ port: 8080, host: '127.0.0.1', databaseUrl: 'postgres://u@db:5432/tcg', redisUrl: 'redis://cache:6379', logLevel: 'debug', demoScale: 'large' })
    expect(Object.isFrozen(config)).toBe(true)
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
})
