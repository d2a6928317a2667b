import type { Metrics } from '../../../shared/metrics'
import type { MarketplaceSource } from '../source'
import { MarketplaceError } from './request'

/** The calls a source answers, each counted under its operation's name. */
const OPERATIONS = {
  listGames: 'list_games',
  listSets: 'list_sets',
  listProducts: 'list_products',
  listPrices: 'list_prices',
  listSales: 'list_sales',
  listListings: 'list_listings',
} as const

/**
 * The source with every call counted by operation, every failure by kind (a MarketplaceError's, or
 * `error`), and the rows it refused by kind: whichever source it is, demo, tcgcsv or http.
 */
export function measuredSource(source: MarketplaceSource, metrics: Metrics): MarketplaceSource {
  /** `call` on the source, counted under `operation`. */
  const counted = <A extends unknown[], R>(operation: string, call: (...args: A) => Promise<R>) => {
    const requests = metrics.sourceRequests.series(source.name, operation)
    return async (...args: A): Promise<R> => {
      requests.inc()
      try {
        return await call.apply(source, args)
      } catch (error) {
        metrics.sourceFailures.series(source.name, operation, error instanceof MarketplaceError ? error.kind : 'error').inc()
        throw error
      }
    }
  }
  const measured: MarketplaceSource = {
    name: source.name,
    capabilities: source.capabilities,
    listGames: counted(OPERATIONS.listGames, source.listGames),
    listSets: counted(OPERATIONS.listSets, source.listSets),
    listProducts: counted(OPERATIONS.listProducts, source.listProducts),
    listPrices: counted(OPERATIONS.listPrices, source.listPrices),
    listSales: counted(OPERATIONS.listSales, source.listSales),
    listListings: counted(OPERATIONS.listListings, source.listListings),
  }
  if (source.takeSkipped) {
    const take = source.takeSkipped.bind(source)
    measured.takeSkipped = () => {
      const skipped = take()
      for (const [kind, count] of Object.entries(skipped)) metrics.sourceRowsSkipped.series(source.name, kind).inc(count)
      return skipped
    }
  }
  if (source.checkpoint) measured.checkpoint = source.checkpoint.bind(source)
  return measured
}
