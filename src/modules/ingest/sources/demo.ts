/**
 * A synthetic marketplace for demos, tests and benchmarks: 57 real game names with invented sets,
 * cards, sealed products, daily prices, sales and live listings.
 *
 * Every value is derived from a hash of (seed, entity id, purpose, day) rather than from a shared
 * PRNG sequence, so output never depends on which method ran first or how often.
 */
import type { GameKind } from '../../catalog/printings'
import {
  CONDITIONS,
  type Condition,
  type ListingCondition,
  type MarketplaceSource,
  SEALED_CONDITION,
  type SourceGame,
  type SourceListing,
  type SourceListings,
  type SourcePrice,
  type SourceProduct,
  type SourceSale,
  type SourceSet,
} from '../source'

import { DEMO_SCALES, type DemoScale } from './demo-scales'

export interface DemoSourceOptions {
  scale: DemoScale
  seed?: number
  /** Clock for live listings (usually the service's `clock.now`); only its UTC date matters. */
  now: () => Date
}

const DEFAULT_SEED = 20250302
/**
 * The release calendar's anchor: upcoming sets are released after this day, the others on or before
 * it. Fixed, so release dates never move with the clock; whether a set is out yet is the clock's
 * (docs/adr/0103-presale-sets-in-the-demo.md).
 */
const UPCOMING_AFTER = '2026-11-21'
/** The marketplace keeps no price history before this day. */
const HISTORY_START = '2025-03-01'
const DAY_MS = 86_400_000
/** Ids are positional (groupId = categoryId * 10000 + n, productId = groupId * 1000 + n) so lookups need no index. */
const GROUPS_PER_GAME = 10_000
const PRODUCTS_PER_GROUP = 1_000
/** Enough generated groups stay cached for a sync to price what it just listed, without holding a large catalog. */
const GROUP_CACHE_SIZE = 64

// ---------------------------------------------------------------------------------------------
// Keyed randomness

const purposeKeys = new Map<string, number>()

function purposeKey(purpose: string): number {
  let key = purposeKeys.get(purpose)
  if (key === undefined) {
    key = 0x811c9dc5
    for (let i = 0; i < purpose.length; i++) key = Math.imul(key ^ purpose.charCodeAt(i), 0x01000193)
    purposeKeys.set(purpose, key)
  }
  return key
}

/** One murmur3 round folding `value` into `hash`. */
function mix(hash: number, value: number): number {
  const k = Math.imul(value | 0, 0xcc9e2d51)
  const h = hash ^ Math.imul((k << 15) | (k >>> 17), 0x1b873593)
  return (Math.imul((h << 13) | (h >>> 19), 5) + 0xe6546b64) | 0
}

function avalanche(hash: number): number {
  let h = Math.imul(hash ^ (hash >>> 16), 0x85ebca6b)
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
  return (h ^ (h >>> 16)) >>> 0
}

const TWO_POW_32 = 4_294_967_296

interface Weighted {
  weight: number
}

/** Random draws for one entity; each draw is keyed by its purpose and up to two numbers (e.g. a day). */
class Draw {
  constructor(private readonly key: number) {}

  child(...parts: number[]): Draw {
    let key = this.key
    for (const part of parts) key = mix(key, part)
    return new Draw(key)
  }

  /** Uniform in [0, 1). */
  unit(purpose: string, a = 0, b = 0): number {
    return avalanche(this.raw(purpose, a, b)) / TWO_POW_32
  }

  between(purpose: string, min: number, max: number, a = 0, b = 0): number {
    return min + this.unit(purpose, a, b) * (max - min)
  }

  int(purpose: string, min: number, max: number, a = 0, b = 0): number {
    return min + Math.floor(this.unit(purpose, a, b) * (max - min + 1))
  }

  chance(purpose: string, probability: number, a = 0, b = 0): boolean {
    return this.unit(purpose, a, b) < probability
  }

  pick<T>(purpose: string, items: readonly T[], a = 0, b = 0): T {
    return itemAt(items, Math.floor(this.unit(purpose, a, b) * items.length))
  }

  weighted<T extends Weighted>(purpose: string, items: readonly T[], a = 0, b = 0): T {
    const total = items.reduce((sum, item) => sum + item.weight, 0)
    let remaining = this.unit(purpose, a, b) * total
    for (const item of items) {
      remaining -= item.weight
      if (remaining < 0) return item
    }
    return itemAt(items, items.length - 1)
  }

  /** Standard normal via Box–Muller. */
  normal(purpose: string, a = 0, b = 0): number {
    const raw = this.raw(purpose, a, b)
    const u1 = (avalanche(raw) + 1) / (TWO_POW_32 + 1)
    const u2 = avalanche(mix(raw, 0x5bd1e995)) / TWO_POW_32
    return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2)
  }

  private raw(purpose: string, a: number, b: number): number {
    return mix(mix(mix(this.key, purposeKey(purpose)), a), b)
  }
}

/** First key of every child draw, so e.g. a game and a product with equal ids never share randomness. */
const Tag = { game: 1, set: 2, product: 3, printing: 4, listing: 5 } as const

function itemAt<T>(items: readonly T[], index: number): T {
  const item = items[index]
  if (item === undefined) throw new Error(`demo source: index ${index} out of range`)
  return item
}

// ---------------------------------------------------------------------------------------------
// Small helpers

function words(text: string): readonly string[] {
  return text.trim().split(/\s+/)
}

function choices(entries: readonly (readonly [string, number])[]): readonly { value: string; weight: number }[] {
  return entries.map(([value, weight]) => ({ value, weight }))
}

function slugify(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
}

function money(value: number): number {
  return Math.max(0.01, Math.round(value * 100) / 100)
}

function pad3(value: number): string {
  return String(value).padStart(3, '0')
}

function formatDay(day: number): string {
  return new Date(day * DAY_MS).toISOString().slice(0, 10)
}

/** Day number of a YYYY-MM-DD date, or null when it is not a real calendar date. */
function parseDay(date: string): number | null {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(date)
  if (!match) return null
  const day = Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3])) / DAY_MS
  return Number.isFinite(day) && formatDay(day) === date ? day : null
}

// ---------------------------------------------------------------------------------------------
// Games

const MAJOR_GAMES: readonly (readonly [string, GameKind])[] = [
  ['Magic: The Gathering', 'mana'],
  ['YuGiOh', 'duel'],
  ['Pokemon', 'creature'],
  ['Disney Lorcana', 'ink'],
  ['One Piece Card Game', 'other'],
  ['Flesh and Blood TCG', 'action'],
  ['Digimon Card Game', 'other'],
]

