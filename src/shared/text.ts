/**
 * The normalised form names are stored and searched in: accents folded, lowercase, punctuation
 * collapsed to single spaces. "Pokémon Trainer: Éclair" → "pokemon trainer eclair".
 */
export function cleanName(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/\p{Diacritic}/gu, '')
    .toLowerCase()
    .replace(/[^\p{Letter}\p{Number}]+/gu, ' ')
    .trim()
}

/** URL slug: "Scarlet & Violet 151" → "scarlet-violet-151". */
export function slugify(name: string): string {
  return cleanName(name).replaceAll(' ', '-')
}
