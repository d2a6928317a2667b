/**
 * A generated TCGCSV mirror of the `large` size for benches of the tcgcsv source: about 300,000
 * products in 57 categories, skewed like the real one (Magic, YuGiOh and Pokemon with hundreds of
 * groups each, a dozen mid-sized games, many small ones), extendedData in the real shapes of the three
 * big games, 1–3 printings per card, prices with the real mirror's gaps.
 *
 * Every value is a pure function of (seed, ids, purpose), so a group is generated only when asked
 * for and the same request answers the same bytes; nothing but the category plans is held.
 *
 * Served by `bun test/fixtures/fake-tcgcsv.ts --size large`; `bun bench/tcgcsv-mirror.ts` prints its counts.
 */
import {
  type ExtendedField,
  extended,
  priceOnDay,
  productRow,
  TCGCSV_BASE_DATE,
  type TcgcsvCategory,
  type TcgcsvExtendedData,
  type TcgcsvGroup,
  type TcgcsvMirror,
  type TcgcsvMirrorCounts,
  type TcgcsvPrice,
  type TcgcsvProduct,
  unitOf,
} from '../test/fixtures/tcgcsv-data'

type Kind = 'magic' | 'pokemon' | 'yugioh' | 'other'
type Range = readonly [min: number, max: number]

interface CategoryPlan {
  categoryId: number
  name: string
  displayName: string
  kind: Kind
  groupCount: number
  /** Cards in a regular group. */
  cards: Range
  /** The year of the first group. */
  since: number
}

// ---------------------------------------------------------------------------------------------
// Categories

/** Ids of the games the source supports by default are the marketplace's; the other ids are placeholders. */
const MAJOR: readonly CategoryPlan[] = [
  { categoryId: 1, name: 'Magic', displayName: 'Magic: The Gathering', kind: 'magic', groupCount: 440, cards: [30, 380], since: 1993 },
  { categoryId: 2, name: 'YuGiOh', displayName: 'YuGiOh', kind: 'yugioh', groupCount: 520, cards: [30, 180], since: 2002 },
  { categoryId: 3, name: 'Pokemon', displayName: 'Pokemon', kind: 'pokemon', groupCount: 250, cards: [30, 280], since: 1999 },
]

const MID: readonly (readonly [number, string, number, Range, number])[] = [
  [62, 'Flesh and Blood TCG', 55, [60, 260], 2019],
  [71, 'Lorcana TCG', 22, [60, 240], 2023],
  [68, 'One Piece Card Game', 48, [40, 200], 2022],
  [63, 'Digimon Card Game', 42, [40, 200], 2020],
  [79, 'Star Wars: Unlimited', 14, [120, 300], 2024],
  [80, 'Dragon Ball Super Fusion World', 16, [60, 180], 2024],
  [20, 'Weiss Schwarz', 170, [40, 150], 2008],
  [16, 'Cardfight!! Vanguard', 180, [40, 140], 2011],
  [27, 'Dragon Ball Super CCG', 55, [80, 250], 2017],
  [24, 'Final Fantasy TCG', 38, [80, 220], 2016],
  [17, 'Force of Will', 60, [40, 160], 2014],
]

const MINOR_NAMES: readonly string[] = [
  'Sorcery: Contested Realm',
  'Grand Archive TCG',
  'Union Arena',
  'MetaZoo',
  'Universus',
  'KeyForge',
  'Shadowverse: Evolve',
  'Battle Spirits Saga',
  'Alpha Clash',
  'Gate Ruler',
  'Star Wars Destiny',
  'Transformers TCG',
  'WoW TCG',
  'Akora',
  'Gundam Card Game',
  'Riftbound',
  'Altered',
  'Elestrals',
  'Bakugan TCG',
  'Dragoborne',
  'Lightseekers',
  'Argent Saga',
  'Zombie World Order',
  'Chrono Clash System',
  'Exodus TCG',
  'Hololive OCG',
  'Godzilla Card Game',
  'Build Divide',
  'WIXOSS',
  'Battle Scenes',
  'Duel Masters',
  'Future Card Buddyfight',
  'Legend of the Five Rings',
  'Vampire: The Eternal Struggle',
  'Android: Netrunner',
  'Neopets Battledome',
  'Warlord: Saga of the Storm',
  'Vs. System 2PCG',
  'Dice Masters',
  'Munchkin CCG',
  'Star Trek CCG',
  'Hearthstone Heroes',
  'Kryptik TCG',
]

