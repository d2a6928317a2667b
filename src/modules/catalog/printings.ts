/** Game kinds decide printing names and custom attribute names (spec: "Printing variants"). */
export type GameKind = 'creature' | 'mana' | 'duel' | 'action' | 'ink' | 'other'

/** Printing names per game kind, in the spec's order (the first is the fallback primary printing). */
export const PRINTINGS_BY_KIND: Record<GameKind, readonly string[]> = {
  creature: ['Normal', 'Holofoil', 'Reverse Holofoil', '1st Edition', 'Unlimited'],
  duel: ['1st Edition', 'Unlimited', 'Limited'],
  mana: ['Normal', 'Foil'],
  action: [
    'Normal',
    'Rainbow Foil',
    'Cold Foil',
    '1st Edition Normal',
    '1st Edition Rainbow Foil',
    '1st Edition Cold Foil',
    'Unlimited Edition Normal',
    'Unlimited Edition Rainbow Foil',
  ],
  ink: ['Normal', 'Holofoil', 'Reverse Holofoil'],
  other: ['Normal', 'Foil'],
}

/** Foil-type printings: Foil, Holofoil, Reverse Holofoil, Rainbow Foil, Cold Foil and their editions. */
export function isFoilPrinting(printing: string): boolean {
  return /foil/i.test(printing)
}

/** 1 when every printing of the card is foil-type (spec: `foil_only`), else 0. */
export function foilOnly(printings: readonly string[]): 0 | 1 {
  return printings.length > 0 && printings.every(isFoilPrinting) ? 1 : 0
}

/**
 * docs/adr/0011-primary-printing.md's order of a card's printings, as the SQL `printingRank` orders them: the
 * spec's order for the game kind (so Normal first wherever it exists), names the kind does not
 * list after those, by code point.
 */
export function printingOrder(kind: string): (a: string, b: string) => number {
  const names: readonly string[] = PRINTINGS_BY_KIND[kind as GameKind] ?? []
  const rank = (printing: string) => {
    const index = names.indexOf(printing)
    return index === -1 ? names.length : index
  }
  return (a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0)
}
