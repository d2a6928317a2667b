import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { Webhook } from 'standardwebhooks'
import { systemClock } from '../../shared/clock'
import { newEventId, newSigningSecret, SECRET_PREFIX, signedHeaders } from './signing'

// The oracle is the Standard Webhooks reference library, not our own code: what it verifies,
// any receiver using a Standard Webhooks library verifies.
describe('Standard Webhooks signing', () => {
  test('a secret is whsec_ and 32 random bytes in base64, never the same twice', () => {
    const secrets = new Set(Array.from({ length: 100 }, newSigningSecret))
    expect(secrets.size).toBe(100)
    for (const secret of secrets) {
      expect(secret.startsWith(SECRET_PREFIX)).toBe(true)
      expect(Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64')).toHaveLength(32)
    }
  })

  test('event ids are msg_ and unique', () => {
    const ids = new Set(Array.from({ length: 1000 }, newEventId))
    expect(ids.size).toBe(1000)
    for (const id of ids) expect(id).toMatch(/^msg_[A-Za-z0-9_-]{22}$/)
  })

  test('the reference library verifies every signed body, and refuses any altered part', () => {
    fc.assert(
      fc.property(fc.json({ maxDepth: 3 }), fc.integer({ min: 0, max: 60 }), (body, ageSeconds) => {
        const secret = newSigningSecret()
        const at = new Date(systemClock.now().getTime() - ageSeconds * 1000)
        const headers = signedHeaders(secret, 'msg_abc', at, body)
        expect(headers['webhook-timestamp']).toBe(String(Math.floor(at.getTime() / 1000)))
        expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/)
        const receiver = new Webhook(secret)
        expect(() => receiver.verify(body, headers)).not.toThrow()
        expect(() => receiver.verify(`${body} `, headers)).toThrow()
        expect(() => receiver.verify(body, { ...headers, 'webhook-id': 'msg_other' })).toThrow()
        expect(() => new Webhook(newSigningSecret()).verify(body, headers)).toThrow()
      }),
      { numRuns: 200 },
    )
  })

  test('the timestamp is the attempt’s: the reference library refuses one older than its tolerance', () => {
    const secret = newSigningSecret()
    const headers = signedHeaders(secret, 'msg_old', new Date(systemClock.now().getTime() - 10 * 60_000), '{}')
    expect(() => new Webhook(secret).verify('{}', headers)).toThrow(/timestamp/i)
  })
})
