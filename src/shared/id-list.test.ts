import { describe, expect, test } from 'bun:test'
import { idsAsWritten } from './id-list'

/** The rule written plainly (split, trim, a regex per item): what the one-pass parser must agree with. */
function reference(raw: string, max: number): number[] | 'refused' {
  const items = raw.split(',').map((item) => item.trim())
  if (items.length > max || !items.every((item) => /^[1-9]\d{0,9}$/.test(item) && Number(item) <= 2147483647)) return 'refused'
  return items.map(Number)
}

function parsed(raw: string, max: number): number[] | 'refused' {
  try {
    return idsAsWritten(raw, max)
  } catch {
    return 'refused'
  }
}

describe('idsAsWritten', () => {
  test.each([
    ['1', [1]],
    ['3,1,3', [3, 1, 3]],
    ['2147483647', [2147483647]],
    ['1000000000,9', [1000000000, 9]],
    [' 4 ,5', [4, 5]],
  ])('%j reads as %j', (raw, ids) => {
    expect(idsAsWritten(raw, 500)).toEqual(ids)
  })

  test.each(['', ',', ',1', '1,', '1,,2', '0', '01', '2147483648', '12345678901', '1;2', '1 2', '+1', '1e3'])('%j is refused', (raw) => {
    expect(() => idsAsWritten(raw, 500)).toThrow()
  })

  test('the limit counts ids as written: exactly max is read, one more is refused', () => {
    expect(idsAsWritten('7,7,7', 3)).toEqual([7, 7, 7])
    expect(() => idsAsWritten('7,7,7,7', 3)).toThrow()
  })

  test('agrees with the plain rule on 5,000 random lists of digits, commas, spaces and the odd letter', () => {
    const alphabet = '0123456789012345678901234567890123456789,,,,,, x'
    let seed = 42
    const random = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32
    for (let n = 0; n < 5_000; n++) {
      const length = Math.floor(random() * 40)
      let raw = ''
      for (let i = 0; i < length; i++) raw += alphabet[Math.floor(random() * alphabet.length)]
      expect({ raw, ids: parsed(raw, 4) }).toEqual({ raw, ids: reference(raw, 4) })
    }
  })
})
