import type { MarketplaceSource, SourceCapabilities, SourceName } from '../../src/modules/ingest/source'
import { tinySource } from './db'

export const FULL_CAPABILITIES: SourceCapabilities = { listings: true, sales: true, pastPrices: true }
/** What the TCGCSV mirror lacks (docs/adr/0101-real-sources-declare-what-they-lack.md: no listings, no sales). */
export const NO_LISTINGS: SourceCapabilities = { listings: false, sales: false, pastPrices: false }

/**
 * The tiny demo marketplace under another name and capabilities (a stand-in for a real source
 * that tests need not reach), optionally limited to some games, counting the listings asked of it.
 */
export function declaredSource(name: SourceName, capabilities: SourceCapabilities, options: { gameSlugs?: string[] } = {}) {
  const demo = tinySource()
  const asked = { listings: 0 }
  const { gameSlugs } = options
  const source: MarketplaceSource = {
    name,
    capabilities,
    listGames: async () => (await demo.listGames()).filter((game) => !gameSlugs || gameSlugs.includes(game.slug)),
    listSets: (categoryId) => demo.listSets(categoryId),
    listProducts: (groupId) => demo.listProducts(groupId),
    listPrices: (groupId, date) => demo.listPrices(groupId, date),
    listSales: (groupId, date) => demo.listSales(groupId, date),
    listListings: (productId) => {
      asked.listings++
      return demo.listListings(productId)
    },
  }
  return { source, asked }
}