const MINOR_GAMES: readonly string[] = [
  'Dragon Ball Super Fusion World',
  'Star Wars: Unlimited',
  'Weiss Schwarz',
  'Cardfight!! Vanguard',
  'Final Fantasy TCG',
  'Force of Will',
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
  'Dragon Ball Super CCG',
  'Star Wars Destiny',
  'Transformers TCG',
  'WoW TCG',
  'Akora',
  'Gundam Card Game',
  'Riftbound',
  'Altered',
  'Elestrals',
  'Bakugan',
  'Dragoborne',
  'Lightseekers',
  'Kryptik',
  'Argent Saga',
  'Zombie World Order',
  'Chrono Clash',
  'Exodus TCG',
  'Hololive OCG',
  'Godzilla Card Game',
  'Build Divide',
  'Wixoss',
  'Gate of Heaven',
  'Battle Scenes',
  'Digimon Collectible Card Game',
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
]

/** Where the demo marketplace keeps its pictures (product images live under `product/`). */
const IMAGES = 'https://marketplace.example/images'

/** Append only: a game's position is its categoryId. */
const GAMES: readonly SourceGame[] = [
  ...MAJOR_GAMES.map(([name, kind]) => ({ name, kind, priority: 3 as const })),
  ...MINOR_GAMES.map((name) => ({ name, kind: 'other' as const, priority: 2 as const })),
].map((game, index) => {
  const categoryId = index + 1
  return {
    categoryId,
    name: game.name,
    slug: slugify(game.name),
    priority: game.priority,
    kind: game.kind,
    imageUrl: `${IMAGES}/category/${categoryId}.jpg`,
    ...(hasArtwork(game.priority, categoryId) ? { logoUrl: `${IMAGES}/category/${categoryId}/logo.png` } : {}),
  }
})

/**
 * Every game and set has an image; major games and every other minor game also have a logo, and
 * their sets an icon, so the API shows both a known and an unknown one (docs/adr/0091-images-of-games-and-sets.md). Decided by position, not the seed: the game list is the same for all.
 */
function hasArtwork(priority: number, categoryId: number): boolean {
  return priority === 3 || categoryId % 2 === 0
}

/** These always have a set released after UPCOMING_AFTER, so every scale and seed has presale products until then. */
const UPCOMING_SET_GAMES = new Set(['Pokemon', 'Magic: The Gathering'])
/** Games whose card names sometimes carry accents, to exercise accent-insensitive search. */
const ACCENTED_GAMES = new Set(['Pokemon', 'Disney Lorcana', 'Altered', 'Sorcery: Contested Realm', 'Force of Will'])
/** Kinds whose oldest sets were printed in 1st Edition / Unlimited runs. */
const VINTAGE_KINDS = new Set<GameKind>(['creature', 'action'])

// ---------------------------------------------------------------------------------------------
// Scales

type Range = readonly [min: number, max: number]
type GameTier = 'major' | 'minor'

interface ScaleShape {
  setsPerGame: Record<GameTier, Range>
  cardsPerSet: Record<GameTier, Range>
  sealedPerSet: Range
}

const SCALE_SHAPES: Record<DemoScale, ScaleShape> = {
  tiny: { setsPerGame: { major: [2, 2], minor: [1, 1] }, cardsPerSet: { major: [8, 10], minor: [6, 8] }, sealedPerSet: [1, 2] },
  small: { setsPerGame: { major: [4, 6], minor: [2, 3] }, cardsPerSet: { major: [70, 100], minor: [16, 26] }, sealedPerSet: [2, 3] },
  medium: { setsPerGame: { major: [18, 24], minor: [4, 6] }, cardsPerSet: { major: [150, 210], minor: [40, 70] }, sealedPerSet: [2, 3] },
  large: { setsPerGame: { major: [55, 65], minor: [12, 16] }, cardsPerSet: { major: [220, 300], minor: [110, 160] }, sealedPerSet: [2, 3] },
}

function tierOf(game: SourceGame): GameTier {
  return game.priority === 3 ? 'major' : 'minor'
}

// ---------------------------------------------------------------------------------------------
// Sets

const SET_ADJECTIVES = words(`
  Twilight Scarlet Crimson Obsidian Astral Shattered Forgotten Burning Silent Radiant Eternal Hidden Stellar
  Savage Verdant Frozen Primal Gilded Phantom Rising Lost Ancient Evolving Paradox
`)
const SET_NOUNS = words(`
  Masquerade Realms Legacy Horizons Eclipse Frontier Kingdoms Tides Origins Crown Storm Dominion Odyssey
  Rebellion Awakening Chronicles Dawn Empire Rift Covenant Destiny Vault Forge Ascension
`)

interface SetPlan {
  set: SourceSet
  /** 0 = the game's oldest set. */
  index: number
  vintage: boolean
}

function planSets(root: Draw, game: SourceGame, shape: ScaleShape): SetPlan[] {
  const draw = root.child(Tag.game, game.categoryId)
  const count = draw.int('set-count', ...shape.setsPerGame[tierOf(game)])
  const vintageCount = VINTAGE_KINDS.has(game.kind) ? Math.max(1, Math.round(count * 0.1)) : 0
  const usedSlugs = new Set<string>()
  return planReleaseDays(draw, game, count).map((day, index) => {
    const name = uniqueSetName(draw, index, usedSlugs)
    const releaseDate = formatDay(day)
    const groupId = game.categoryId * GROUPS_PER_GAME + index + 1
    const set: SourceSet = {
      groupId,
      categoryId: game.categoryId,
      name,
      slug: slugify(name),
      abbreviation: abbreviate(name, index + 1),
      releaseDate,
      imageUrl: `${IMAGES}/group/${groupId}.jpg`,
      ...(hasArtwork(game.priority, game.categoryId) ? { setIconUrl: `${IMAGES}/group/${groupId}/icon.svg` } : {}),
    }
    return { set, index, vintage: index < vintageCount }
  })
}

/** Release days oldest first, counting back from the newest set so every scale shares recent history. */
function planReleaseDays(draw: Draw, game: SourceGame, count: number): number[] {
  const anchor = dayNumberOf(UPCOMING_AFTER)
  const hasUpcomingSet = UPCOMING_SET_GAMES.has(game.name) || draw.chance('upcoming-set', 0.08)
  const newest = hasUpcomingSet ? anchor + draw.int('newest-lead', 10, 75) : anchor - draw.int('newest-lag', 5, 200)
  const spacing = game.priority === 3 ? draw.between('spacing', 70, 110) : draw.between('spacing', 110, 280)
  const days = new Array<number>(count)
  let day = newest
  for (let index = count - 1; index >= 0; index--) {
    days[index] = day
    day -= Math.round(spacing * draw.between('release-gap', 0.6, 1.4, index))
  }
  return days
}

function dayNumberOf(date: string): number {
  const day = parseDay(date)
  if (day === null) throw new Error(`demo source: bad constant date ${date}`)
  return day
}

function uniqueSetName(draw: Draw, index: number, usedSlugs: Set<string>): string {
  let name = 'Base Set'
  for (let attempt = 0; index > 0; attempt++) {
    name = setName(draw, index, attempt)
    // The name space is far larger than any game's set count; the suffix only guards against a pathological seed.
    if (attempt > 50) name = `${name} ${index + 1}`
    if (!usedSlugs.has(slugify(name))) break
  }
  usedSlugs.add(slugify(name))
  return name
}

