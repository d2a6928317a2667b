import { sql } from 'drizzle-orm'
import { date, index, integer, jsonb, pgTable, serial, smallint, text, uniqueIndex } from 'drizzle-orm/pg-core'
import { timestamptz } from './columns'

export const games = pgTable('games', {
  id: serial('id').primaryKey(),
  marketplaceCategoryId: integer('marketplace_category_id').notNull().unique(),
  name: text('name').notNull(),
  slug: text('slug').notNull().unique(),
  /** creature | mana | duel | action | ink | other: decides printing and attribute names. */
  kind: text('kind').notNull(),
  /** Update tier 0..3. */
  priority: smallint('priority').notNull(),
  setCount: integer('set_count').notNull().default(0),
  cardCount: integer('card_count').notNull().default(0),
  lastSyncedAt: timestamptz('last_synced_at'),
  /** The game's image at the marketplace; null when the source has none. */
  imageUrl: text('image_url'),
  /** The game's logo at the marketplace; null when the source has none. */
  logoUrl: text('logo_url'),
})

export const sets = pgTable(
  'sets',
  {
    id: serial('id').primaryKey(),
    gameId: integer('game_id')
      .notNull()
      .references(() => games.id),
    marketplaceGroupId: integer('marketplace_group_id').notNull().unique(),
    name: text('name').notNull(),
    slug: text('slug').notNull(),
    abbreviation: text('abbreviation').notNull(),
    releaseDate: date('release_date', { mode: 'string' }).notNull(),
    cardCount: integer('card_count').notNull().default(0),
    lastSyncedAt: timestamptz('last_synced_at'),
    /** The set's image at the marketplace; null when the source has none. */
    imageUrl: text('image_url'),
    /** The set's icon (its expansion symbol) at the marketplace; null when the source has none. */
    setIconUrl: text('set_icon_url'),
    /**
     * The marketplace's `modifiedOn` of the group when its products were last stored: while the
     * group answers the same value, a sync fetches only its prices. Null: products never stored
     * (or their last fetch failed), so the next sync fetches them.
     */
    productsModifiedOn: text('products_modified_on'),
  },
  (table) => [
    uniqueIndex('sets_game_slug_idx').on(table.gameId, table.slug),
    // Game-sets list order: newest first, id as the tie-break.
    index('sets_game_release_idx').on(table.gameId, table.releaseDate.desc(), table.id),
  ],
)

export const cards = pgTable(
  'cards',
  {
    id: serial('id').primaryKey(),
    setId: integer('set_id')
      .notNull()
      .references(() => sets.id),
    // Denormalised from the set so game filters (search, movers) need no join.
    gameId: integer('game_id')
      .notNull()
      .references(() => games.id),
    marketplaceId: integer('marketplace_id').notNull().unique(),
    name: text('name').notNull(),
    /** Lowercase, accent-free, punctuation-collapsed name: what search matches against. */
    cleanName: text('clean_name').notNull(),
    /** Card number within the set; null for sealed products, which have none. */
    number: text('number'),
    rarity: text('rarity').notNull(),
    imageUrl: text('image_url').notNull(),
    marketplaceUrl: text('marketplace_url').notNull(),
    /** `Cards` or `Sealed Products`. */
    productType: text('product_type').notNull(),
    foilOnly: smallint('foil_only').notNull(),
    /** null when the source does not count listings. */
    totalListings: integer('total_listings'),
    shippingCategoryId: smallint('shipping_category_id').notNull(),
    productStatusId: smallint('product_status_id').notNull(),
    hp: text('hp'),
    customAttributes: jsonb('custom_attributes').$type<Record<string, string | string[]>>().notNull(),
    updatedAt: timestamptz('updated_at').notNull(),
  },
  (table) => [
    index('cards_set_number_idx').on(table.setId, table.number, table.id),
    index('cards_game_type_idx').on(table.gameId, table.productType),
    // Bulk resolve by name: similar names (search is answered from memory, docs/adr/0112-search-in-memory.md).
    index('cards_clean_name_trgm_idx').using('gin', sql`${table.cleanName} gin_trgm_ops`),
    // Bulk resolve by name: exact (cleaned) name lookups.
    index('cards_clean_name_idx').on(table.cleanName),
  ],
)
