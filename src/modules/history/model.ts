import { type Static, Type } from '@sinclair/typebox'
import { ListTotal, LiteralUnion, PathParams, QueryInt, QueryParams } from '../../shared/model'
import { ReportedMoney } from '../catalog/model'

/** The spec's History row: one card printing's prices on one day. */
export const HistoryRow = Type.Object(
  {
    date: Type.String({ format: 'date', description: 'YYYY-MM-DD (UTC day)' }),
    printing: Type.String({ examples: ['Normal', 'Holofoil'] }),
    market_price: Type.Number({ description: 'USD; recorded every day' }),
    low_price: ReportedMoney('the lowest listing price that day'),
    avg_sales_price: Type.Union([Type.Number(), Type.Null()], {
      description: 'USD; null means not recorded yet (sales arrive 1 to 3 days late, and only for printings worth 1 USD or more)',
    }),
    sales_volume: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
      description: 'Sales that day; null means not recorded yet, 0 means no sales that day',
    }),
  },
  { description: 'One printing on one day. Rows are sorted oldest first, then by printing.' },
)
export type HistoryRow = Static<typeof HistoryRow>

export const HISTORY_RANGES = ['month', 'quarter', 'year', 'all'] as const
export type HistoryRange = (typeof HISTORY_RANGES)[number]

/** Days each range asks for (docs/adr/0012-history-window.md); null = everything. */
export const RANGE_DAYS: Readonly<Record<HistoryRange, number | null>> = { month: 30, quarter: 90, year: 365, all: null }

export const CardIdParams = PathParams({
  id: QueryInt({ minimum: 1, maximum: 2147483647, description: 'Card id' }),
})

const Printing = Type.String({
  minLength: 1,
  maxLength: 100,
  description: 'Only this printing (exact match, e.g. `Holofoil`); 400 when the card has no such printing',
})

export const HistoryQuery = QueryParams({
  range: Type.Optional(
    LiteralUnion(HISTORY_RANGES, {
      default: 'month',
      description: 'month = 30 days, quarter = 90, year = 365, all = everything; then clipped to the tier window (Free 7 days, Hobby 30, Starter 90, Pro and Business unlimited)',
    }),
  ),
  printing: Type.Optional(Printing),
})
export type HistoryQuery = Static<typeof HistoryQuery>

export const DetailedHistoryQuery = QueryParams({ printing: Type.Optional(Printing) })
export type DetailedHistoryQuery = Static<typeof DetailedHistoryQuery>

const Day = (description: string) => Type.String({ format: 'date', description })
const NullableDay = (description: string) => Type.Union([Day(description), Type.Null()], { description })

export const HistoryMeta = Type.Object(
  {
    range: LiteralUnion(HISTORY_RANGES, { description: 'The range asked for (default month)' }),
    days: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()], {
      description: 'Length of the window applied, in days, today included: the smaller of the range and the tier window; null = no lower bound (full history)',
    }),
    from: NullableDay('First day of the window (included): `to` minus (days − 1); null when the window has no lower bound'),
    to: Day("Last day of the window (included): today's UTC date by the service clock"),
    clipped_to_tier: Type.Boolean({
      description: "true when the tier's history window is shorter than the range asked for, so the window was cut to it",
    }),
    tier_history_days: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()], {
      description: "The caller's tier window in days (Free 7, Hobby 30, Starter 90); null = full history (Pro, Business)",
    }),
    count: Type.Integer({ minimum: 0, description: 'Rows in `data`' }),
    total: ListTotal('Rows in `data` (the same as `count`)'),
  },
  { description: 'The date window applied to this response' },
)
export type HistoryMeta = Static<typeof HistoryMeta>

export const DetailedHistoryMeta = Type.Object(
  {
    count: Type.Integer({ minimum: 0, description: 'Rows in `data`' }),
    total: ListTotal('Rows in `data` (the same as `count`)'),
    first_date: NullableDay('Oldest day in `data`; null when there are no rows'),
    last_date: NullableDay('Newest day in `data`; null when there are no rows'),
    printings: Type.Array(Type.String(), { description: 'The printings present in `data`, sorted' }),
  },
  { description: 'What the full history holds: no date window is applied' },
)
export type DetailedHistoryMeta = Static<typeof DetailedHistoryMeta>
