/** Foil-type printings: Foil, Holofoil, Reverse Holofoil, Rainbow Foil, Cold Foil and their editions. */
export function isFoilPrinting(printing: string): boolean {
  return /foil/i.test(printing)
}

/** 1 when every printing of the card is foil-type (spec: `foil_only`), else 0. */
export function foilOnly(printings: readonly string[]): 0 | 1 {
  return printings.length > 0 && printings.every(isFoilPrinting) ? 1 : 0
}

