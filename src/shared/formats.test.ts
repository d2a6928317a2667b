import { describe, expect, test } from 'bun:test'
import { FormatRegistry } from '@sinclair/typebox'
import { freshDatabase, testLogger } from '../../test/helpers/db'
import { startServer } from '../../test/helpers/server'
import { FORMAT_CHECKS } from './formats'

const database = await freshDatabase('empty')

describe('format checks', () => {
  test.each([
    ['date', '2026-11-22', true],
    ['date', '2024-02-29', true],
    ['date', '2026-02-29', false],
    ['date', '2000-02-29', true],
    ['date', '1900-02-29', false],
    ['date', '2026-04-31', false],
    ['date', '2026-12-31', true],
    ['date', '2026-00-10', false],
    ['date', '2026-13-01', false],
    ['date', '2026-11-22T00:00:00Z', false],
    ['date', '26-11-22', false],
    ['date-time', '2026-11-22T01:02:03.456Z', true],
    ['date-time', '2026-11-22T01:02:03+05:30', true],
    ['date-time', '2026-11-22T24:00:00Z', false],
    ['date-time', '2026-11-22T01:02:03', false],
    ['date-time', '2026-11-22', false],
    ['uri', 'https://images.example.com/cards/1.jpg', true],
    ['uri', '/cards/1.jpg', false],
    ['uri', 'not a uri', false],
    ['email', 'collector@example.com', true],
    ['email', 'collector@', false],
    ['email', 'two@at@example.com', false],
  ] as const)('%s: %s → %p', (format, value, valid) => {
    expect(FORMAT_CHECKS[format]!(value)).toBe(valid)
  })
})

test('createApp installs these checks over the ones @elysiajs/openapi registers on import', async () => {
  // The docs plugin is imported by now (the app's module imports it) and has replaced 'date'.
  expect(FormatRegistry.Get('date')).not.toBe(FORMAT_CHECKS.date)
  const server = startServer({ db: database.db, redis: undefined, logger: testLogger })
  expect((await server.get('/health')).status).toBe(200)
  for (const [format, check] of Object.entries(FORMAT_CHECKS)) expect(FormatRegistry.Get(format)).toBe(check)
})
