/** The demo generator's sizes, apart from the generator so the config can name them without loading it. */
export type DemoScale = 'tiny' | 'small' | 'medium' | 'large'
export const DEMO_SCALES: readonly DemoScale[] = ['tiny', 'small', 'medium', 'large']