function categoryPlans(seed: number): CategoryPlan[] {
  const mid = MID.map(([categoryId, name, groupCount, cards, since]) => ({
    categoryId,
    name,
    displayName: name,
    kind: 'other' as const,
    groupCount,
    cards,
    since,
  }))
  const used = new Set([...MAJOR, ...mid].map((plan) => plan.categoryId))
  let nextId = 4
  const minor = MINOR_NAMES.map((name) => {
    while (used.has(nextId)) nextId++
    used.add(nextId)
    return {
      categoryId: nextId,
      name,
      displayName: name,
      kind: 'other' as const,
      groupCount: 3 + Math.floor(unitOf(seed, 'minor-groups', nextId) * 28),
      cards: [20, 140] as const,
      since: 2000 + Math.floor(unitOf(seed, 'minor-since', nextId) * 22),
    }
  })
  return [...MAJOR, ...mid, ...minor].sort((a, b) => a.categoryId - b.categoryId)
}

function categoryRow(plan: CategoryPlan, seed: number): TcgcsvCategory {
  return {
    categoryId: plan.categoryId,
    name: plan.name,
    displayName: plan.displayName,
    seoCategoryName: plan.displayName,
    categoryDescription: `Buy and sell ${plan.displayName} singles and sealed product.`,
    categoryPageTitle: `${plan.displayName} Cards`,
    sealedLabel: 'Sealed Products',
    nonSealedLabel: 'Singles',
    conditionGuideUrl: 'https://help.tcgplayer.com/hc/en-us/articles/221430307',
    isScannable: plan.kind !== 'other',
    popularity: Math.round(plan.groupCount * 10 * unitOf(seed, 'popularity', plan.categoryId)),
    isDirect: plan.kind !== 'other',
    modifiedOn: timestampOf(dayOf('2025-01-01') + Math.floor(unitOf(seed, 'category-modified', plan.categoryId) * 300), seed, plan.categoryId),
  }
}

// ---------------------------------------------------------------------------------------------
// Days

const DAY_MS = 86_400_000
const BASE_DAY = dayOf(TCGCSV_BASE_DATE)
/** The newest group of each category is published up to this many days after the base day (presale). */
const NEWEST_LEAD_DAYS = 75

function dayOf(date: string): number {
  return Date.parse(`${date}T00:00:00Z`) / DAY_MS
}

function dateOf(day: number): string {
  return new Date(day * DAY_MS).toISOString().slice(0, 10)
}

/** A marketplace timestamp: no zone, sometimes fractional seconds. */
function timestampOf(day: number, seed: number, key: number): string {
  const second = Math.floor(unitOf(seed, 'second-of-day', key, day) * 86_400)
  const iso = new Date(day * DAY_MS + second * 1000).toISOString().slice(0, 19)
  const fraction = Math.floor(unitOf(seed, 'fraction', key, day) * 1000)
  return fraction % 3 === 0 ? iso : `${iso}.${String(fraction).replace(/0+$/, '') || '1'}`
}

// ---------------------------------------------------------------------------------------------
// Words

const words = (text: string): readonly string[] => text.trim().split(/\s+/)