function setName(draw: Draw, index: number, attempt: number): string {
  const noun = draw.pick('set-noun', SET_NOUNS, index, attempt)
  if (draw.chance('set-pair', 0.2, index, attempt)) {
    const other = draw.pick('set-noun-2', SET_NOUNS, index, attempt)
    if (other !== noun) return `${noun} & ${other}`
  }
  return `${draw.pick('set-adjective', SET_ADJECTIVES, index, attempt)} ${noun}`
}

/** Initials plus the set number: 2–5 characters, unique within the game. */
function abbreviate(name: string, setNumber: number): string {
  const initials = name
    .split(' ')
    .filter((word) => /^[A-Za-z]/.test(word) && word !== 'of')
    .map((word) => word.charAt(0).toUpperCase())
    .join('')
    .slice(0, 3)
  return `${initials}${setNumber}`
}

// ---------------------------------------------------------------------------------------------
// Cards: names, rarities, printings, attributes

const CARD_PREFIXES = words(`
  Ember Tidal Storm Shadow Frost Thorn Iron Ash Moon Sun Void Gale Stone Blood Star Dusk Dawn Rune Mist Bone
  Glimmer Hollow Wild Silver Crimson Ivy Thunder Cinder Briar Spark Night Sky
`)
const CARD_SUFFIXES = words('claw fang wing heart born shard song mane scale horn weaver caller blade spire tail eye')
const CARD_NOUNS = words(`
  Drake Sage Knight Golem Wyrm Sentinel Oracle Stalker Guardian Serpent Titan Sprite Warden Phoenix Hound
  Colossus Shaman Raider Behemoth Seer Paladin Leviathan Imp Mystic Ranger Hydra Wraith Archer Familiar Beetle
`)
const CARD_ADJECTIVES = words(`
  Ancient Radiant Feral Silent Gilded Restless Sunken Verdant Fallen Eternal Savage Hidden Blazing Frozen
  Wandering Cursed
`)
const CARD_PLACES = words('Deep Wastes Spire Grove Abyss Tides Peaks Marsh Citadel Hollow')
const ACCENTED_TITLES = words('Éclair Ámbar Lumière Jötunn Señor Zoë Brûlée Øresund Noël Renée')
const FLAVOR_OPENINGS = [
  'Where the tide turns,',
  'Long after the war,',
  'In the silence of the grove,',
  'Beneath a broken moon,',
  'When the forges cooled,',
  'At the edge of the map,',
  'Before the first dawn,',
  'Once the bells fell quiet,',
]
const FLAVOR_CLOSINGS = [
  'even stone remembers.',
  'only the patient survive.',
  'the old oaths still bind.',
  'something else was listening.',
  'no one counted the cost.',
  'the hunters became the hunted.',
  'hope wore iron boots.',
  'the sky kept its secrets.',
]

interface Rarity extends Weighted {
  name: string
  /** Index into TIER_PRICES / TIER_LISTINGS: 0 = bulk … 5 = chase. */
  tier: number
}

function rarity(name: string, weight: number, tier: number): Rarity {
  return { name, weight, tier }
}

const RARITIES: Record<GameKind, readonly Rarity[]> = {
  creature: [rarity('Common', 45, 0), rarity('Uncommon', 28, 1), rarity('Rare', 12, 2), rarity('Holo Rare', 8, 3), rarity('Ultra Rare', 5, 4), rarity('Secret Rare', 2, 5)],
  mana: [rarity('Common', 45, 0), rarity('Uncommon', 30, 1), rarity('Rare', 18, 3), rarity('Mythic', 7, 4)],
  duel: [rarity('Common', 45, 0), rarity('Rare', 20, 1), rarity('Super Rare', 15, 2), rarity('Ultra Rare', 12, 3), rarity('Secret Rare', 6, 4), rarity('Starlight Rare', 2, 5)],
  action: [rarity('Common', 45, 0), rarity('Rare', 25, 1), rarity('Super Rare', 15, 2), rarity('Majestic', 8, 3), rarity('Legendary', 5, 4), rarity('Fabled', 2, 5)],
  ink: [rarity('Common', 40, 0), rarity('Uncommon', 28, 1), rarity('Rare', 17, 2), rarity('Super Rare', 10, 3), rarity('Legendary', 4, 4), rarity('Enchanted', 1, 5)],
  other: [rarity('Common', 45, 0), rarity('Uncommon', 25, 1), rarity('Rare', 18, 2), rarity('Super Rare', 8, 3), rarity('Secret Rare', 4, 5)],
}

/** Log-normal base price per rarity tier (median USD, sigma in log space). */
const TIER_PRICES: readonly { median: number; sigma: number }[] = [
  { median: 0.12, sigma: 0.5 },
  { median: 0.3, sigma: 0.6 },
  { median: 1.2, sigma: 0.8 },
  { median: 4, sigma: 0.9 },
  { median: 12, sigma: 0.8 },
  { median: 35, sigma: 0.8 },
]
/** Median listing count per rarity tier, in log space: chase cards draw far more sellers. */
const TIER_LISTINGS: readonly number[] = [2.0, 2.2, 2.8, 3.6, 4.6, 5.6]
const VINTAGE_PREMIUM = 2

const PRINTING_PREMIUM: Readonly<Record<string, number>> = {
  Normal: 1,
  Foil: 1.8,
  Holofoil: 1.6,
  'Reverse Holofoil': 1.3,
  '1st Edition': 2.5,
  Unlimited: 1,
  Limited: 0.8,
  'Rainbow Foil': 1.7,
  'Cold Foil': 4,
  '1st Edition Normal': 2,
  '1st Edition Rainbow Foil': 3.5,
  '1st Edition Cold Foil': 8,
  'Unlimited Edition Normal': 1,
  'Unlimited Edition Rainbow Foil': 1.6,
}

/** Printings per card, always an ordered subset of PRINTINGS_BY_KIND[kind]. */
function cardPrintings(kind: GameKind, tier: number, vintage: boolean, draw: Draw): string[] {
  const roll = draw.unit('printings')
  switch (kind) {
    case 'mana':
      return roll < 0.12 ? ['Foil'] : ['Normal', 'Foil']
    case 'creature':
      if (vintage) return ['1st Edition', 'Unlimited']
      if (tier >= 4) return ['Holofoil']
      if (tier === 3) return ['Holofoil', 'Reverse Holofoil']
      return roll < 0.75 ? ['Normal', 'Reverse Holofoil'] : ['Normal']
    case 'duel':
      return roll < 0.75 ? ['1st Edition', 'Unlimited'] : ['Limited']
    case 'action': {
      if (!vintage) return tier >= 5 ? ['Cold Foil'] : tier >= 3 ? ['Rainbow Foil', 'Cold Foil'] : ['Normal', 'Rainbow Foil']
      // Vintage runs: a 1st Edition and an Unlimited printing, foils for some (cold foils for the rarest and a few more).
      const coldFoil = tier >= 3 || draw.chance('first-edition-cold-foil', 0.25)
      return [
        '1st Edition Normal',
        '1st Edition Rainbow Foil',
        ...(coldFoil ? ['1st Edition Cold Foil'] : []),
        'Unlimited Edition Normal',
        ...(draw.chance('unlimited-rainbow-foil', 0.5) ? ['Unlimited Edition Rainbow Foil'] : []),
      ]
    }
    case 'ink':
      if (tier >= 5) return ['Holofoil']
      return roll < 0.35 ? ['Normal', 'Holofoil', 'Reverse Holofoil'] : ['Normal', 'Holofoil']
    case 'other':
      if (roll < 0.05) return ['Foil']
      return roll < 0.5 ? ['Normal'] : ['Normal', 'Foil']
  }
}

