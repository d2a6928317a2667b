/**
 * Where the integration tests run. CI sets both URLs (see .ci/run); without them the suite runs on
 * embedded PGlite and says so, so `npm test` also works on a machine with only Node.js and npm.
 */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL || undefined
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL || undefined

/** The instant the test catalog is seeded at: every date in fixtures derives from it. */
export const TEST_NOW = new Date('2026-11-20T12:00:00.000Z')