const SET_ADJECTIVES = words(`
  Twilight Scarlet Crimson Obsidian Astral Shattered Forgotten Burning Silent Radiant Eternal Hidden Stellar Savage
  Verdant Frozen Primal Gilded Phantom Rising Lost Ancient Evolving Paradox
`)
const SET_NOUNS = words(`
  Masquerade Realms Legacy Horizons Eclipse Frontier Kingdoms Tides Origins Crown Storm Dominion Odyssey Rebellion
  Awakening Chronicles Dawn Empire Rift Covenant Destiny Vault Forge Ascension Sparks Nightmare Invasion Reckoning
  Conflux Requiem
`)
const CARD_ADJECTIVES = words(`
  Ancient Radiant Feral Silent Gilded Restless Sunken Verdant Fallen Eternal Savage Hidden Blazing Frozen Wandering
  Cursed Ironclad Starlit Hollow Vengeful
`)
const CARD_NOUNS = words(`
  Drake Sage Knight Golem Wyrm Sentinel Oracle Stalker Guardian Serpent Titan Sprite Warden Phoenix Hound Colossus
  Shaman Raider Behemoth Seer Paladin Leviathan Imp Mystic Ranger Hydra Wraith Archer Familiar Beetle
`)
const PLACES = words('Deep Wastes Spire Grove Abyss Tides Peaks Marsh Citadel Hollow')
const POKEMON_SPECIES = words(`
  Pikachu Charizard Bulbasaur Squirtle Eevee Gengar Snorlax Mewtwo Mew Lucario Greninja Gardevoir Dragonite Umbreon
  Sylveon Rayquaza Lugia Tyranitar Blaziken Garchomp Zoroark Mimikyu Dragapult Arcanine Gyarados Lapras Alakazam
  Machamp Scizor Togekiss Ceruledge Armarouge Miraidon Koraidon Terapagos Pidgeot Charmander Jigglypuff Psyduck Magikarp
`)
const POKEMON_TYPES = words('Grass Fire Water Lightning Psychic Fighting Darkness Metal Colorless Dragon')
const TYPE_LETTERS: Record<string, string> = {
  Grass: 'G',
  Fire: 'R',
  Water: 'W',
  Lightning: 'L',
  Psychic: 'P',
  Fighting: 'F',
  Darkness: 'D',
  Metal: 'M',
  Colorless: 'C',
  Dragon: 'N',
}
const ATTACK_NAMES = words('Tackle Ember Surf Thunderbolt Psybeam Slash Bite Headbutt Gust Crunch Flamethrower Hydro Blast Quake')
const YUGIOH_TYPES = words('Dragon Spellcaster Warrior Fiend Machine Fairy Beast Zombie Aqua Pyro Cyberse Wyrm Psychic Insect')
const YUGIOH_ATTRIBUTES = words('LIGHT DARK EARTH WATER FIRE WIND')
const MAGIC_TYPES = words('Human Elf Goblin Dragon Spirit Zombie Knight Wizard Beast Angel Demon Vampire Merfolk Elemental')
const POKEMON_ERAS = words('SV SWSH SM XY BW HGSS DP EX')

function pickOf<T>(items: readonly T[], unit: number): T {
  const item = items[Math.floor(unit * items.length)]
  if (item === undefined) throw new Error('tcgcsv mirror: pick out of range')
  return item
}

interface Weighted<T> {
  value: T
  weight: number
}

function weightedOf<T>(items: readonly Weighted<T>[], unit: number): T {
  const total = items.reduce((sum, item) => sum + item.weight, 0)
  let remaining = unit * total
  for (const item of items) {
    remaining -= item.weight
    if (remaining < 0) return item.value
  }
  return pickOf(items, 0.999999).value
}

// ---------------------------------------------------------------------------------------------
// Rarities and printings

interface Rarity {
  name: string
  /** 0 = bulk … 5 = chase: the price tier. */
  tier: number
}

const RARITIES: Record<Kind, readonly Weighted<Rarity>[]> = {
  pokemon: [
    ['Common', 40, 0],
    ['Uncommon', 28, 1],
    ['Rare', 12, 2],
    ['Holo Rare', 8, 3],
    ['Double Rare', 5, 3],
    ['Ultra Rare', 3, 4],
    ['Illustration Rare', 2.5, 4],
    ['Special Illustration Rare', 1, 5],
    ['Hyper Rare', 0.5, 5],
  ].map(rarityOf),
  magic: [
    ['C', 45, 0],
    ['U', 30, 1],
    ['R', 18, 3],
    ['M', 7, 4],
  ].map(rarityOf),
  yugioh: [
    ['Common', 45, 0],
    ['Rare', 18, 1],
    ['Super Rare', 15, 2],
    ['Ultra Rare', 12, 3],
    ['Secret Rare', 7, 4],
    ['Quarter Century Secret Rare', 2, 5],
    ['Starlight Rare', 1, 5],
  ].map(rarityOf),
  other: [
    ['Common', 45, 0],
    ['Uncommon', 25, 1],
    ['Rare', 18, 2],
    ['Super Rare', 8, 3],
    ['Secret Rare', 4, 5],
  ].map(rarityOf),
}