type NameStyle = 'plain' | 'accented' | 'trainer'

function cardName(draw: Draw, attempt: number, style: NameStyle): string {
  if (style !== 'plain' && draw.chance('accented-name', 0.06, attempt)) {
    const title = draw.pick('accent-title', ACCENTED_TITLES, attempt)
    return style === 'trainer' ? `Pokémon Trainer ${title}` : `${title} ${draw.pick('accent-noun', CARD_NOUNS, attempt)}`
  }
  const noun = draw.pick('noun', CARD_NOUNS, attempt)
  switch (draw.int('name-pattern', 0, 4, attempt)) {
    case 0:
      return `${draw.pick('adjective', CARD_ADJECTIVES, attempt)} ${noun}`
    case 1:
      return `${noun} of the ${draw.pick('place', CARD_PLACES, attempt)}`
    default:
      return `${draw.pick('prefix', CARD_PREFIXES, attempt)}${draw.pick('suffix', CARD_SUFFIXES, attempt)} ${noun}`
  }
}

function uniqueCardName(draw: Draw, style: NameStyle, usedNames: Set<string>): string {
  for (let attempt = 0; ; attempt++) {
    const name = cardName(draw, attempt, style)
    if (!usedNames.has(name)) {
      usedNames.add(name)
      return name
    }
  }
}

function flavorText(draw: Draw): string {
  return `${draw.pick('flavor-opening', FLAVOR_OPENINGS)} ${draw.pick('flavor-closing', FLAVOR_CLOSINGS)}`
}

const ENERGY_TYPES = words('Fire Water Grass Lightning Psychic Fighting Darkness Metal Colorless Dragon')
const ATTACK_NAMES = words(`
  Scratch Ember Tackle Surf Thunderbolt Vine Psybeam Slash Gust Quake Bite Blizzard Flare Headbutt
`)
const STAGES = choices([
  ['Basic', 60],
  ['Stage 1', 28],
  ['Stage 2', 12],
])

function attack(draw: Draw, slot: number): string {
  return `${draw.pick('attack-name', ATTACK_NAMES, slot)} (${10 * draw.int('attack-damage', 1, 12, slot)})`
}

function creatureAttributes(draw: Draw, tier: number): Record<string, string | string[]> {
  const stage = draw.weighted('stage', STAGES).value
  const primary = draw.pick('energy', ENERGY_TYPES)
  const secondary = draw.pick('energy-2', ENERGY_TYPES)
  const attributes: Record<string, string | string[]> = {
    stage,
    energyType: secondary !== primary && draw.chance('dual-energy', 0.12) ? [primary, secondary] : [primary],
    hp: String(10 * (draw.int('hp', 3, 12) + STAGES.findIndex((entry) => entry.value === stage) * 4)),
    weakness: `${draw.pick('weakness', ENERGY_TYPES)}×2`,
    resistance: draw.chance('has-resistance', 0.3) ? `${draw.pick('resistance', ENERGY_TYPES)}-30` : 'None',
    retreatCost: String(draw.int('retreat', 0, 4)),
    attack1: attack(draw, 1),
    attack2: attack(draw, 2),
    cardType: tier >= 4 ? 'Creature ex' : 'Creature',
    flavorText: flavorText(draw),
  }
  // The spec names attack1 to attack4: some cards have a third attack, a few of those a fourth.
  if (draw.chance('third-attack', 0.15)) {
    attributes.attack3 = attack(draw, 3)
    if (draw.chance('fourth-attack', 0.3)) attributes.attack4 = attack(draw, 4)
  }
  return attributes
}

const MANA_COLORS = [
  ['White', 'W'],
  ['Blue', 'U'],
  ['Black', 'B'],
  ['Red', 'R'],
  ['Green', 'G'],
  ['Colorless', ''],
] as const
const MANA_CARD_TYPES = choices([
  ['Creature', 45],
  ['Instant', 12],
  ['Sorcery', 12],
  ['Enchantment', 10],
  ['Artifact', 10],
  ['Land', 6],
  ['Planeswalker', 3],
])
const CREATURE_TYPES = words('Dragon Human Elf Goblin Zombie Angel Spirit Wizard Beast Merfolk Vampire Construct')
const ORACLE_LINES = [
  'Flying.',
  'When this enters, draw a card.',
  'Trample, haste.',
  'Destroy target artifact.',
  'Counter target spell.',
  'Deal 3 damage to any target.',
  'You gain 4 life.',
  'Vigilance, lifelink.',
]

function manaAttributes(draw: Draw): Record<string, string> {
  const cardType = draw.weighted('card-type', MANA_CARD_TYPES).value
  const [color, symbol] = draw.pick('color', MANA_COLORS)
  const isCreature = cardType === 'Creature'
  const pips = `{${symbol}}`.repeat(symbol === '' ? 0 : draw.int('colored-pips', 1, 2))
  const generic = draw.int('generic-cost', symbol === '' ? 1 : 0, 5)
  return {
    color,
    manaCost: cardType === 'Land' ? '' : `${generic > 0 ? `{${generic}}` : ''}${pips}`,
    power: isCreature ? String(draw.int('power', 0, 7)) : '',
    toughness: isCreature ? String(draw.int('toughness', 1, 7)) : '',
    cardType,
    subType: isCreature ? draw.pick('sub-type', CREATURE_TYPES) : '',
    flavorText: flavorText(draw),
    oracleText: draw.pick('oracle', ORACLE_LINES),
  }
}

const DUEL_CARD_TYPES = choices([
  ['Effect Monster', 45],
  ['Normal Monster', 12],
  ['Fusion Monster', 6],
  ['Synchro Monster', 5],
  ['XYZ Monster', 5],
  ['Spell Card', 15],
  ['Trap Card', 12],
])
const DUEL_ATTRIBUTES = words('DARK LIGHT EARTH WATER FIRE WIND')
const DUEL_EFFECTS = [
  'Once per turn: you can draw 1 card.',
  'Cannot be destroyed by battle.',
  'Negate the activation of a Spell Card.',
  'Special Summon 1 monster from your Graveyard.',
  'Target 1 card on the field; destroy it.',
  'Gains 500 ATK during your turn.',
]

