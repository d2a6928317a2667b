import { type Static, Type } from '@sinclair/typebox'
import { Id, LiteralUnion, MAX_ID, PathParams, QueryInt, Timestamp } from '../../shared/model'

// A game's and a set's marketplace identity go beyond the contract (docs/adr/0025-compatibility-superset.md).
const MarketplaceRef = (what: string) => Type.Integer({ minimum: 1, maximum: MAX_ID, description: `The ${what} id at the marketplace` })
const MarketplaceImage = (what: string) =>
  Type.Union([Type.String({ format: 'uri' }), Type.Null()], { description: `The ${what} at the marketplace; null when the marketplace source has none` })

export const Game = Type.Object({
  id: Id,
  name: Type.String({ examples: ['Pokemon'] }),
  slug: Type.String({ description: 'Used in paths and in the `game` filter', examples: ['pokemon'] }),
  priority: Type.Integer({ minimum: 0, maximum: 3, description: 'Update tier, 0 to 3 (3 = daily at 2 AM EST)' }),
  set_count: Type.Integer({ minimum: 0 }),
  card_count: Type.Integer({ minimum: 0, description: 'Cards and sealed products' }),
  last_synced_at: Type.Union([Timestamp, Type.Null()], { description: 'null until the first sync' }),
  marketplace_id: MarketplaceRef("game's category"),
  image_url: MarketplaceImage("game's image"),
  logo_url: MarketplaceImage("game's logo"),
})
export type Game = Static<typeof Game>

/** Items of a game's set list. */
export const SetSummary = Type.Object({
  id: Id,
  name: Type.String({ examples: ['Base Set'] }),
  slug: Type.String({ examples: ['base-set'] }),
  abbreviation: Type.String({ examples: ['BS'] }),
  release_date: Type.String({ format: 'date', description: 'YYYY-MM-DD' }),
  card_count: Type.Integer({ minimum: 0 }),
  last_synced_at: Type.Union([Timestamp, Type.Null()]),
  marketplace_id: MarketplaceRef("set's group"),
  image_url: MarketplaceImage("set's image"),
  set_icon_url: MarketplaceImage("set's icon (its expansion symbol)"),
})
export type SetSummary = Static<typeof SetSummary>

export const GameSlugParams = PathParams({
  slug: Type.String({
    minLength: 1,
    maxLength: 100,
    description: "Game slug, or the game's numeric id: a value of digits only is always read as the id",
    examples: ['pokemon', '3'],
  }),
})

const Money = Type.Number({ description: 'USD' })

/**
 * A price a marketplace source may not report: null then, never a made-up number
 * (docs/adr/0094-a-real-source-s-gaps-are-null.md).
 */
export const ReportedMoney = (meaning: string, alsoNullWhen?: string) =>
  Type.Union([Money, Type.Null()], {
    description: `USD, ${meaning}; null when the marketplace source does not report it${alsoNullWhen ? ` or ${alsoNullWhen}` : ''}`,
  })

const Percent = Type.Union([Type.Number(), Type.Null()], { description: 'Percent change (15.5 = +15.5%); null: not enough data' })
const DateOnly = Type.String({ format: 'date', description: 'YYYY-MM-DD (UTC)' })
export const PRODUCT_TYPES = ['Cards', 'Sealed Products'] as const
const ProductTypeField = LiteralUnion(PRODUCT_TYPES)

const TotalListings = Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
  description: 'Active seller listings; null when the marketplace source does not report it',
})

// docs/adr/0092-sealed-products-have-no-number.md.
const CardNumber = Type.Union([Type.String(), Type.Null()], {
  description: 'Card number within the set; null for sealed products (and a card the marketplace gives no number)',
})

/** A set as `/v1/sets` and `/v1/sets/:id` show it: the summary plus its game. */
export const SetDetail = Type.Object({
  ...SetSummary.properties,
  game_id: Id,
  game_name: Type.String(),
  game_slug: Type.String(),
})
export type SetDetail = Static<typeof SetDetail>

/** The spec's Card (also sealed product). */
export const Card = Type.Object({
  id: Id,
  name: Type.String(),
  clean_name: Type.String({ description: 'Normalized lowercase name' }),
  number: CardNumber,
  rarity: Type.String(),
  image_url: Type.String({ format: 'uri' }),
  marketplace_id: Id,
  marketplace_url: Type.String({ format: 'uri' }),
  product_type: ProductTypeField,
  foil_only: Type.Integer({ minimum: 0, maximum: 1, description: '1 if the card exists only as foil/holo' }),
  total_listings: TotalListings,
  shipping_category_id: Type.Integer({ description: '1 = card, 3 = box, 4 = case' }),
  product_status_id: Type.Integer({ description: '1 = active, 20 = presale' }),
  hp: Type.Optional(Type.String({ description: 'Present for games that have it' })),
  custom_attributes: Type.Record(Type.String(), Type.Union([Type.String(), Type.Array(Type.String())]), {
    description: 'Game-specific attributes (all strings except energyType, an array)',
  }),
  set_id: Id,
  set_name: Type.String(),
  set_slug: Type.String({ description: "The set's slug, for building links" }),
  game_id: Id,
  game_name: Type.String(),
  game_slug: Type.String({ description: "The game's slug, as in `/v1/games/:slug` and the `game` filters" }),
})
export type Card = Static<typeof Card>