function rarityOf([name, weight, tier]: readonly (string | number)[]): Weighted<Rarity> {
  return { value: { name: String(name), tier: Number(tier) }, weight: Number(weight) }
}

/** A card's printings as subTypeNames, 1–3 of them, as TCGplayer lists them for its game and era. */
function printingsOf(kind: Kind, rarity: Rarity, vintage: boolean, unit: number): string[] {
  switch (kind) {
    case 'pokemon':
      if (vintage) return rarity.tier >= 3 ? ['1st Edition Holofoil', 'Holofoil'] : ['1st Edition', 'Unlimited']
      if (rarity.tier <= 1) return unit < 0.1 ? ['Normal', 'Holofoil', 'Reverse Holofoil'] : unit < 0.85 ? ['Normal', 'Reverse Holofoil'] : ['Normal']
      return rarity.tier <= 3 ? ['Holofoil', 'Reverse Holofoil'] : ['Holofoil']
    case 'magic':
      return unit < 0.05 ? ['Foil'] : unit < 0.15 ? ['Normal'] : ['Normal', 'Foil']
    case 'yugioh':
      if (vintage) return unit < 0.1 ? ['1st Edition', 'Unlimited', 'Limited'] : ['1st Edition', 'Unlimited']
      return unit < 0.7 ? ['1st Edition'] : unit < 0.95 ? ['1st Edition', 'Unlimited'] : ['Limited']
    case 'other':
      return unit < 0.5 ? ['Normal', 'Foil'] : ['Normal']
  }
}

const PRINTING_PREMIUM: Readonly<Record<string, number>> = {
  Foil: 1.8,
  Holofoil: 1.4,
  'Reverse Holofoil': 1.2,
  '1st Edition': 2.2,
  '1st Edition Holofoil': 4,
  Limited: 0.8,
}

/** Log-normal market price per rarity tier: median USD and spread in log space. */
const TIER_PRICES: readonly (readonly [median: number, sigma: number])[] = [
  [0.1, 0.5],
  [0.25, 0.6],
  [1, 0.8],
  [3.5, 0.9],
  [12, 0.8],
  [40, 0.9],
]

interface Sealed {
  suffix: string
  /** Median USD. */
  price: number
}

const SEALED: Record<Kind, readonly Sealed[]> = {
  pokemon: [
    { suffix: 'Booster Box', price: 160 },
    { suffix: 'Elite Trainer Box', price: 55 },
    { suffix: 'Booster Pack', price: 5 },
    { suffix: 'Booster Box Case', price: 950 },
  ],
  magic: [
    { suffix: 'Play Booster Box', price: 110 },
    { suffix: 'Collector Booster Display', price: 260 },
    { suffix: 'Bundle', price: 45 },
    { suffix: 'Play Booster Box Case', price: 640 },
  ],
  yugioh: [
    { suffix: 'Booster Box', price: 75 },
    { suffix: 'Booster Pack', price: 3.5 },
    { suffix: 'Booster Box Case', price: 800 },
  ],
  other: [
    { suffix: 'Booster Box', price: 90 },
    { suffix: 'Booster Pack', price: 4 },
    { suffix: 'Starter Deck', price: 15 },
  ],
}

// ---------------------------------------------------------------------------------------------
// Plans: what exists, cheap enough to count 300k products without building them

/** Positional ids (groupId = 30000 + 1000·category index + n, productId = 1000·groupId + n): lookups need no index. */
const GROUP_BASE = 30_000
const GROUPS_PER_CATEGORY = 1_000
const PRODUCTS_PER_GROUP = 1_000
const UNPRICED_SHARE = 0.01

interface GroupPlan {
  row: TcgcsvGroup
  category: CategoryPlan
  day: number
  vintage: boolean
  presale: boolean
  cardCount: number
  sealed: readonly Sealed[]
}

interface ProductPlan {
  productId: number
  /** Position within the group's cards (0-based); -1 for sealed products. */
  card: number
  sealed: Sealed | null
  rarity: Rarity | null
  printings: string[]
  priced: boolean
}