function duelAttributes(draw: Draw): Record<string, string> {
  const cardType = draw.weighted('card-type', DUEL_CARD_TYPES).value
  const isMonster = cardType.endsWith('Monster')
  return {
    cardType,
    attribute: isMonster ? draw.pick('attribute', DUEL_ATTRIBUTES) : cardType === 'Spell Card' ? 'SPELL' : 'TRAP',
    level: isMonster ? String(draw.int('level', 1, 12)) : '',
    attack: isMonster ? String(100 * draw.int('attack', 0, 30)) : '',
    defense: isMonster ? String(100 * draw.int('defense', 0, 30)) : '',
    description: cardType === 'Normal Monster' ? flavorText(draw) : draw.pick('effect', DUEL_EFFECTS),
  }
}

const ACTION_CARD_TYPES = ['Attack', 'Action', 'Defense Reaction', 'Attack Reaction', 'Instant', 'Equipment']
const ACTION_CLASSES = words('Warrior Ninja Brute Guardian Wizard Runeblade Ranger Mechanologist Illusionist Generic')
const INK_CARD_TYPES = choices([
  ['Character', 60],
  ['Action', 15],
  ['Song', 8],
  ['Item', 12],
  ['Location', 5],
])
const INK_COLORS = words('Amber Amethyst Emerald Ruby Sapphire Steel')
const OTHER_CARD_TYPES = words('Character Event Leader Stage Unit Item')

function cardAttributes(kind: GameKind, draw: Draw, tier: number): Record<string, string | string[]> {
  switch (kind) {
    case 'creature':
      return creatureAttributes(draw, tier)
    case 'mana':
      return manaAttributes(draw)
    case 'duel':
      return duelAttributes(draw)
    case 'action':
      return {
        cardType: draw.pick('card-type', ACTION_CARD_TYPES),
        class: draw.pick('class', ACTION_CLASSES),
        pitch: String(draw.int('pitch', 1, 3)),
        flavorText: flavorText(draw),
      }
    case 'ink': {
      const cardType = draw.weighted('card-type', INK_CARD_TYPES).value
      const loreValue = cardType === 'Character' ? String(draw.int('lore', 1, 3)) : ''
      return {
        cardType,
        inkColor: draw.pick('ink-color', INK_COLORS),
        inkCost: String(draw.int('ink-cost', 1, 9)),
        loreValue,
        flavorText: flavorText(draw),
      }
    }
    case 'other':
      return { cardType: draw.pick('card-type', OTHER_CARD_TYPES), flavorText: flavorText(draw) }
  }
}

// ---------------------------------------------------------------------------------------------
// Products

interface GeneratedProduct {
  product: DemoProduct
  /** Noise-free price per printing, aligned with product.printings. */
  basePrices: number[]
}

interface GeneratedGroup {
  plan: SetPlan
  products: GeneratedProduct[]
}

/** Fixed cards search tests rely on; they sit in Pokemon's oldest set at every scale. */
interface FamousCard {
  index: number
  name: string
  rarity: string
  energyType: string
  priceFactor: number
  /** Four: the card has attack1 to attack4, so every catalog shows the spec's attack4. */
  attacks?: 4
}

const FAMOUS_POKEMON: readonly FamousCard[] = [
  { index: 3, name: 'Charizard', rarity: 'Holo Rare', energyType: 'Fire', priceFactor: 20, attacks: 4 },
  { index: 5, name: 'Pikachu', rarity: 'Common', energyType: 'Lightning', priceFactor: 4 },
]

interface SealedSpec {
  suffix: string
  shippingCategoryId: 3 | 4
  /** Price as a multiple of the set's booster box. */
  boxMultiple: Range
}

const BOOSTER_BOX: SealedSpec = { suffix: 'Booster Box', shippingCategoryId: 3, boxMultiple: [1, 1] }
const BOOSTER_CASE: SealedSpec = { suffix: 'Booster Case', shippingCategoryId: 4, boxMultiple: [4, 6] }
const EXTRA_SEALED: Record<GameKind, SealedSpec> = {
  creature: { suffix: 'Elite Trainer Box', shippingCategoryId: 3, boxMultiple: [0.3, 0.5] },
  mana: { suffix: 'Collector Booster Box', shippingCategoryId: 3, boxMultiple: [1.6, 2.5] },
  duel: { suffix: 'Special Edition Box', shippingCategoryId: 3, boxMultiple: [0.2, 0.35] },
  action: { suffix: 'Blitz Deck Display', shippingCategoryId: 3, boxMultiple: [0.5, 0.8] },
  ink: { suffix: "Illumineer's Trove", shippingCategoryId: 3, boxMultiple: [0.3, 0.5] },
  other: { suffix: 'Starter Deck Display', shippingCategoryId: 3, boxMultiple: [0.4, 0.7] },
}

interface SetContext {
  root: Draw
  game: SourceGame
  plan: SetPlan
  cardCount: number
  slashNumbers: boolean
  nameStyle: NameStyle
}

function generateGroup(root: Draw, game: SourceGame, plan: SetPlan, shape: ScaleShape): GeneratedGroup {
  const setDraw = root.child(Tag.set, plan.set.groupId)
  const gameDraw = root.child(Tag.game, game.categoryId)
  const context: SetContext = {
    root,
    game,
    plan,
    cardCount: setDraw.int('card-count', ...shape.cardsPerSet[tierOf(game)]),
    slashNumbers: ['creature', 'mana', 'ink'].includes(game.kind) || gameDraw.chance('slash-numbers', 0.5),
    nameStyle: !ACCENTED_GAMES.has(game.name) ? 'plain' : game.name === 'Pokemon' ? 'trainer' : 'accented',
  }
  const famous = game.name === 'Pokemon' && plan.index === 0 ? FAMOUS_POKEMON : []
  const usedNames = new Set(famous.map((card) => card.name))
  const products: GeneratedProduct[] = []
  for (let index = 0; index < context.cardCount; index++) {
    products.push(
      generateCard(
        context,
        index,
        usedNames,
        famous.find((card) => card.index === index),
      ),
    )
  }
  const sealedSpecs = [BOOSTER_BOX, BOOSTER_CASE, EXTRA_SEALED[game.kind]]
  const sealedCount = setDraw.int('sealed-count', ...shape.sealedPerSet)
  const boxPrice = Math.exp(setDraw.between('box-price', Math.log(60), Math.log(400)))
  for (let offset = 0; offset < sealedCount; offset++) {
    products.push(generateSealed(context, context.cardCount + offset, itemAt(sealedSpecs, offset), boxPrice))
  }
  if (products.length >= PRODUCTS_PER_GROUP) throw new Error('demo source: set too large for its id range')
  return { plan, products }
}

function productIdOf(groupId: number, index: number): number {
  return groupId * PRODUCTS_PER_GROUP + index + 1
}

function listingCount(draw: Draw, logMedian: number): number {
  return Math.min(2000, Math.round(Math.exp(logMedian + 0.9 * draw.normal('total-listings'))))
}

