/** The public TCGCSV mirror, apart from the source so the config can default to it without loading it. */
export const TCGCSV_URL = 'https://tcgcsv.com'