class LargeMirror implements TcgcsvMirror {
  private readonly plans: CategoryPlan[]
  private readonly byId: Map<number, { plan: CategoryPlan; index: number }>

  constructor(private readonly seed: number) {
    this.plans = categoryPlans(seed)
    this.byId = new Map(this.plans.map((plan, index) => [plan.categoryId, { plan, index }]))
  }

  categories(): TcgcsvCategory[] {
    return this.plans.map((plan) => categoryRow(plan, this.seed))
  }

  groups(categoryId: number): TcgcsvGroup[] | undefined {
    const entry = this.byId.get(categoryId)
    if (!entry) return undefined
    return Array.from({ length: entry.plan.groupCount }, (_, n) => this.groupPlan(entry.index, n).row)
  }

  group(groupId: number): TcgcsvGroup | undefined {
    return this.groupPlanOf(groupId)?.row
  }

  products(groupId: number): TcgcsvProduct[] | undefined {
    const group = this.groupPlanOf(groupId)
    if (!group) return undefined
    const category = categoryRow(group.category, this.seed)
    return this.productPlans(group).map((product) => productRow(category, group.row, this.productDraft(group, product)))
  }

  prices(groupId: number, date: string): TcgcsvPrice[] | undefined {
    const group = this.groupPlanOf(groupId)
    if (!group) return undefined
    return this.productPlans(group).flatMap((product) => (product.priced ? product.printings.map((printing) => priceOnDay(this.basePrice(group, product, printing), date)) : []))
  }

  groupOfProduct(productId: number): number | undefined {
    const groupId = Math.floor(productId / PRODUCTS_PER_GROUP)
    const group = this.groupPlanOf(groupId)
    if (!group) return undefined
    const n = productId % PRODUCTS_PER_GROUP
    return n >= 1 && n <= group.cardCount + group.sealed.length ? groupId : undefined
  }

  counts(): TcgcsvMirrorCounts {
    const counts = { categories: this.plans.length, groups: 0, products: 0, priceRows: 0 }
    this.plans.forEach((plan, index) => {
      for (let n = 0; n < plan.groupCount; n++) {
        const products = this.productPlans(this.groupPlan(index, n))
        counts.groups++
        counts.products += products.length
        for (const product of products) if (product.priced) counts.priceRows += product.printings.length
      }
    })
    return counts
  }

  private groupPlanOf(groupId: number): GroupPlan | undefined {
    const index = Math.floor((groupId - GROUP_BASE) / GROUPS_PER_CATEGORY)
    const plan = this.plans[index]
    const n = groupId - GROUP_BASE - index * GROUPS_PER_CATEGORY - 1
    return plan && n >= 0 && n < plan.groupCount ? this.groupPlan(index, n) : undefined
  }

  /** The n-th group (0 = oldest) of the index-th category. */
  private groupPlan(index: number, n: number): GroupPlan {
    const category = this.plans[index]
    if (!category) throw new Error(`tcgcsv mirror: no category at ${index}`)
    const seed = this.seed
    const groupId = GROUP_BASE + index * GROUPS_PER_CATEGORY + n + 1
    const first = dayOf(`${category.since}-01-01`)
    const newest = BASE_DAY + Math.floor(unitOf(seed, 'newest', category.categoryId) * NEWEST_LEAD_DAYS)
    const day = category.groupCount === 1 ? newest : Math.round(first + ((newest - first) * n) / (category.groupCount - 1))
    const supplemental = unitOf(seed, 'supplemental', groupId) < 0.15
    const base = uniqueSetName(n)
    const name = nameOfGroup(category, n, base, supplemental)
    const modifiedDay =
      day > BASE_DAY - 3
        ? BASE_DAY - 2 - Math.floor(unitOf(seed, 'presale-modified', groupId) * 20)
        : Math.min(BASE_DAY - 3, day + 30 + Math.floor(unitOf(seed, 'modified', groupId) * 400))
    const [min, max] = category.cards
    const span = supplemental ? Math.max(1, Math.round((max - min) / 4)) : max - min
    const sealedCount = supplemental ? 0 : 2 + Math.floor(unitOf(seed, 'sealed-count', groupId) * (SEALED[category.kind].length - 1))
    return {
      row: {
        groupId,
        name,
        abbreviation: abbreviationOf(category, n, groupId, seed),
        isSupplemental: supplemental,
        publishedOn: `${dateOf(day)}T00:00:00`,
        modifiedOn: timestampOf(modifiedDay, seed, groupId),
        categoryId: category.categoryId,
      },
      category,
      day,
      vintage: day < dayOf(category.kind === 'yugioh' ? '2010-01-01' : '2003-01-01'),
      presale: day > BASE_DAY,
      cardCount: min + Math.floor(unitOf(seed, 'cards', groupId) * (span + 1)),
      sealed: SEALED[category.kind].slice(0, sealedCount),
    }
  }