function productUrls(productId: number, name: string): Pick<SourceProduct, 'imageUrl' | 'url'> {
  return {
    imageUrl: `https://marketplace.example/images/product/${productId}.jpg`,
    url: `https://marketplace.example/product/${productId}/${slugify(name)}`,
  }
}

function generateCard(context: SetContext, index: number, usedNames: Set<string>, famous: FamousCard | undefined): GeneratedProduct {
  const { game, plan } = context
  const productId = productIdOf(plan.set.groupId, index)
  const draw = context.root.child(Tag.product, productId)
  const rarities = RARITIES[game.kind]
  const cardRarity = (famous && rarities.find((entry) => entry.name === famous.rarity)) || draw.weighted('rarity', rarities)
  const name = famous?.name ?? uniqueCardName(draw, context.nameStyle, usedNames)
  const printings = cardPrintings(game.kind, cardRarity.tier, plan.vintage, draw)
  const tierPrice = itemAt(TIER_PRICES, cardRarity.tier)
  const premium = (plan.vintage ? VINTAGE_PREMIUM : 1) * (famous?.priceFactor ?? 1)
  const cardPrice = tierPrice.median * Math.exp(tierPrice.sigma * draw.normal('base-price')) * premium
  const customAttributes = cardAttributes(game.kind, draw, cardRarity.tier)
  if (famous && game.kind === 'creature') {
    customAttributes.energyType = [famous.energyType]
    if (famous.attacks === 4) {
      customAttributes.attack3 ??= attack(draw, 3)
      customAttributes.attack4 ??= attack(draw, 4)
    }
  }
  const hp = customAttributes.hp
  const product: DemoProduct = {
    productId,
    groupId: plan.set.groupId,
    name,
    number: context.slashNumbers ? `${pad3(index + 1)}/${pad3(context.cardCount)}` : `${plan.set.abbreviation}-${pad3(index + 1)}`,
    rarity: cardRarity.name,
    ...productUrls(productId, name),
    productType: 'Cards',
    shippingCategoryId: 1,
    // Set by listProducts from the clock's day.
    productStatusId: 1,
    totalListings: listingCount(draw, itemAt(TIER_LISTINGS, cardRarity.tier)),
    hp: typeof hp === 'string' ? hp : null,
    customAttributes,
    printings,
  }
  const basePrices = printings.map((printing, slot) => cardPrice * (PRINTING_PREMIUM[printing] ?? 1) * Math.exp(0.15 * draw.normal('printing-price', slot)))
  return { product, basePrices }
}

function generateSealed(context: SetContext, index: number, spec: SealedSpec, boxPrice: number): GeneratedProduct {
  const { game, plan } = context
  const productId = productIdOf(plan.set.groupId, index)
  const draw = context.root.child(Tag.product, productId)
  const name = `${plan.set.name} ${spec.suffix}`
  const product: DemoProduct = {
    productId,
    groupId: plan.set.groupId,
    name,
    number: null,
    rarity: '',
    ...productUrls(productId, name),
    productType: 'Sealed Products',
    shippingCategoryId: spec.shippingCategoryId,
    // Set by listProducts from the clock's day.
    productStatusId: 1,
    totalListings: listingCount(draw, 3.4),
    hp: null,
    customAttributes: {},
    // 'Normal' is not a duel printing, and sealed duel product is sold as a 1st Edition run.
    printings: game.kind === 'duel' ? ['1st Edition'] : ['Normal'],
  }
  return { product, basePrices: [boxPrice * draw.between('box-multiple', ...spec.boxMultiple)] }
}

function cloneProduct(product: DemoProduct): DemoProduct {
  const customAttributes: Record<string, string | string[]> = {}
  for (const [key, value] of Object.entries(product.customAttributes)) customAttributes[key] = Array.isArray(value) ? [...value] : value
  return { ...product, printings: [...product.printings], customAttributes }
}

// ---------------------------------------------------------------------------------------------
// Price paths

/** Value-noise octaves over the day number (log space): long periods carry trends, short ones daily jitter. */
const PRICE_OCTAVES: readonly { period: number; amplitude: number }[] = [
  { period: 64, amplitude: 0.22 },
  { period: 16, amplitude: 0.1 },
  { period: 4, amplitude: 0.05 },
  { period: 1, amplitude: 0.025 },
]
const SPIKE_BLOCK_DAYS = 32
/** Only some printings are hype-prone; they make the day's top movers. */
const VOLATILE_SHARE = 0.1
const SPIKE_CHANCE_PER_BLOCK = 0.25

function priceNoise(draw: Draw, day: number): number {
  let total = 0
  for (let octave = 0; octave < PRICE_OCTAVES.length; octave++) {
    const { period, amplitude } = itemAt(PRICE_OCTAVES, octave)
    const knot = Math.floor(day / period)
    const t = (day - knot * period) / period
    const from = draw.normal('noise', octave, knot)
    const to = t === 0 ? from : draw.normal('noise', octave, knot + 1)
    total += amplitude * (from + (to - from) * t * t * (3 - 2 * t))
  }
  return total
}

function spikeIn(draw: Draw, block: number): { day: number; size: number } | null {
  if (!draw.chance('spike', SPIKE_CHANCE_PER_BLOCK, block)) return null
  const direction = draw.chance('spike-down', 0.3, block) ? -1 : 1
  return {
    day: block * SPIKE_BLOCK_DAYS + draw.int('spike-day', 0, SPIKE_BLOCK_DAYS - 1, block),
    size: direction * draw.between('spike-size', 0.35, 0.9, block),
  }
}

/** A sharp jump that holds to the end of its block, then fades over the next one: O(1) to evaluate. */
function spikeOffset(draw: Draw, day: number): number {
  if (!draw.chance('volatile', VOLATILE_SHARE)) return 0
  const block = Math.floor(day / SPIKE_BLOCK_DAYS)
  const current = spikeIn(draw, block)
  const previous = spikeIn(draw, block - 1)
  let offset = current && day >= current.day ? current.size : 0
  if (previous) offset += previous.size * (1 - (day - block * SPIKE_BLOCK_DAYS) / SPIKE_BLOCK_DAYS)
  return offset
}

function marketValue(draw: Draw, basePrice: number, day: number): number {
  return basePrice * Math.exp(priceNoise(draw, day) + spikeOffset(draw, day))
}

function priceRecord(productId: number, printing: string, draw: Draw, basePrice: number, day: number): DemoPrice {
  const market = marketValue(draw, basePrice, day)
  const midPrice = money(market * draw.between('mid-spread', 1.01, 1.12, day))
  const lowPrice = Math.min(midPrice, money(market * draw.between('low-discount', 0.78, 0.98, day)))
  const directLow = lowPrice * draw.between('direct-markup', 1, 1.08, day) + draw.between('direct-shipping', 0, 1.5, day)
  return {
    productId,
    printing,
    lowPrice,
    midPrice,
    marketPrice: draw.chance('no-market', 0.03, day) ? null : money(market),
    directLowPrice: Math.max(lowPrice, money(directLow)),
    buylistPrice: market >= 1 ? money(market * draw.between('buylist', 0.4, 0.7, day)) : null,
  }
}