/** The spec's Price object, per printing, with card_id (card-prices rows). */
export const Price = Type.Object({
  card_id: Id,
  printing: Type.String(),
  market_price: ReportedMoney('the median of recent sales as last reported (market_price_as_of says when)'),
  market_price_as_of: Type.Union([DateOnly, Type.Null()], {
    description: 'When the marketplace last reported market_price; older than last_updated_at when the printing had no recent market price',
  }),
  low_price: ReportedMoney('the lowest verified listing price'),
  median_price: ReportedMoney('the median listing price across sellers'),
  lowest_with_shipping: ReportedMoney('the lowest price including shipping'),
  buylist_price: ReportedMoney('what stores pay', 'no store buys it'),
  price_change_24h: Percent,
  price_change_7d: Percent,
  price_change_30d: Percent,
  last_updated_at: Timestamp,
  // Pro and up only (docs/adr/0093-sales-in-pro-card-prices.md): absent below Pro, as the public service documents.
  sales_volume: Type.Optional(
    Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
      description: 'Pro and up only (absent below): sales on `sales_as_of`, the newest day with recorded sales; null when none were ever recorded',
    }),
  ),
  avg_sales_price: Type.Optional(
    Type.Union([Type.Number(), Type.Null()], {
      description: 'Pro and up only (absent below): USD, the average sale price on `sales_as_of`; null when none were recorded or that day had no sales',
    }),
  ),
  sales_as_of: Type.Optional(
    Type.Union([DateOnly, Type.Null()], {
      description: 'Pro and up only (absent below): the newest day with recorded sales (sales arrive 1 to 3 days late); null when none were ever recorded',
    }),
  ),
})
export type Price = Static<typeof Price>

/** The Price fields only Pro and up see (docs/adr/0093-sales-in-pro-card-prices.md). */
export const SALES_FIELDS = ['sales_volume', 'avg_sales_price', 'sales_as_of'] as const

/** A Price as Pro and up see it: the sales fields always there. */
export const PriceWithSales = Type.Object(
  { ...Type.Omit(Price, SALES_FIELDS).properties, ...Type.Required(Type.Pick(Price, SALES_FIELDS)).properties },
  { description: 'A Price with its newest recorded sales (Pro and up)' },
)
export type PriceWithSales = Static<typeof PriceWithSales>

/** Lookup by marketplace id: the spec omits card_id and the 7d/30d changes. */
export const MarketplacePrice = Type.Omit(Price, ['card_id', 'price_change_7d', 'price_change_30d', ...SALES_FIELDS])
export type MarketplacePrice = Static<typeof MarketplacePrice>

/** The spec names id, name, foil_only and prices; the public service's clients read the rest of the Card too (docs/adr/0025-compatibility-superset.md). */
export const MarketplaceCard = Type.Object(
  {
    ...Card.properties,
    prices: Type.Array(MarketplacePrice, { description: 'One per printing, primary printing first; without card_id, price_change_7d and price_change_30d' }),
  },
  { description: 'Every field of the Card, with its prices' },
)
export type MarketplaceCard = Static<typeof MarketplaceCard>

/** docs/adr/0041-card-prices-and-card-fields.md: one row per card × printing (set prices, JSON export). */
export const PriceRow = Type.Object({
  card_id: Id,
  name: Type.String(),
  marketplace_id: Id,
  product_type: ProductTypeField,
  foil_only: Type.Integer({ minimum: 0, maximum: 1 }),
  ...Type.Omit(Price, ['card_id', ...SALES_FIELDS]).properties,
  image_url: Type.String({ format: 'uri' }),
})
export type PriceRow = Static<typeof PriceRow>

/** docs/adr/0041-card-prices-and-card-fields.md: a card's summary plus its primary printing's price (set cards, search). */
export const CardWithPrice = Type.Object({
  id: Id,
  name: Type.String(),
  clean_name: Type.String(),
  number: CardNumber,
  rarity: Type.String(),
  marketplace_id: Id,
  product_type: ProductTypeField,
  foil_only: Type.Integer({ minimum: 0, maximum: 1 }),
  total_listings: TotalListings,
  image_url: Type.String({ format: 'uri' }),
  game_name: Type.String(),
  game_slug: Type.String(),
  set_name: Type.String(),
  set_slug: Type.String(),
  printing: Type.Union([Type.String(), Type.Null()], { description: 'The primary printing (Normal when it has one); null: no prices yet' }),
  market_price: ReportedMoney("the primary printing's market price", 'the card has no prices yet'),
  low_price: ReportedMoney("the primary printing's lowest listing price", 'the card has no prices yet'),
  median_price: ReportedMoney("the primary printing's median listing price", 'the card has no prices yet'),
  lowest_with_shipping: ReportedMoney("the primary printing's lowest price including shipping", 'the card has no prices yet'),
  price_updated_at: Type.Union([Timestamp, Type.Null()]),
})
export type CardWithPrice = Static<typeof CardWithPrice>

export const IdParams = PathParams({ id: QueryInt({ minimum: 1, maximum: 2147483647, description: 'Positive integer id' }) })
export const MarketplaceIdParams = PathParams({
  marketplaceId: QueryInt({ minimum: 1, maximum: 2147483647, description: "The marketplace's product id" }),
})

export const SET_CARD_SORTS = ['number', 'name', 'price_asc', 'price_desc'] as const
export type SetCardSort = (typeof SET_CARD_SORTS)[number]
