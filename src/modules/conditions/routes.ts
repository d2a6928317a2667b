import { Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { models } from '../../shared/models-plugin'
import { authGuard, KEY_GUARD_ERRORS, type KeyAuth, withRateLimit } from '../auth/guard'
import type { AuthRuntime } from '../auth/runtime'
import { TIER_POLICY, TIERS } from '../auth/tiers'
import { IdParams } from '../catalog/model'
import { BulkConditionRow, BulkConditionsMeta, BulkConditionsQuery, ConditionPriceRow, ConditionPricesMeta, ConditionPricesQuery, MAX_BULK_CONDITION_IDS } from './model'
import type { ConditionService, RefreshPayer } from './service'

const allowances = TIERS.filter((tier) => TIER_POLICY[tier].liveRefreshesPerDay > 0)
  .map((tier) => `${TIER_POLICY[tier].label} ${TIER_POLICY[tier].liveRefreshesPerDay.toLocaleString('en-US')}`)
  .join(', ')

/** What both routes say of the marketplace source, which alone decides whether they answer. */
const SOURCE_DEPENDENCE =
  "**Depends on the marketplace source.** Condition prices come only from the source's live listings (`/ready` → " +
  '`source.capabilities.listings`): the `demo` and `http` sources have them, `tcgcsv` has not. A service whose source ' +
  'has none answers every request here with 404 `CONDITION_PRICES_UNAVAILABLE`, whatever the key, costing nothing.'

const CARD_SUMMARY = "A card's prices per printing, condition and language (Pro and Business)"
const BULK_SUMMARY = `Cached condition prices of up to ${MAX_BULK_CONDITION_IDS} cards (Pro and Business)`

/**
 * Both routes under a source without live listings: each request is refused before any key check,
 * quota charge or marketplace call (a key or a tier would not bring what the source lacks), and
 * this service's OpenAPI document says so instead of describing answers it never gives.
 */
function unavailableRoutes(conditions: ConditionService) {
  const refuse = () => {
    throw conditions.unavailable()!
  }
  const hook = (tags: string[], summary: string) => ({
    response: { 404: 'Error' as const },
    detail: {
      tags,
      summary: `${summary}: unavailable here`,
      description: `${conditions.unavailable()!.message}. Every request answers 404 \`CONDITION_PRICES_UNAVAILABLE\`, whatever its key, and costs no quota.\n\n${SOURCE_DEPENDENCE}`,
      'x-error-notes': { '404': 'here only `CONDITION_PRICES_UNAVAILABLE`: the marketplace source has no live listings' },
    },
  })
  return new Elysia({ name: 'condition-routes' })
    .use(models)
    .get('/v1/cards/:id/prices/conditions', refuse, hook(['Cards'], CARD_SUMMARY))
    .get('/v1/bulk/conditions', refuse, hook(['Bulk'], BULK_SUMMARY))
}

/** The account's daily live refresh allowance, counted in the quota store beside its requests. */
function payerOf(auth: AuthRuntime, apiKey: KeyAuth): RefreshPayer {
  return {
    accountId: apiKey.identity.accountId,
    limit: apiKey.policy.liveRefreshesPerDay,
    claim: (claim) => auth.quota.claimLiveRefresh(claim),
    refund: (accountId, now) => auth.quota.refundLiveRefresh(accountId, now),
    recordRefresh: (accountId, at) => auth.usage.recordLiveRefresh(accountId, at),
  }
}

/**
 * Condition prices (Pro and Business): one card's, refreshed live when old, and many cards' cached
 * rows; under a source without live listings, the same paths refusing every request.
 */
export function conditionRoutes(auth: AuthRuntime, conditions: ConditionService) {
  if (conditions.unavailable()) return unavailableRoutes(conditions)
  return new Elysia({ name: 'condition-routes' })
    .use(models)
    .use(authGuard(auth))
    .model({ ConditionPriceRow })
    .get(
      '/v1/cards/:id/prices/conditions',
      ({ params, query, apiKey }) => conditions.cardConditions({ cardId: params.id, printing: query.printing, payer: payerOf(auth, apiKey), now: apiKey.now }),
      {
        apiKey: { needs: 'condition_prices' },
        params: IdParams,
        query: ConditionPricesQuery,
        response: {
          200: withRateLimit(Type.Object({ data: Type.Array(Type.Ref('ConditionPriceRow')), meta: ConditionPricesMeta })),
          400: 'Error',
          404: 'Error',
          ...KEY_GUARD_ERRORS,
        },
        detail: {
          tags: ['Cards'],
          summary: CARD_SUMMARY,
          description:
            "One row per printing × condition × language from the marketplace's live listings, in the card's printing order, then " +
            'Near Mint, Lightly Played, Moderately Played, Heavily Played, Damaged (sealed products: Unopened), then language. ' +
            '`printing` (exact) keeps one printing; one the card lacks is a 400. Rows up to 24 hours old are served from the ' +
            'condition catalog (`meta.cached` true); older ones, or a card never refreshed, trigger a live refresh from the ' +
            `marketplace that costs one of the account's daily live refreshes (${allowances}; reset at 00:00 UTC; ` +
            '`GET /v1/usage` shows them). A live-refreshed answer has `meta.cached` false and `meta.condition_counts`. Over the ' +
            'allowance, or while the marketplace fails (a failed refresh costs nothing), the newest cached rows come back with ' +
            '`meta.stale` true and `meta.stale_reason`; with no cached rows that is 429 `LIVE_FETCH_LIMIT` or 503 ' +
            '`UPSTREAM_UNAVAILABLE`. Like every 429, `LIVE_FETCH_LIMIT` costs no quota unit (`X-RateLimit-Remaining` and ' +
            '`rate_limit` stay as they were) and counts in `rejected_today` of `GET /v1/usage`. Concurrent requests for one card share one refresh; those that waited for it are answered ' +
            'from the catalog and are not charged a live refresh.\n\n' +
            SOURCE_DEPENDENCE,
          'x-error-notes': {
            '429':
              'or `LIVE_FETCH_LIMIT`: the card has no cached condition rows and the daily live refreshes are used up (the message says the allowance and when it resets); it costs no quota unit and counts in `rejected_today`',
            '503': 'or `UPSTREAM_UNAVAILABLE`: the card has no cached condition rows and the marketplace failed or did not answer in time',
          },
        },
      },
    )
    .get('/v1/bulk/conditions', ({ query }) => conditions.bulkConditions(query.ids), {
      apiKey: { needs: 'bulk_conditions' },
      query: BulkConditionsQuery,
      response: {
        200: withRateLimit(Type.Object({ data: Type.Array(BulkConditionRow), meta: BulkConditionsMeta })),
        400: 'Error',
        ...KEY_GUARD_ERRORS,
      },
      detail: {
        tags: ['Bulk'],
        summary: BULK_SUMMARY,
        description:
          `\`ids\`: up to ${MAX_BULK_CONDITION_IDS} comma-separated card ids. The condition rows the catalog holds for each card, ` +
          "with its `name` and `marketplace_id` on every row, cards in the order asked and rows in the order of one card's " +
          'condition prices. Never triggers a live refresh and costs no live refresh: `last_updated_at` says how old each row is. ' +
          'Cards without cached rows are left out and listed in `meta.not_cached`; ids that name no card are in `meta.not_found`.\n\n' +
          SOURCE_DEPENDENCE,
      },
    })
}
