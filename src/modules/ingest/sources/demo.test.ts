import { describe, expect, test } from 'bun:test'
import { addDays, systemClock } from '../../../shared/clock'
import { type GameKind, PRINTINGS_BY_KIND } from '../../catalog/printings'
import {
  CONDITIONS,
  type MarketplaceSource,
  SEALED_CONDITION,
  type SourceGame,
  type SourceListing,
  type SourceListings,
  type SourceProduct,
  type SourceSale,
  type SourceSet,
} from '../source'
import { createDemoSource, type DemoMarketplace, type DemoPrice, type DemoProduct, LISTING_SAMPLE_SIZE } from './demo'
import { DEMO_SCALES, type DemoScale } from './demo-scales'

const NOW = new Date('2026-11-21T15:30:00Z')
const TODAY = '2026-11-21'
const WEEK_AGO = '2026-11-14'

interface Catalog {
  games: SourceGame[]
  sets: SourceSet[]
  products: DemoProduct[]
  gameOfGroup: Map<number, SourceGame>
  setOfGroup: Map<number, SourceSet>
}

function tinySource(seed?: number): DemoMarketplace {
  return createDemoSource({ scale: 'tiny', seed, now: () => NOW })
}

async function loadCatalog(source: DemoMarketplace): Promise<Catalog> {
  const games = await source.listGames()
  const catalog: Catalog = { games, sets: [], products: [], gameOfGroup: new Map(), setOfGroup: new Map() }
  for (const game of games) {
    for (const set of await source.listSets(game.categoryId)) {
      catalog.sets.push(set)
      catalog.gameOfGroup.set(set.groupId, game)
      catalog.setOfGroup.set(set.groupId, set)
      catalog.products.push(...(await source.listProducts(set.groupId)))
    }
  }
  return catalog
}

function groupIds(catalog: Catalog): number[] {
  return catalog.sets.map((set) => set.groupId)
}

async function pricesOn(source: DemoMarketplace, groups: number[], date: string): Promise<DemoPrice[]> {
  return (await Promise.all(groups.map((groupId) => source.listPrices(groupId, date)))).flat()
}

async function salesOn(source: MarketplaceSource, groups: number[], date: string): Promise<SourceSale[]> {
  return (await Promise.all(groups.map((groupId) => source.listSales(groupId, date)))).flat()
}

function printingKey(record: { productId: number; printing: string }): string {
  return `${record.productId}|${record.printing}`
}

function isMoney(value: number): boolean {
  return Number.isFinite(value) && value >= 0.01 && Math.round(value * 100) / 100 === value
}

function daysBefore(date: string, count: number): string[] {
  const end = Date.parse(`${date}T00:00:00Z`)
  return Array.from({ length: count }, (_, index) => new Date(end - (count - 1 - index) * 86_400_000).toISOString().slice(0, 10))
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN
}

const tinyCatalog = loadCatalog(tinySource())

describe('demo source: determinism', () => {
  test('the same seed gives identical output from every method', async () => {
    const [a, b] = [tinySource(), tinySource()]
    const [catalogA, catalogB] = [await loadCatalog(a), await loadCatalog(b)]
    expect(catalogB.games).toEqual(catalogA.games)
    expect(catalogB.sets).toEqual(catalogA.sets)
    expect(catalogB.products).toEqual(catalogA.products)
    const groups = groupIds(catalogA)
    for (const date of [TODAY, '2026-06-30']) {
      expect(await pricesOn(b, groups, date)).toEqual(await pricesOn(a, groups, date))
      expect(await salesOn(b, groups, date)).toEqual(await salesOn(a, groups, date))
    }
    for (const product of catalogA.products.slice(0, 50)) {
      expect(await b.listListings(product.productId)).toEqual(await a.listListings(product.productId))
    }
  })

  test('call order does not change results', async () => {
    const reference = await tinyCatalog
    const groups = groupIds(reference)
    const expectedPrices = await pricesOn(tinySource(), groups, TODAY)
    const expectedListing = await tinySource().listListings(reference.products[7]?.productId ?? 0)

    const shuffled = tinySource()
    const reversed = [...groups].reverse()
    // Prices, sales and listings before the catalog was ever listed, in reverse group order.
    const prices = (await Promise.all(reversed.map((groupId) => shuffled.listPrices(groupId, TODAY)))).reverse().flat()
    await salesOn(shuffled, reversed, WEEK_AGO)
    const listing = await shuffled.listListings(reference.products[7]?.productId ?? 0)
    const products = (await Promise.all(reversed.map((groupId) => shuffled.listProducts(groupId)))).reverse().flat()
    expect(prices).toEqual(expectedPrices)
    expect(listing).toEqual(expectedListing)
    expect(products).toEqual(reference.products)
    expect(await loadCatalog(shuffled)).toEqual(reference)
  })

  test('results survive the group cache evicting and regenerating a group', async () => {
    const source = createDemoSource({ scale: 'small', now: () => NOW })
    const catalog = await loadCatalog(createDemoSource({ scale: 'small', now: () => NOW }))
    const first = catalog.sets[0]?.groupId ?? 0
    const before = { products: await source.listProducts(first), prices: await source.listPrices(first, TODAY) }
    for (const groupId of groupIds(catalog)) await source.listProducts(groupId)
    expect(await source.listProducts(first)).toEqual(before.products)
    expect(await source.listPrices(first, TODAY)).toEqual(before.prices)
  })

  test('a different seed gives a different catalog but the same games', async () => {
    const [reference, other] = [await tinyCatalog, await loadCatalog(tinySource(7))]
    expect(other.games).toEqual(reference.games)
    expect(other.products.map((product) => product.name)).not.toEqual(reference.products.map((product) => product.name))
    expect(other.sets.map((set) => set.name)).not.toEqual(reference.sets.map((set) => set.name))
  })

  test('returned objects are copies: mutating them does not leak into later calls', async () => {
    const source = tinySource()
    const [product] = await source.listProducts(30001)
    if (!product) throw new Error('expected Pokemon products')
    product.printings.push('Bogus')
    product.customAttributes.stage = 'Bogus'
    const [again] = await source.listProducts(30001)
    expect(again?.printings).not.toContain('Bogus')
    expect(again?.customAttributes.stage).not.toBe('Bogus')
  })
})

