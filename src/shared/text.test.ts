import { describe, expect, test } from 'bun:test'
import { cleanName, slugify } from './text'

describe('cleanName', () => {
  test.each([
    ['Pokémon Trainer: Éclair', 'pokemon trainer eclair'],
    ['Charizard ex (SV-012)', 'charizard ex sv 012'],
    ['  Black   Lotus ', 'black lotus'],
    ['Jace, the Mind Sculptor', 'jace the mind sculptor'],
    ['ÆTHER Vial', 'æther vial'],
  ])('%s → %s', (name, expected) => {
    expect(cleanName(name)).toBe(expected)
  })
})

test('slugify joins the clean words with dashes', () => {
  expect(slugify('Scarlet & Violet 151')).toBe('scarlet-violet-151')
  expect(slugify('Yu-Gi-Oh!')).toBe('yu-gi-oh')
})