  private productPlans(group: GroupPlan): ProductPlan[] {
    const seed = this.seed
    const kind = group.category.kind
    const plans: ProductPlan[] = []
    for (let card = 0; card < group.cardCount; card++) {
      const productId = group.row.groupId * PRODUCTS_PER_GROUP + card + 1
      const rarity = weightedOf(RARITIES[kind], unitOf(seed, 'rarity', productId))
      plans.push({
        productId,
        card,
        sealed: null,
        rarity,
        printings: printingsOf(kind, rarity, group.vintage, unitOf(seed, 'printings', productId)),
        priced: unitOf(seed, 'priced', productId) >= UNPRICED_SHARE,
      })
    }
    group.sealed.forEach((sealed, index) => {
      plans.push({
        productId: group.row.groupId * PRODUCTS_PER_GROUP + group.cardCount + index + 1,
        card: -1,
        sealed,
        rarity: null,
        printings: [kind === 'yugioh' ? (group.vintage ? 'Unlimited' : '1st Edition') : 'Normal'],
        priced: true,
      })
    })
    return plans
  }

  // -------------------------------------------------------------------------------------------
  // Rows

  private productDraft(group: GroupPlan, product: ProductPlan) {
    const modifiedOn = group.row.modifiedOn
    const presaleUntil = group.presale ? group.row.publishedOn : undefined
    if (product.sealed) {
      const description: TcgcsvExtendedData[] =
        unitOf(this.seed, 'sealed-description', product.productId) < 0.5
          ? extended('other', [['Description', `A sealed ${product.sealed.suffix.toLowerCase()} of ${group.row.name}.`]])
          : []
      return { productId: product.productId, name: `${group.row.name} ${product.sealed.suffix}`, modifiedOn, presaleUntil, extendedData: description }
    }
    const { name, extendedData } = this.card(group, product)
    return { productId: product.productId, name, modifiedOn, presaleUntil, extendedData }
  }