describe('demo source: games and sets', () => {
  test('57 games with unique ids, names and kebab-case slugs; seven at priority 3', async () => {
    const { games } = await tinyCatalog
    expect(games).toHaveLength(57)
    expect(new Set(games.map((game) => game.categoryId)).size).toBe(57)
    expect(new Set(games.map((game) => game.name)).size).toBe(57)
    expect(new Set(games.map((game) => game.slug)).size).toBe(57)
    for (const game of games) {
      expect(game.slug).toMatch(/^[a-z0-9]+(-[a-z0-9]+)*$/)
      expect(Number.isInteger(game.categoryId) && game.categoryId >= 1 && game.categoryId <= 90).toBe(true)
    }
    const major = games.filter((game) => game.priority === 3).map((game) => [game.name, game.kind])
    expect(major.sort()).toEqual(
      [
        ['Digimon Card Game', 'other'],
        ['Disney Lorcana', 'ink'],
        ['Flesh and Blood TCG', 'action'],
        ['Magic: The Gathering', 'mana'],
        ['One Piece Card Game', 'other'],
        ['Pokemon', 'creature'],
        ['YuGiOh', 'duel'],
      ].sort(),
    )
    expect(games.filter((game) => game.priority !== 3).every((game) => game.priority === 2)).toBe(true)
  })

  test('the game list is identical at every scale', async () => {
    const reference = (await tinyCatalog).games
    for (const scale of DEMO_SCALES) expect(await createDemoSource({ scale, now: () => NOW }).listGames()).toEqual(reference)
  })

  test('sets: unique group ids, per-game unique slugs, valid abbreviations and dates, sorted by release', async () => {
    const { games, sets } = await tinyCatalog
    expect(new Set(sets.map((set) => set.groupId)).size).toBe(sets.length)
    for (const game of games) {
      const gameSets = sets.filter((set) => set.categoryId === game.categoryId)
      expect(gameSets.length).toBe(game.priority === 3 ? 2 : 1)
      expect(new Set(gameSets.map((set) => set.slug)).size).toBe(gameSets.length)
      const sorted = [...gameSets].sort((a, b) => a.releaseDate.localeCompare(b.releaseDate) || a.groupId - b.groupId)
      expect(gameSets).toEqual(sorted)
    }
    for (const set of sets) {
      expect(set.abbreviation).toMatch(/^[A-Z0-9]{2,5}$/)
      expect(set.releaseDate).toMatch(/^\d{4}-\d{2}-\d{2}$/)
      expect(new Date(`${set.releaseDate}T00:00:00Z`).toISOString().slice(0, 10)).toBe(set.releaseDate)
      expect(set.slug).toMatch(/^[a-z0-9]+(-[a-z0-9]+)*$/)
      expect(set.name.length).toBeGreaterThan(0)
    }
  })

  test('every game and set has an image; major games and every other minor game a logo, and their sets an icon', async () => {
    const { games, sets } = await tinyCatalog
    const images = 'https://marketplace.example/images'
    for (const game of games) {
      const artwork = game.priority === 3 || game.categoryId % 2 === 0
      expect(game.imageUrl).toBe(`${images}/category/${game.categoryId}.jpg`)
      expect(game.logoUrl).toBe(artwork ? `${images}/category/${game.categoryId}/logo.png` : undefined)
      for (const set of sets.filter((set) => set.categoryId === game.categoryId)) {
        expect(set.imageUrl).toBe(`${images}/group/${set.groupId}.jpg`)
        expect(set.setIconUrl).toBe(artwork ? `${images}/group/${set.groupId}/icon.svg` : undefined)
      }
    }
    // Both kinds are there: the API answers some of each as a URL and some as null.
    expect(games.filter((game) => game.logoUrl === undefined).length).toBeGreaterThan(10)
    expect(sets.filter((set) => set.setIconUrl === undefined).length).toBeGreaterThan(10)
  })

  test('release dates spread over past years at larger scales', async () => {
    const source = createDemoSource({ scale: 'medium', now: () => NOW })
    const years = new Set<string>()
    for (const game of await source.listGames()) {
      for (const set of await source.listSets(game.categoryId)) years.add(set.releaseDate.slice(0, 4))
    }
    expect(years.size).toBeGreaterThanOrEqual(5)
  })
})