function saleRecord(productId: number, printing: string, draw: Draw, basePrice: number, day: number): SourceSale {
  // Exponential draw around a per-printing popularity: mostly a handful a day, often none.
  const popularity = draw.between('sales-popularity', 0.4, 6)
  const salesVolume = Math.min(50, Math.floor(-Math.log(1 - draw.unit('sales-volume', day)) * popularity))
  const avgSalesPrice = salesVolume === 0 ? null : money(marketValue(draw, basePrice, day) * draw.between('sale-price', 0.94, 1.06, day))
  return { productId, printing, avgSalesPrice, salesVolume }
}

const CONDITION_WEIGHTS: readonly { condition: Condition; weight: number; priceFactor: number }[] = [
  { condition: 'Near Mint', weight: 55, priceFactor: 1 },
  { condition: 'Lightly Played', weight: 20, priceFactor: 0.85 },
  { condition: 'Moderately Played', weight: 12, priceFactor: 0.7 },
  { condition: 'Heavily Played', weight: 8, priceFactor: 0.5 },
  { condition: 'Damaged', weight: 5, priceFactor: 0.35 },
]
if (CONDITION_WEIGHTS.some((entry, index) => entry.condition !== CONDITIONS[index])) {
  throw new Error('demo source: condition table out of sync with CONDITIONS')
}

// ---------------------------------------------------------------------------------------------
// Live listings

/**
 * The marketplace answers the cheapest listings of every printing × condition × language, at most
 * this many each, and counts the rest: the sample is what a buyer sees first, the counts are the depth.
 */
export const LISTING_SAMPLE_SIZE = 10
/** Share of printing × condition × language offers whose cheapest listing is a one-cent placeholder. */
const JUNK_LISTING_RATE = 0.03
const JUNK_PRICE = 0.01
/** A seller's asking price over the day's market value: FLOOR + SPREAD × u^SKEW for a seller's rank u in [0, 1). */
const ASK_FLOOR = 0.86
const ASK_SPREAD = 0.6
const ASK_SKEW = 1.5
/** How much the day's number of live listings wanders around the product's usual count (log space). */
const DEPTH_SIGMA = 0.15

interface ConditionShare {
  condition: ListingCondition
  share: number
  priceFactor: number
}

const CARD_CONDITIONS: readonly ConditionShare[] = CONDITION_WEIGHTS.map(({ condition, weight, priceFactor }) => ({
  condition,
  share: weight / 100,
  priceFactor,
}))
const SEALED_CONDITIONS: readonly ConditionShare[] = [{ condition: SEALED_CONDITION, share: 1, priceFactor: 1 }]

interface LanguageShare {
  language: string
  share: number
  priceFactor: number
}

const OTHER_LANGUAGES = words('German French Italian Spanish Portuguese Korean')
const CARD_SHIPPING = [0.99, 1.25, 1.49, 1.99, 2.99, 3.99, 4.99] as const

/** What is listed of one product: the same every day (which printings and languages sellers offer, and how often). */
interface ListingProfile {
  printingShares: number[]
  languages: LanguageShare[]
  conditions: readonly ConditionShare[]
  sealed: boolean
}

function listingProfile(draw: Draw, product: SourceProduct): ListingProfile {
  const sealed = product.productType === 'Sealed Products'
  const languages: LanguageShare[] = [{ language: 'English', share: 1, priceFactor: 1 }]
  if (draw.chance('japanese', sealed ? 0.2 : 0.4)) {
    languages.push({ language: 'Japanese', share: draw.between('japanese-share', 0.08, 0.25), priceFactor: draw.between('japanese-price', 0.8, 1.35) })
  }
  if (!sealed && draw.chance('other-language', 0.15)) {
    languages.push({
      language: draw.pick('other-language-name', OTHER_LANGUAGES),
      share: draw.between('other-language-share', 0.03, 0.08),
      priceFactor: draw.between('other-language-price', 0.7, 0.95),
    })
  }
  const printingWeights = product.printings.map((_, slot) => Math.exp(-0.7 * slot) * draw.between('printing-share', 0.6, 1.4, slot))
  return {
    printingShares: normalized(printingWeights),
    languages: normalizedShares(languages),
    conditions: sealed ? SEALED_CONDITIONS : CARD_CONDITIONS,
    sealed,
  }
}

function normalized(weights: number[]): number[] {
  const total = weights.reduce((sum, weight) => sum + weight, 0)
  return weights.map((weight) => weight / total)
}

function normalizedShares<T extends { share: number }>(items: T[]): T[] {
  const shares = normalized(items.map((item) => item.share))
  return items.map((item, index) => ({ ...item, share: itemAt(shares, index) }))
}

function listingShipping(draw: Draw, sealed: boolean, price: number, cell: number, rank: number): number {
  const key = cell * 64 + rank
  if (sealed) return draw.chance('free-shipping', 0.5, key) ? 0 : money(draw.between('sealed-shipping', 4.99, 14.99, key))
  return draw.chance('free-shipping', price >= 5 ? 0.6 : 0.25, key) ? 0 : draw.pick('shipping', CARD_SHIPPING, key)
}

/**
 * The live listings of one traded product on `day`. Each printing × condition × language cell gets
 * its share of the day's depth (rounded up or down at random, so rare cells are sometimes empty);
 * its sample is the cheapest LISTING_SAMPLE_SIZE of those listings, drawn directly as the lowest
 * order statistics of the cell's asking prices, so a deep market costs no more than a shallow one.
 */
function generateListings(root: Draw, item: GeneratedProduct, printingDraw: (slot: number) => Draw, day: number): SourceListings {
  const { product, basePrices } = item
  const profile = listingProfile(root.child(Tag.listing, product.productId), product)
  const daily = root.child(Tag.listing, product.productId, day)
  const depth = product.totalListings * Math.exp(DEPTH_SIGMA * daily.normal('depth'))
  const conditionCounts: SourceListings['conditionCounts'] = {}
  for (const { condition } of profile.conditions) conditionCounts[condition] = 0
  const listings: SourceListing[] = []
  product.printings.forEach((printing, slot) => {
    const value = marketValue(printingDraw(slot), itemAt(basePrices, slot), day)
    profile.conditions.forEach((condition, conditionIndex) => {
      profile.languages.forEach((language, languageIndex) => {
        const cell = (slot * 8 + conditionIndex) * 8 + languageIndex
        const expected = depth * itemAt(profile.printingShares, slot) * condition.share * language.share
        const count = Math.floor(expected + daily.unit('cell-count', cell))
        if (count === 0) return
        conditionCounts[condition.condition] = (conditionCounts[condition.condition] ?? 0) + count
        const junk = daily.chance('junk', JUNK_LISTING_RATE, cell)
        const askBase = value * condition.priceFactor * language.priceFactor
        let rank = 0
        for (let index = 0; index < Math.min(count, LISTING_SAMPLE_SIZE); index++) {
          // The next lowest of the remaining (count - index) uniform ranks.
          rank += (1 - rank) * (1 - (1 - daily.unit('rank', cell, index)) ** (1 / (count - index)))
          const price = junk && index === 0 ? JUNK_PRICE : money(askBase * (ASK_FLOOR + ASK_SPREAD * rank ** ASK_SKEW))
          listings.push({
            productId: product.productId,
            printing,
            condition: condition.condition,
            language: language.language,
            price,
            shipping: listingShipping(daily, profile.sealed, price, cell, index),
          })
        }
      })
    })
  })
  return { listings, conditionCounts }
}

