import { Type } from '@sinclair/typebox'
import type { App } from '../../src/app'
import { KEY_GUARD_ERRORS, withRateLimit } from '../../src/modules/auth/guard'
import { CAPABILITIES } from '../../src/modules/auth/tiers'
import { notFound } from '../../src/shared/errors'
import { QueryInt, QueryParams } from '../../src/shared/model'

const Ok = Type.Object({ data: Type.Object({ ok: Type.Boolean() }) })

/**
 * Stand-in routes for the key-protected endpoints the next issues add: one per capability at
 * `/probe/<capability>`, plus a catalog route with a validated query (`/probe/catalog/check?n=1..10`)
 * and one that always answers 404 (`/probe/catalog/missing`). They use the real guard.
 */
export function withProbes(app: App): App {
  let extended: any = app
  for (const capability of CAPABILITIES) {
    extended = extended.get(`/probe/${capability}`, () => ({ data: { ok: true } }), {
      apiKey: { needs: capability },
      response: { 200: withRateLimit(Ok), ...KEY_GUARD_ERRORS },
    })
  }
  extended = extended
    .get('/probe/catalog/check', () => ({ data: { ok: true } }), {
      apiKey: { needs: 'catalog' },
      query: QueryParams({ n: QueryInt({ minimum: 1, maximum: 10 }) }),
      response: { 200: withRateLimit(Ok), 400: 'Error', ...KEY_GUARD_ERRORS },
    })
    .get(
      '/probe/catalog/missing',
      () => {
        throw notFound('Card 999999')
      },
      { apiKey: { needs: 'catalog' }, response: { 200: withRateLimit(Ok), 404: 'Error', ...KEY_GUARD_ERRORS } },
    )
    .get(
      '/probe/catalog/boom',
      () => {
        throw new Error('boom: an unexpected failure')
      },
      { apiKey: { needs: 'catalog' } },
    )
  return extended
}

/** The capabilities that have a probe route. */
export const probeCapabilities: readonly string[] = CAPABILITIES