const ATTRIBUTE_NAMES: Record<GameKind, { required: string[]; optional: string[] }> = {
  creature: {
    required: ['stage', 'energyType', 'hp', 'weakness', 'resistance', 'retreatCost', 'attack1', 'attack2', 'cardType', 'flavorText'],
    optional: ['attack3', 'attack4'],
  },
  mana: { required: ['color', 'manaCost', 'power', 'toughness', 'cardType', 'subType', 'flavorText', 'oracleText'], optional: [] },
  duel: { required: ['cardType', 'attribute', 'level', 'attack', 'defense', 'description'], optional: [] },
  action: { required: ['cardType', 'class', 'pitch', 'flavorText'], optional: [] },
  ink: { required: ['cardType', 'inkColor', 'inkCost', 'loreValue', 'flavorText'], optional: [] },
  other: { required: ['cardType', 'flavorText'], optional: [] },
}

function kindOf(catalog: Catalog, product: SourceProduct): GameKind {
  const game = catalog.gameOfGroup.get(product.groupId)
  if (!game) throw new Error(`product ${product.productId} has an unknown group`)
  return game.kind
}

describe('demo source: products', () => {
  test('ids are unique, sorted per group and URLs follow the product id', async () => {
    const catalog = await tinyCatalog
    expect(new Set(catalog.products.map((product) => product.productId)).size).toBe(catalog.products.length)
    for (const groupId of groupIds(catalog)) {
      const ids = catalog.products.filter((product) => product.groupId === groupId).map((product) => product.productId)
      expect(ids).toEqual([...ids].sort((a, b) => a - b))
    }
    for (const product of catalog.products) {
      expect(Number.isInteger(product.productId) && product.productId > 0).toBe(true)
      expect(product.imageUrl).toBe(`https://marketplace.example/images/product/${product.productId}.jpg`)
      expect(product.url).toMatch(new RegExp(`^https://marketplace\\.example/product/${product.productId}/[a-z0-9]+(-[a-z0-9]+)*$`))
      expect(Number.isInteger(product.totalListings) && product.totalListings >= 0 && product.totalListings <= 2000).toBe(true)
    }
  })

  test('printings are a non-empty ordered subset of the game kind printings', async () => {
    const catalog = await tinyCatalog
    for (const product of catalog.products) {
      const allowed = PRINTINGS_BY_KIND[kindOf(catalog, product)]
      expect(product.printings.length).toBeGreaterThan(0)
      const positions = product.printings.map((printing) => allowed.indexOf(printing))
      expect(positions.every((position) => position >= 0)).toBe(true)
      expect(positions.every((position, index) => index === 0 || position > (positions[index - 1] ?? -1))).toBe(true)
    }
  })

  test('foil-only cards exist (printings without any non-foil printing)', async () => {
    const products = await loadCatalog(createDemoSource({ scale: 'small', now: () => NOW }))
    const nonFoil = new Set(['Normal', '1st Edition', 'Unlimited', 'Limited', '1st Edition Normal', 'Unlimited Edition Normal'])
    const foilOnly = products.products.filter((product) => product.printings.every((printing) => !nonFoil.has(printing)))
    expect(foilOnly.length).toBeGreaterThan(0)
    expect(foilOnly.length).toBeLessThan(products.products.length / 4)
  })

  test('cards carry exactly their kind attributes; hp only on creature cards', async () => {
    const catalog = await tinyCatalog
    for (const product of catalog.products) {
      const kind = kindOf(catalog, product)
      const attributes = product.customAttributes
      if (product.productType === 'Sealed Products') {
        expect(attributes).toEqual({})
        expect(product.hp).toBeNull()
        continue
      }
      const { required, optional } = ATTRIBUTE_NAMES[kind]
      const names = Object.keys(attributes)
      expect(required.every((name) => names.includes(name))).toBe(true)
      expect(names.every((name) => required.includes(name) || optional.includes(name))).toBe(true)
      for (const [name, value] of Object.entries(attributes)) {
        if (name === 'energyType') {
          expect(Array.isArray(value) && value.length > 0 && value.every((item) => typeof item === 'string')).toBe(true)
        } else {
          expect(typeof value).toBe('string')
        }
      }
      if (kind === 'creature') {
        expect(product.hp).toMatch(/^\d+$/)
        expect(attributes.hp).toBe(product.hp ?? '')
      } else {
        expect(product.hp).toBeNull()
      }
    }
  })

  test('card numbers and names are unique within a set; sealed products have no number', async () => {
    const catalog = await tinyCatalog
    for (const groupId of groupIds(catalog)) {
      const products = catalog.products.filter((product) => product.groupId === groupId)
      const cards = products.filter((product) => product.productType === 'Cards')
      expect(new Set(cards.map((card) => card.number)).size).toBe(cards.length)
      expect(new Set(products.map((product) => product.name)).size).toBe(products.length)
      expect(cards.every((card) => typeof card.number === 'string' && card.number !== '' && card.rarity !== '')).toBe(true)
      expect(products.filter((product) => product.productType === 'Sealed Products').every((sealed) => sealed.number === null)).toBe(true)
    }
  })

  test('sealed products ship as boxes or cases; cards ship as cards', async () => {
    const catalog = await tinyCatalog
    for (const product of catalog.products) {
      const sealed = product.productType === 'Sealed Products'
      expect(sealed).toBe(product.shippingCategoryId === 3 || product.shippingCategoryId === 4)
      if (!sealed) expect(product.productType).toBe('Cards')
      if (!sealed) expect(product.shippingCategoryId).toBe(1)
    }
    for (const groupId of groupIds(catalog)) {
      const inGroup = catalog.products.filter((product) => product.groupId === groupId)
      const sealedCount = inGroup.filter((product) => product.productType === 'Sealed Products').length
      expect(sealedCount).toBeGreaterThanOrEqual(1)
      expect(sealedCount).toBeLessThanOrEqual(2)
    }
  })

  test('products of future sets are presale (status 20), all others active', async () => {
    const catalog = await tinyCatalog
    let presale = 0
    for (const product of catalog.products) {
      const future = (catalog.setOfGroup.get(product.groupId)?.releaseDate ?? '') > TODAY
      expect(product.productStatusId).toBe(future ? 20 : 1)
      if (future) presale++
    }
    expect(presale).toBeGreaterThan(0)
  })

  test("the status follows the clock's day: presale until the release day, active from it", async () => {
    const catalog = await tinyCatalog
    const upcoming = catalog.sets.find((set) => set.releaseDate > TODAY)!
    const onDay = (date: string) => createDemoSource({ scale: 'tiny', now: () => new Date(`${date}T00:00:00Z`) })
    const statuses = async (date: string) => new Set((await onDay(date).listProducts(upcoming.groupId)).map((product) => product.productStatusId))
    expect(await statuses(addDays(upcoming.releaseDate, -1))).toEqual(new Set([20]))
    expect(await statuses(upcoming.releaseDate)).toEqual(new Set([1]))
    // Only the status moves with the clock: the products are otherwise the same.
    const strip = (products: DemoProduct[]) => products.map(({ productStatusId: _, ...product }) => product)
    expect(strip(await onDay(upcoming.releaseDate).listProducts(upcoming.groupId))).toEqual(strip(catalog.products.filter((product) => product.groupId === upcoming.groupId)))
  })

  test('some creature cards have a fourth attack; Charizard always has attack1 to attack4', async () => {
    for (const catalog of [await tinyCatalog, await loadCatalog(tinySource(7))]) {
      const creatures = catalog.products.filter((product) => product.productType === 'Cards' && kindOf(catalog, product) === 'creature')
      const withFourth = creatures.filter((card) => 'attack4' in card.customAttributes)
      expect(withFourth.length).toBeGreaterThan(0)
      // A fourth attack comes after a third.
      expect(withFourth.every((card) => typeof card.customAttributes.attack3 === 'string')).toBe(true)
      const charizard = creatures.find((card) => card.name === 'Charizard')!
      for (const name of ['attack1', 'attack2', 'attack3', 'attack4']) expect(charizard.customAttributes[name]).toMatch(/^[A-Za-z]+ \(\d+\)$/)
    }
    const small = await loadCatalog(createDemoSource({ scale: 'small', now: () => NOW }))
    const smallCreatures = small.products.filter((product) => product.productType === 'Cards' && kindOf(small, product) === 'creature')
    const share = smallCreatures.filter((card) => 'attack4' in card.customAttributes).length / smallCreatures.length
    expect(share).toBeGreaterThan(0.01)
    expect(share).toBeLessThan(0.15)
  })

  test("every printing of the spec's table appears, each under its game kind", async () => {
    for (const catalog of [await tinyCatalog, await loadCatalog(tinySource(7))]) {
      const seen = new Set(catalog.products.flatMap((product) => product.printings.map((printing) => `${kindOf(catalog, product)}|${printing}`)))
      // 'other' is not in the spec's table (its games use Normal and Foil, as the mana kind does).
      const expected = Object.entries(PRINTINGS_BY_KIND)
        .filter(([kind]) => kind !== 'other')
        .flatMap(([kind, names]) => names.map((name) => `${kind}|${name}`))
      expect(expected.filter((key) => !seen.has(key))).toEqual([])
    }
  })

  test("Charizard and Pikachu are in Pokemon's oldest set at every scale", async () => {
    for (const scale of DEMO_SCALES) {
      const source = createDemoSource({ scale, now: () => NOW })
      const pokemon = (await source.listGames()).find((game) => game.name === 'Pokemon')
      const [firstSet] = await source.listSets(pokemon?.categoryId ?? 0)
      const cards = (await source.listProducts(firstSet?.groupId ?? 0)).filter((product) => product.productType === 'Cards')
      const names = cards.map((card) => card.name)
      expect(names).toContain('Charizard')
      expect(names).toContain('Pikachu')
    }
  })
})

