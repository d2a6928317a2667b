import { invalidQuery } from './errors'
import { MAX_ID } from './model'

const ID = /^[1-9]\d{0,9}$/

/**
 * The `ids` of a bulk request: comma-separated positive integers (spaces around an id allowed),
 * at most `max` of them as written, repeats collapsed to the first in request order. Anything else
 * (empty, an empty item, a non-integer, zero, beyond 2147483647, too many) is 400 INVALID_PARAMETER
 * naming the parameter and the rule.
 */
export function parseIdList(raw: string, max: number, field = 'ids'): number[] {
  return [...new Set(idsAsWritten(raw, max, field))]
}

/** As parseIdList, with repeats kept: for a caller that drops them itself. */
export function idsAsWritten(raw: string, max: number, field = 'ids'): number[] {
  return plainIdList(raw, max) ?? checkedIdList(raw, max, field)
}

/**
 * The common case, digits and commas only, in one pass over the characters (a 500-id list costs
 * a few µs instead of about 40 with split, trim and a regex per item). Anything unusual, a space,
 * an error or too many items, is left to checkedIdList, which accepts or words the refusal.
 */
function plainIdList(raw: string, max: number): number[] | undefined {
  const ids: number[] = []
  const length = raw.length
  let value = 0
  let digits = 0
  for (let i = 0; i < length; i++) {
    const code = raw.charCodeAt(i)
    if (code === 44) {
      if (digits === 0 || value > MAX_ID || ids.length === max) return undefined
      ids.push(value)
      value = 0
      digits = 0
    } else {
      const digit = code - 48
      if (digit < 0 || digit > 9 || (digits === 0 && digit === 0) || ++digits > 10) return undefined
      value = value * 10 + digit
    }
  }
  // The end closes the last item as a comma does.
  if (digits === 0 || value > MAX_ID || ids.length === max) return undefined
  ids.push(value)
  return ids
}

function checkedIdList(raw: string, max: number, field: string): number[] {
  const refuse = (problem: string) => {
    const message = `must be 1 to ${max} comma-separated card ids (positive integers up to ${MAX_ID})`
    return invalidQuery(`'${field}' ${message}; ${problem}`, [{ field, message }])
  }
  const items = raw.split(',')
  if (raw.trim() === '') throw refuse('it is empty')
  if (items.length > max) throw refuse(`got ${items.length}`)
  const ids: number[] = []
  for (const item of items) {
    const text = item.trim()
    const id = ID.test(text) ? Number(text) : Number.NaN
    if (!(id <= MAX_ID)) throw refuse(text === '' ? 'an item is empty' : `'${text.slice(0, 20)}' is not one`)
    ids.push(id)
  }
  return ids
}