// ---------------------------------------------------------------------------------------------
// The source

/**
 * Whether a set's products trade on `date` (YYYY-MM-DD): from its release day on. Before it they
 * are presale, catalogued without prices, sales or listings (docs/adr/0103-presale-sets-in-the-demo.md).
 */
function released(plan: SetPlan, date: string): boolean {
  return plan.set.releaseDate <= date
}

class DemoSource implements MarketplaceSource {
  readonly name = 'demo'
  readonly capabilities = { listings: true, sales: true, pastPrices: true }
  private readonly root: Draw
  private readonly setPlans = new Map<number, SetPlan[]>()
  /** Least recently used first (Map keeps insertion order). */
  private readonly groups = new Map<number, GeneratedGroup>()

  constructor(
    private readonly shape: ScaleShape,
    seed: number,
    private readonly now: () => Date,
  ) {
    this.root = new Draw(mix(0x2545f491, seed))
  }

  async listGames(): Promise<SourceGame[]> {
    return GAMES.map((game) => ({ ...game }))
  }

  async listSets(categoryId: number): Promise<SourceSet[]> {
    return this.plansOf(categoryId)
      .map((plan) => ({ ...plan.set }))
      .sort((a, b) => (a.releaseDate === b.releaseDate ? a.groupId - b.groupId : a.releaseDate < b.releaseDate ? -1 : 1))
  }

  async listProducts(groupId: number): Promise<DemoProduct[]> {
    const group = this.group(groupId)
    if (!group) return []
    const today = this.today()
    // 1 = active, 20 = presale: the status follows the clock's day, the release date does not move.
    const productStatusId = today !== undefined && released(group.plan, today) ? 1 : 20
    return group.products.map((item) => ({ ...cloneProduct(item.product), productStatusId }))
  }

  async listPrices(groupId: number, date: string): Promise<DemoPrice[]> {
    return this.perPrinting(groupId, date, () => true, priceRecord)
  }

  async listSales(groupId: number, date: string): Promise<SourceSale[]> {
    return this.perPrinting(groupId, date, (basePrice) => basePrice >= 1, saleRecord)
  }

  async listListings(productId: number): Promise<SourceListings> {
    const group = Number.isInteger(productId) ? this.group(Math.floor(productId / PRODUCTS_PER_GROUP)) : undefined
    const item = group?.products[(productId % PRODUCTS_PER_GROUP) - 1]
    const day = Math.floor(this.now().getTime() / DAY_MS)
    if (!group || !item || item.product.productId !== productId || !Number.isFinite(day)) return { listings: [], conditionCounts: {} }
    if (!released(group.plan, formatDay(day))) return { listings: [], conditionCounts: {} }
    return generateListings(this.root, item, (slot) => this.printingDraw(productId, slot), day)
  }

  private perPrinting<T>(
    groupId: number,
    date: string,
    include: (basePrice: number) => boolean,
    record: (productId: number, printing: string, draw: Draw, basePrice: number, day: number) => T,
  ): T[] {
    const day = parseDay(date)
    const group = this.group(groupId)
    if (day === null || date < HISTORY_START || !group || !released(group.plan, date)) return []
    const records: T[] = []
    for (const { product, basePrices } of group.products) {
      product.printings.forEach((printing, slot) => {
        const basePrice = itemAt(basePrices, slot)
        if (!include(basePrice)) return
        records.push(record(product.productId, printing, this.printingDraw(product.productId, slot), basePrice, day))
      })
    }
    return records
  }

  /** The clock's UTC day; undefined when the clock gives no valid instant. */
  private today(): string | undefined {
    const time = this.now().getTime()
    return Number.isFinite(time) ? formatDay(Math.floor(time / DAY_MS)) : undefined
  }

  private printingDraw(productId: number, slot: number): Draw {
    return this.root.child(Tag.printing, productId, slot)
  }

  private plansOf(categoryId: number): SetPlan[] {
    const game = Number.isInteger(categoryId) ? GAMES[categoryId - 1] : undefined
    if (!game) return []
    let plans = this.setPlans.get(categoryId)
    if (!plans) {
      plans = planSets(this.root, game, this.shape)
      this.setPlans.set(categoryId, plans)
    }
    return plans
  }

  private group(groupId: number): GeneratedGroup | undefined {
    const cached = this.groups.get(groupId)
    if (cached) {
      this.groups.delete(groupId)
      this.groups.set(groupId, cached)
      return cached
    }
    if (!Number.isInteger(groupId)) return undefined
    const categoryId = Math.floor(groupId / GROUPS_PER_GAME)
    const plan = this.plansOf(categoryId)[(groupId % GROUPS_PER_GAME) - 1]
    const game = GAMES[categoryId - 1]
    if (!plan || !game || plan.set.groupId !== groupId) return undefined
    const group = generateGroup(this.root, game, plan, this.shape)
    this.groups.set(groupId, group)
    const oldest = this.groups.keys().next()
    if (this.groups.size > GROUP_CACHE_SIZE && !oldest.done) this.groups.delete(oldest.value)
    return group
  }
}

/** A deterministic synthetic marketplace: same scale and seed, same catalog and prices. */
/** The demo marketplace reports every listing price (only the market price goes quiet some days). */
export interface DemoPrice extends SourcePrice {
  lowPrice: number
  midPrice: number
  directLowPrice: number
}

/** The demo marketplace counts every product's listings. */
export interface DemoProduct extends SourceProduct {
  totalListings: number
}

export interface DemoMarketplace extends MarketplaceSource {
  listProducts(groupId: number): Promise<DemoProduct[]>
  listPrices(groupId: number, date: string): Promise<DemoPrice[]>
}

export function createDemoSource(options: DemoSourceOptions): DemoMarketplace {
  const shape: ScaleShape | undefined = SCALE_SHAPES[options.scale]
  // Callers outside TypeScript (env vars, CLI flags) can pass anything; fail at construction, not mid-sync.
  if (!shape) throw new Error(`unknown demo scale "${options.scale}"; expected one of ${DEMO_SCALES.join(', ')}`)
  return new DemoSource(shape, options.seed ?? DEFAULT_SEED, options.now)
}