describe('demo source: prices', () => {
  test('one well-formed price per printing of every trading product', async () => {
    const catalog = await tinyCatalog
    const source = tinySource()
    for (const date of [TODAY, '2026-09-01']) {
      for (const set of catalog.sets) {
        const prices = await source.listPrices(set.groupId, date)
        const products = catalog.products.filter((product) => product.groupId === set.groupId)
        const trades = set.releaseDate <= date
        const allPrintings = products.flatMap((product) => product.printings.map((printing) => `${product.productId}|${printing}`))
        const expected = trades ? allPrintings : []
        expect(prices.map(printingKey)).toEqual(expected)
        for (const price of prices) {
          expect(isMoney(price.lowPrice) && isMoney(price.midPrice) && isMoney(price.directLowPrice)).toBe(true)
          expect(price.lowPrice).toBeLessThanOrEqual(price.midPrice)
          expect(price.directLowPrice).toBeGreaterThanOrEqual(price.lowPrice)
          if (price.marketPrice !== null) expect(isMoney(price.marketPrice)).toBe(true)
          if (price.buylistPrice !== null) {
            expect(isMoney(price.buylistPrice)).toBe(true)
            expect(price.buylistPrice).toBeLessThan(price.midPrice)
          }
        }
      }
    }
  })

  test('a set has no prices or sales before its release day, presale sets included; from that day it has', async () => {
    const catalog = await tinyCatalog
    const source = tinySource()
    const date = '2026-06-01'
    const unreleased = catalog.sets.filter((set) => set.releaseDate > date && set.releaseDate <= TODAY)
    const presale = catalog.sets.filter((set) => set.releaseDate > TODAY)
    expect(unreleased.length).toBeGreaterThan(0)
    expect(presale.length).toBeGreaterThan(0)
    for (const set of unreleased) expect(await source.listPrices(set.groupId, date)).toEqual([])
    for (const set of [...unreleased, ...presale]) {
      const dayBefore = addDays(set.releaseDate, -1)
      expect(await source.listPrices(set.groupId, dayBefore)).toEqual([])
      expect(await source.listSales(set.groupId, dayBefore)).toEqual([])
      expect((await source.listPrices(set.groupId, set.releaseDate)).length).toBeGreaterThan(0)
    }
    // On the catalog's day, no presale product has a price.
    const presaleGroups = new Set(presale.map((set) => set.groupId))
    expect((await pricesOn(source, [...presaleGroups], TODAY)).length).toBe(0)
  })

  test('no prices or sales before 2025-03-01; history starts that day', async () => {
    // Tiny sets are all recent: only the small catalog has sets trading on the first day.
    const source = createDemoSource({ scale: 'small', now: () => NOW })
    const catalog = await loadCatalog(source)
    const groups = groupIds(catalog)
    expect(await pricesOn(source, groups, '2025-02-28')).toEqual([])
    expect(await salesOn(source, groups, '2025-02-28')).toEqual([])
    expect((await pricesOn(source, groups, '2025-03-01')).length).toBeGreaterThan(0)
  })

  test('prices move like a random walk: most change within a week, few jump more than 30% a day', async () => {
    const catalog = await tinyCatalog
    const source = tinySource()
    const groups = groupIds(catalog)
    const days = daysBefore(TODAY, 45)
    const byDay = await Promise.all(days.map(async (date) => new Map((await pricesOn(source, groups, date)).map((price) => [printingKey(price), price]))))
    let dailyPairs = 0
    let bigDailyMoves = 0
    // Rounding alone moves cent-priced cards by 30%, so count spikes only on cards worth a dollar.
    let spikesOverADollar = 0
    let nullMarket = 0
    let records = 0
    byDay.forEach((prices, index) => {
      const previous = byDay[index - 1]
      for (const [key, price] of prices) {
        records++
        if (price.marketPrice === null) nullMarket++
        const before = previous?.get(key)
        if (!before) continue
        dailyPairs++
        const ratio = price.midPrice / before.midPrice
        if (ratio > 1.3 || ratio < 1 / 1.3) bigDailyMoves++
        if ((ratio > 1.3 || ratio < 1 / 1.3) && before.midPrice >= 1) spikesOverADollar++
      }
    })
    expect(dailyPairs).toBeGreaterThan(10_000)
    expect(bigDailyMoves / dailyPairs).toBeLessThan(0.03)
    expect(spikesOverADollar).toBeGreaterThan(0)
    expect(nullMarket / records).toBeGreaterThan(0.01)
    expect(nullMarket / records).toBeLessThan(0.06)

    const weekAgo = new Map((await pricesOn(source, groups, WEEK_AGO)).map((price) => [printingKey(price), price]))
    const today = await pricesOn(source, groups, TODAY)
    const compared = today.filter((price) => weekAgo.has(printingKey(price)))
    const changed = compared.filter((price) => price.midPrice !== weekAgo.get(printingKey(price))?.midPrice)
    const wild = compared.filter((price) => {
      const ratio = price.midPrice / (weekAgo.get(printingKey(price))?.midPrice ?? Number.NaN)
      return !(ratio < 2 && ratio > 0.5)
    })
    expect(compared.length).toBeGreaterThan(500)
    expect(changed.length / compared.length).toBeGreaterThan(0.6)
    expect(wild.length / compared.length).toBeLessThan(0.05)
  })

  test('price levels follow rarity: sealed boxes cost tens to hundreds, commons cents', async () => {
    const catalog = await loadCatalog(createDemoSource({ scale: 'small', now: () => NOW }))
    const source = createDemoSource({ scale: 'small', now: () => NOW })
    const prices = await pricesOn(source, groupIds(catalog), TODAY)
    const productById = new Map(catalog.products.map((product) => [product.productId, product]))
    const midsWhere = (predicate: (product: SourceProduct) => boolean) =>
      prices
        .filter((price) => {
          const product = productById.get(price.productId)
          return product !== undefined && predicate(product)
        })
        .map((price) => price.midPrice)
    const boxes = midsWhere((product) => product.name.endsWith('Booster Box') && product.shippingCategoryId === 3)
    const cases = midsWhere((product) => product.shippingCategoryId === 4)
    const commons = midsWhere((product) => product.rarity === 'Common')
    expect(median(boxes)).toBeGreaterThan(60)
    expect(median(boxes)).toBeLessThan(400)
    expect(median(cases)).toBeGreaterThan(4 * 60)
    expect(median(commons)).toBeLessThan(0.5)
    expect(Math.max(...midsWhere((product) => product.productType === 'Cards'))).toBeGreaterThan(50)
  })
})

