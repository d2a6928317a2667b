import { Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { models } from '../../shared/models-plugin'
import { authGuard, KEY_GUARD_ERRORS, withRateLimit } from '../auth/guard'
import type { AuthRuntime } from '../auth/runtime'
import { TIER_POLICY } from '../auth/tiers'
import { CardIdParams, DetailedHistoryMeta, DetailedHistoryQuery, HistoryMeta, HistoryQuery, HistoryRow } from './model'
import { getDetailedHistory, getHistory } from './service'

const tierWindows = Object.values(TIER_POLICY)
  .map((policy) => `${policy.label} ${policy.historyDays === null ? 'full history' : `${policy.historyDays} days`}`)
  .join(', ')

/** Price history of a card: windowed by range and tier, or in full (Pro and Business). */
export function historyRoutes(auth: AuthRuntime) {
  return new Elysia({ name: 'history-routes' })
    .use(models)
    .use(authGuard(auth))
    .model({ HistoryRow })
    .get(
      '/v1/cards/:id/history',
      ({ params, query, apiKey }) =>
        getHistory(auth.db, {
          cardId: params.id,
          range: query.range ?? 'month',
          printing: query.printing,
          policy: apiKey.policy,
          now: apiKey.now,
        }),
      {
        apiKey: { needs: 'catalog' },
        params: CardIdParams,
        query: HistoryQuery,
        response: {
          200: withRateLimit(Type.Object({ data: Type.Array(Type.Ref('HistoryRow')), meta: HistoryMeta })),
          400: 'Error',
          404: 'Error',
          ...KEY_GUARD_ERRORS,
        },
        detail: {
          tags: ['History'],
          summary: "A card's price history",
          description:
            `Daily points per printing, oldest first, every point of the window in one answer (no paging). \`range\` asks for month (30 days), quarter (90), year (365) or all; ` +
            `the tier's window then caps it (${tierWindows}). A window of N days is today's UTC date and the N − 1 days ` +
            'before it; `meta` states the window applied and whether the tier cut it. An unknown `printing` for the card is 400.',
        },
      },
    )
    .get('/v1/cards/:id/history/detailed', ({ params, query }) => getDetailedHistory(auth.db, { cardId: params.id, printing: query.printing }), {
      apiKey: { needs: 'detailed_history' },
      params: CardIdParams,
      query: DetailedHistoryQuery,
      response: {
        200: withRateLimit(Type.Object({ data: Type.Array(Type.Ref('HistoryRow')), meta: DetailedHistoryMeta })),
        400: 'Error',
        404: 'Error',
        ...KEY_GUARD_ERRORS,
      },
      detail: {
        tags: ['History'],
        summary: "A card's full price history (Pro and Business)",
        description:
          'Every recorded point of every printing (or of one, with `printing`), oldest first, in one answer, with no date window: ' +
          '`avg_sales_price` and `sales_volume` are null where sales were not recorded yet, and `sales_volume` is 0 on days ' +
          'without sales. Lower tiers get 403 `TIER_REQUIRED`, which costs no quota.',
      },
    })
}