  private card(group: GroupPlan, product: ProductPlan): { name: string; extendedData: TcgcsvExtendedData[] } {
    const u = (purpose: string) => unitOf(this.seed, purpose, product.productId)
    const rarity = product.rarity?.name ?? 'Common'
    const number = product.card + 1
    const title = `${pickOf(CARD_ADJECTIVES, u('adjective'))} ${pickOf(CARD_NOUNS, u('noun'))}`
    switch (group.category.kind) {
      case 'pokemon': {
        const total = String(group.cardCount).padStart(3, '0')
        const cardNumber = `${String(number).padStart(3, '0')}/${total}`
        if (u('trainer') < 0.15) {
          return {
            name: `${title} - ${cardNumber}`,
            extendedData: extended('pokemon', [
              ['Number', cardNumber],
              ['Rarity', rarity],
              ['Card Type', pickOf(['Item', 'Supporter', 'Stadium'], u('trainer-type'))],
              ['CardText', `Search your deck for up to ${1 + Math.floor(u('search') * 3)} cards and put them into your hand.`],
            ]),
          }
        }
        const type = pickOf(POKEMON_TYPES, u('type'))
        const letter = TYPE_LETTERS[type] ?? 'C'
        const suffix = pickOf(['', '', '', ' ex', ' V', ' VSTAR'], u('suffix'))
        const damage = 10 * (1 + Math.floor(u('damage') * 25))
        const fields: [ExtendedField<'pokemon'>, string][] = [
          ['Number', cardNumber],
          ['Rarity', rarity],
          ['Card Type', type],
          ['HP', String(40 + 10 * Math.floor(u('hp') * 30))],
          ['Stage', pickOf(['Basic', 'Stage 1', 'Stage 2'], u('stage'))],
        ]
        if (u('ability') < 0.3) fields.push(['CardText', 'Ability: Once during your turn, you may draw a card.'])
        fields.push(['Attack 1', `[${letter}C] ${pickOf(ATTACK_NAMES, u('attack-1'))} (${damage})`])
        if (u('second-attack') < 0.5) fields.push(['Attack 2', `[${letter}${letter}C] ${pickOf(ATTACK_NAMES, u('attack-2'))} (${damage + 60})`])
        fields.push(['Weakness', `${pickOf(Object.values(TYPE_LETTERS), u('weakness'))}x2`])
        if (u('resistance') < 0.2) fields.push(['Resistance', `${pickOf(Object.values(TYPE_LETTERS), u('resistance-type'))}-30`])
        fields.push(['RetreatCost', String(Math.floor(u('retreat') * 5))])
        return { name: `${pickOf(POKEMON_SPECIES, u('species'))}${suffix} - ${cardNumber}`, extendedData: extended('pokemon', fields) }
      }
      case 'magic': {
        const legendary = u('legendary') < 0.1
        const name = legendary ? `${pickOf(CARD_NOUNS, u('first-name'))}, ${title}` : title
        const fields: [ExtendedField<'magic'>, string][] = [
          ['Rarity', rarity],
          ['Number', String(number).padStart(4, '0')],
        ]
        if (u('creature') < 0.6) {
          const subtypes = `${pickOf(MAGIC_TYPES, u('race'))} ${pickOf(MAGIC_TYPES, u('class'))}`
          fields.push(
            ['SubType', `${legendary ? 'Legendary ' : ''}Creature — ${subtypes}`],
            ['P', String(Math.floor(u('power') * 8))],
            ['T', String(1 + Math.floor(u('toughness') * 8))],
            ['OracleText', pickOf(['Flying', 'Trample', 'Vigilance', 'Deathtouch', 'Haste<br>When this creature enters, draw a card.'], u('oracle'))],
          )
        } else {
          fields.push(
            ['SubType', pickOf(['Instant', 'Sorcery', 'Enchantment', 'Artifact', 'Land'], u('spell-type'))],
            ['OracleText', `Target player draws ${1 + Math.floor(u('draw') * 3)} cards.`],
          )
        }
        if (u('flavor') < 0.4) fields.push(['FlavorText', `Few return from the ${pickOf(PLACES, u('place'))}.`])
        return { name, extendedData: extended('magic', fields) }
      }
      case 'yugioh': {
        const cardNumber = `${group.row.abbreviation ?? 'PRMO'}-EN${String(number).padStart(3, '0')}`
        const cardType = weightedOf(
          [
            ['Normal Monster', 10],
            ['Effect Monster', 45],
            ['Fusion Monster', 5],
            ['Synchro Monster', 5],
            ['Xyz Monster', 5],
            ['Link Monster', 5],
            ['Spell Card', 15],
            ['Trap Card', 10],
          ].map(([value, weight]) => ({ value: String(value), weight: Number(weight) })),
          u('card-type'),
        )
        const fields: [ExtendedField<'yugioh'>, string][] = [
          ['Rarity', rarity],
          ['Number', cardNumber],
          ['Card Type', cardType],
        ]
        if (cardType.endsWith('Monster')) {
          fields.push(
            ['MonsterType', pickOf(YUGIOH_TYPES, u('monster-type'))],
            ['Attribute', pickOf(YUGIOH_ATTRIBUTES, u('attribute'))],
            ['Attack', String(100 * Math.floor(u('atk') * 31))],
          )
          if (cardType !== 'Link Monster') fields.push(['Defense', String(100 * Math.floor(u('def') * 31))])
        }
        fields.push(['Description', `If this card is sent to the GY: You can add 1 card from your Deck to your hand.`])
        const name = u('of-the') < 0.3 ? `${pickOf(CARD_NOUNS, u('noun-2'))} of the ${pickOf(PLACES, u('place'))}` : title
        return { name, extendedData: extended('yugioh', fields) }
      }
      case 'other': {
        const fields: [ExtendedField<'other'>, string][] = [
          ['Number', `${group.row.abbreviation ?? 'PR'}${String(number).padStart(3, '0')}`],
          ['Rarity', rarity],
        ]
        if (u('description') < 0.7) fields.push(['Description', 'When this enters play, draw a card.'])
        return { name: title, extendedData: extended('other', fields) }
      }
    }
  }