describe('demo source: sales and unknown ids', () => {
  test('sales cover the same printings every day, for printings worth at least a dollar', async () => {
    const catalog = await tinyCatalog
    const source = tinySource()
    const groups = groupIds(catalog)
    const days = daysBefore(TODAY, 30)
    const salesByDay = await Promise.all(days.map((date) => salesOn(source, groups, date)))
    const pricesByDay = await Promise.all(days.map((date) => pricesOn(source, groups, date)))
    const sold = new Set(salesByDay.flatMap((sales) => sales.map(printingKey)))
    expect(sold.size).toBeGreaterThan(0)
    // Sets release during the month, so compare each day against the printings that traded that day.
    pricesByDay.forEach((prices, index) => {
      const expected = prices.map(printingKey).filter((key) => sold.has(key))
      expect(salesByDay[index]?.map(printingKey)).toEqual(expected)
    })

    // Base prices are internal, so judge each printing by its median mid price over the month.
    const mids = new Map<string, number[]>()
    for (const price of pricesByDay.flat()) mids.set(printingKey(price), [...(mids.get(printingKey(price)) ?? []), price.midPrice])
    for (const [key, values] of mids) {
      if (sold.has(key)) expect(median(values)).toBeGreaterThan(0.4)
      else expect(median(values)).toBeLessThan(2.5)
    }
    expect(sold.size).toBeLessThan(mids.size)

    const sales = salesByDay.flat()
    for (const sale of sales) {
      expect(Number.isInteger(sale.salesVolume) && sale.salesVolume >= 0 && sale.salesVolume <= 50).toBe(true)
      expect(sale.avgSalesPrice === null).toBe(sale.salesVolume === 0)
      if (sale.avgSalesPrice !== null) expect(isMoney(sale.avgSalesPrice)).toBe(true)
    }
    const zeroDays = sales.filter((sale) => sale.salesVolume === 0).length
    expect(zeroDays).toBeGreaterThan(0)
    expect(zeroDays).toBeLessThan(sales.length)
    expect(median(sales.map((sale) => sale.salesVolume))).toBeLessThan(10)
  })

  test('unknown ids and bad dates return empty lists', async () => {
    const source = tinySource()
    const { sets, products } = await tinyCatalog
    const groupId = sets[0]?.groupId ?? 0
    expect(await source.listSets(0)).toEqual([])
    expect(await source.listSets(58)).toEqual([])
    expect(await source.listSets(1.5)).toEqual([])
    for (const badGroup of [0, -1, 10_000, 10_099, 999_999, groupId + 0.5]) {
      expect(await source.listProducts(badGroup)).toEqual([])
      expect(await source.listPrices(badGroup, TODAY)).toEqual([])
      expect(await source.listSales(badGroup, TODAY)).toEqual([])
    }
    for (const badDate of ['', 'yesterday', '2026-02-30', '2026-11-21T00:00:00Z']) {
      expect(await source.listPrices(groupId, badDate)).toEqual([])
      expect(await source.listSales(groupId, badDate)).toEqual([])
    }
    for (const badProduct of [0, 1, -5, groupId * 1000 + 999, (products[0]?.productId ?? 0) + 0.5]) {
      expect(await source.listListings(badProduct)).toEqual({ listings: [], conditionCounts: {} })
    }
  })
})

describe('demo source: live listings', () => {
  const cellKey = (listing: SourceListing) => `${listing.printing}|${listing.condition}|${listing.language}`
  const listingsOf = (source: MarketplaceSource, products: SourceProduct[]) => Promise.all(products.map((product) => source.listListings(product.productId)))

  test('every listing is well formed; sealed products list only Unopened, cards the five conditions', async () => {
    const { products } = await tinyCatalog
    const answers = await listingsOf(tinySource(), products)
    const conditions = new Map<string, number>()
    const languages = new Set<string>()
    const shipping = new Set<boolean>()
    let traded = 0
    products.forEach((product, index) => {
      const { listings, conditionCounts } = answers[index]!
      const sealed = product.productType === 'Sealed Products'
      const allowed: readonly string[] = sealed ? [SEALED_CONDITION] : CONDITIONS
      // A released product counts every condition it can be listed in, even at 0; a presale one has no listings.
      const counted = Object.keys(conditionCounts).sort()
      if (product.productStatusId === 1) expect(counted).toEqual([...allowed].sort())
      else expect({ listings, conditionCounts }).toEqual({ listings: [], conditionCounts: {} })
      traded += counted.length > 0 ? 1 : 0
      for (const listing of listings) {
        expect(listing.productId).toBe(product.productId)
        expect(product.printings).toContain(listing.printing)
        expect(allowed).toContain(listing.condition)
        expect(isMoney(listing.price)).toBe(true)
        if (sealed) expect(listing.shipping === 0 || (listing.shipping >= 4.99 && listing.shipping <= 14.99)).toBe(true)
        else expect(listing.shipping === 0 || (listing.shipping >= 0.99 && listing.shipping <= 4.99)).toBe(true)
        conditions.set(listing.condition, (conditions.get(listing.condition) ?? 0) + 1)
        languages.add(listing.language)
        shipping.add(listing.shipping === 0)
      }
    })
    const counts = CONDITIONS.map((condition) => conditions.get(condition) ?? 0)
    expect(counts[0]).toBe(Math.max(...counts))
    expect(counts.every((count) => count > 0)).toBe(true)
    expect(conditions.get(SEALED_CONDITION)).toBeGreaterThan(0)
    expect(traded).toBe(products.filter((product) => product.productStatusId === 1).length)
    expect(traded).toBeGreaterThan(products.length * 0.75)
    expect(languages.has('English') && languages.has('Japanese')).toBe(true)
    expect(languages.size).toBeGreaterThan(2)
    expect(shipping.size).toBe(2)
  })

  test('the sample is the cheapest few per printing, condition and language; the counts are at least the sample', async () => {
    const { products } = await tinyCatalog
    const answers = await listingsOf(tinySource(), products)
    let cappedCells = 0
    for (const { listings, conditionCounts } of answers) {
      const cells = new Map<string, number[]>()
      for (const listing of listings) cells.set(cellKey(listing), [...(cells.get(cellKey(listing)) ?? []), listing.price])
      for (const prices of cells.values()) {
        expect(prices.length).toBeLessThanOrEqual(LISTING_SAMPLE_SIZE)
        expect(prices).toEqual([...prices].sort((a, b) => a - b))
        if (prices.length === LISTING_SAMPLE_SIZE) cappedCells++
      }
      for (const [condition, count] of Object.entries(conditionCounts)) {
        const sampled = listings.filter((listing) => listing.condition === condition).length
        expect(count).toBeGreaterThanOrEqual(sampled)
        expect(Number.isInteger(count)).toBe(true)
      }
    }
    // Deep markets exist, and their counts go beyond the sample.
    expect(cappedCells).toBeGreaterThan(0)
    const deeper = answers.filter(({ listings, conditionCounts }) => Object.values(conditionCounts).reduce((a, b) => a + (b ?? 0), 0) > listings.length)
    expect(deeper.length).toBeGreaterThan(0)
  })

  test("depth follows the product's popularity", async () => {
    const { products } = await tinyCatalog
    const answers = await listingsOf(tinySource(), products)
    const depths = answers.map(({ conditionCounts }) => Object.values(conditionCounts).reduce((a, b) => a + (b ?? 0), 0))
    const ratios = products.flatMap((product, index) => (product.totalListings >= 20 ? [depths[index]! / product.totalListings] : []))
    expect(ratios.length).toBeGreaterThan(20)
    expect(median(ratios)).toBeGreaterThan(0.8)
    expect(median(ratios)).toBeLessThan(1.25)
    const byPopularity = products.map((product, index) => ({ listed: product.totalListings, depth: depths[index]! })).sort((a, b) => a.listed - b.listed)
    const quarter = Math.floor(byPopularity.length / 4)
    const meanDepth = (rows: { depth: number }[]) => rows.reduce((sum, row) => sum + row.depth, 0) / rows.length
    expect(meanDepth(byPopularity.slice(-quarter))).toBeGreaterThan(5 * meanDepth(byPopularity.slice(0, quarter)))
  })

  test("asking prices track the printing's market value that day, cheaper for worse conditions", async () => {
    const catalog = await tinyCatalog
    const source = tinySource()
    const market = new Map((await pricesOn(source, groupIds(catalog), TODAY)).map((price) => [printingKey(price), price.marketPrice]))
    const ratios: number[] = []
    const conditionRatios = new Map<string, number[]>()
    for (const { listings } of await listingsOf(source, catalog.products)) {
      for (const listing of listings) {
        const value = market.get(printingKey(listing))
        if (!value || value < 1 || listing.price === 0.01 || listing.language !== 'English') continue
        if (listing.condition === 'Near Mint') ratios.push(listing.price / value)
        conditionRatios.set(listing.condition, [...(conditionRatios.get(listing.condition) ?? []), listing.price / value])
      }
    }
    expect(ratios.length).toBeGreaterThan(100)
    expect(median(ratios)).toBeGreaterThan(0.85)
    expect(median(ratios)).toBeLessThan(1.3)
    expect(Math.min(...ratios)).toBeGreaterThan(0.6)
    const medians = CONDITIONS.map((condition) => median(conditionRatios.get(condition) ?? []))
    for (let index = 1; index < medians.length; index++) expect(medians[index]!).toBeLessThan(medians[index - 1]!)
  })

  test('one-cent junk listings turn up in some products, at a low rate', async () => {
    const { products } = await tinyCatalog
    const answers = await listingsOf(tinySource(), products)
    const listings = answers.flatMap((answer) => answer.listings)
    const junk = listings.filter((listing) => listing.price === 0.01)
    const productsWithJunk = answers.filter((answer) => answer.listings.some((listing) => listing.price === 0.01)).length
    expect(productsWithJunk).toBeGreaterThan(0)
    expect(productsWithJunk).toBeLessThan(products.length / 3)
    expect(junk.length).toBeLessThan(listings.length * 0.03)
    // Junk sits beside real listings: somewhere a cell has a one-cent listing and at least two dearer ones.
    const cells = new Map<string, number[]>()
    for (const listing of listings) {
      const key = `${listing.productId}|${cellKey(listing)}`
      cells.set(key, [...(cells.get(key) ?? []), listing.price])
    }
    expect([...cells.values()].some((prices) => prices[0] === 0.01 && prices.filter((price) => price > 0.05).length >= 2)).toBe(true)
  })

  test('fixed for a given day, different the next day', async () => {
    const { products } = await tinyCatalog
    const sample = products.slice(0, 60)
    const source = tinySource()
    const sameDay = createDemoSource({ scale: 'tiny', now: () => new Date('2026-11-21T23:59:00Z') })
    const laterDay = createDemoSource({ scale: 'tiny', now: () => new Date('2026-11-22T01:00:00Z') })
    const today = await listingsOf(source, sample)
    expect(await listingsOf(sameDay, sample)).toEqual(today)
    const tomorrow = await listingsOf(laterDay, sample)
    const changed = sample.filter((_, index) => !Bun.deepEquals(tomorrow[index], today[index]))
    expect(changed.length).toBeGreaterThan(sample.length / 2)
    const prices = (answers: SourceListings[]) => answers.flatMap((answer) => answer.listings.map((listing) => listing.price))
    expect(prices(tomorrow)).not.toEqual(prices(today))
  })

  test('products that do not trade yet have no listings', async () => {
    const catalog = await tinyCatalog
    // On 2025-01-01 no set released after that day trades.
    const early = createDemoSource({ scale: 'tiny', now: () => new Date('2025-01-01T00:00:00Z') })
    const later = new Set(catalog.sets.filter((set) => set.releaseDate > '2025-01-01' && set.releaseDate <= TODAY).map((set) => set.groupId))
    const products = catalog.products.filter((product) => later.has(product.groupId))
    expect(products.length).toBeGreaterThan(0)
    for (const answer of await listingsOf(early, products)) expect(answer).toEqual({ listings: [], conditionCounts: {} })
    const traded = await listingsOf(tinySource(), products)
    expect(traded.some((answer) => answer.listings.length > 0)).toBe(true)
  })

  test("one product's listings take microseconds once its set is generated", async () => {
    const { products } = await tinyCatalog
    const source = tinySource()
    await listingsOf(source, products.slice(0, 20))
    // About 0.07 ms each on a quiet machine; the bound is ten times that, so a loaded machine passes
    // and listings gone an order of magnitude slower fail (docs/testing.md "Timing asserts").
    const started = systemClock.monotonic()
    for (let round = 0; round < 10; round++) for (const product of products.slice(0, 20)) await source.listListings(product.productId)
    expect((systemClock.monotonic() - started) / 200).toBeLessThan(0.75)
  })
})