  private basePrice(group: GroupPlan, product: ProductPlan, printing: string): TcgcsvPrice {
    const u = (purpose: string) => unitOf(this.seed, purpose, product.productId, printing)
    const [median, sigma] = product.sealed ? [product.sealed.price, 0.4] : (TIER_PRICES[product.rarity?.tier ?? 0] ?? [0.1, 0.5])
    // One spread per product, so a card's foil stays dearer than its normal printing.
    const z = (unitOf(this.seed, 'z1', product.productId) + unitOf(this.seed, 'z2', product.productId) + unitOf(this.seed, 'z3', product.productId) - 1.5) * 2
    const vintage = group.vintage && !product.sealed ? 5 : 1
    const market = median * Math.exp(sigma * z) * (PRINTING_PREMIUM[printing] ?? 1) * (0.95 + 0.1 * u('printing-noise')) * vintage
    const cents = (value: number) => Math.max(0.01, Math.round(value * 100) / 100)
    const orNull = (share: number, purpose: string, value: number) => (u(purpose) < share ? null : cents(value))
    return {
      productId: product.productId,
      lowPrice: orNull(0.01, 'low-null', market * (0.7 + 0.25 * u('low'))),
      midPrice: orNull(0.01, 'mid-null', market * (1 + 0.3 * u('mid'))),
      highPrice: orNull(0.02, 'high-null', market * (1.5 + 4.5 * u('high'))),
      marketPrice: orNull(group.presale ? 0.6 : 0.05, 'market-null', market),
      directLowPrice: orNull(0.75, 'direct-null', market * (0.9 + 0.2 * u('direct'))),
      subTypeName: printing,
    }
  }
}

/** The n-th name of the injective walk over adjective × noun, so names never repeat within a category. */
function uniqueSetName(n: number): string {
  const adjectives = SET_ADJECTIVES.length
  const round = Math.floor(n / adjectives)
  const noun = SET_NOUNS[(round + 7 * (n % adjectives)) % SET_NOUNS.length]
  const name = `${SET_ADJECTIVES[n % adjectives]} ${noun}`
  return round < SET_NOUNS.length ? name : `${name} ${Math.floor(round / SET_NOUNS.length) + 1}`
}

function nameOfGroup(category: CategoryPlan, n: number, base: string, supplemental: boolean): string {
  if (category.kind === 'pokemon') {
    const era = POKEMON_ERAS[Math.min(POKEMON_ERAS.length - 1, Math.floor(((category.groupCount - 1 - n) * POKEMON_ERAS.length) / category.groupCount))]
    return supplemental ? `${era} Black Star Promos: ${base}` : `${era}${(n % 12) + 1}: ${base}`
  }
  if (!supplemental) return base
  return category.kind === 'magic' ? `Commander: ${base}` : `${base} Promos`
}

/** Three or four capitals, unique within the category; promo groups of minor games have none. */
function abbreviationOf(category: CategoryPlan, n: number, groupId: number, seed: number): string | null {
  if (category.kind === 'other' && unitOf(seed, 'no-abbreviation', groupId) < 0.05) return null
  let value = n + Math.floor(unitOf(seed, 'abbreviation-offset', category.categoryId) * 10_000)
  let letters = ''
  for (let i = 0; i < (category.kind === 'yugioh' ? 4 : 3); i++) {
    letters = String.fromCharCode(65 + (value % 26)) + letters
    value = Math.floor(value / 26)
  }
  return letters
}

const LARGE_MIRROR_SEED = 20261120

/** The `large` mirror: about 300,000 products in 57 categories, generated group by group on demand. */
export function createLargeMirror(seed = LARGE_MIRROR_SEED): TcgcsvMirror {
  return new LargeMirror(seed)
}

if (import.meta.main) {
  const started = performance.now()
  const counts = createLargeMirror().counts()
  console.log(JSON.stringify({ ...counts, countedInMs: Math.round(performance.now() - started) }))
}