interface ScaleCounts {
  products: number
  printings: number
  majorProductsPerGame: number
  minorProductsPerGame: number
}

async function countScale(scale: DemoScale): Promise<ScaleCounts> {
  const source = createDemoSource({ scale, now: () => NOW })
  const counts = { products: 0, printings: 0, major: 0, minor: 0 }
  for (const game of await source.listGames()) {
    for (const set of await source.listSets(game.categoryId)) {
      const products = await source.listProducts(set.groupId)
      counts.products += products.length
      counts.printings += products.reduce((sum, product) => sum + product.printings.length, 0)
      if (game.priority === 3) counts.major += products.length
      else counts.minor += products.length
    }
  }
  return {
    products: counts.products,
    printings: counts.printings,
    majorProductsPerGame: counts.major / 7,
    minorProductsPerGame: counts.minor / 50,
  }
}

describe('demo source: scales', () => {
  test('tiny and small land in their ranges; headline games are bigger', async () => {
    const tiny = await countScale('tiny')
    expect(tiny.products).toBeLessThan(1500)
    expect(tiny.products).toBeGreaterThan(57 * 7)
    const small = await countScale('small')
    expect(small.products).toBeGreaterThanOrEqual(4000)
    expect(small.products).toBeLessThanOrEqual(8000)
    expect(small.printings).toBeGreaterThanOrEqual(8000)
    expect(small.printings).toBeLessThanOrEqual(13_000)
    for (const counts of [tiny, small]) expect(counts.majorProductsPerGame).toBeGreaterThan(1.5 * counts.minorProductsPerGame)
  })

  test('small has some accented card names', async () => {
    const { products } = await loadCatalog(createDemoSource({ scale: 'small', now: () => NOW }))
    expect(products.some((product) => /[^\u0000-\u007f]/.test(product.name))).toBe(true)
  })

  test('medium and large hit their size targets quickly', async () => {
    const started = systemClock.monotonic()
    const medium = await countScale('medium')
    expect(medium.products).toBeGreaterThanOrEqual(30_000)
    expect(medium.products).toBeLessThanOrEqual(50_000)
    const large = await countScale('large')
    expect(large.printings).toBeGreaterThanOrEqual(300_000)
    expect(large.printings).toBeLessThanOrEqual(400_000)
    expect(large.majorProductsPerGame).toBeGreaterThan(1.5 * large.minorProductsPerGame)
    // 2 to 5 s on a quiet machine, 17 s on a very busy one; a generator gone quadratic takes minutes
    // (docs/testing.md "Timing asserts").
    expect(systemClock.monotonic() - started).toBeLessThan(60_000)
  }, 120_000)
})
