import { AppError } from './errors'

const ID = /^[1-9]\d{0,9}$/
const MAX_ID = 2147483647

/**
 * The `ids` of a bulk request: comma-separated positive integers (spaces around an id allowed),
 * at most `max` of them as written, repeats collapsed to the first in request order. Anything else
 * (empty, an empty item, a non-integer, zero, beyond 2147483647, too many) is 400 INVALID_PARAMETER
 * naming the parameter and the rule.
 */
export function parseIdList(raw: string, max: number, field = 'ids'): number[] {
  const refuse = (problem: string) => {
    const message = `must be 1 to ${max} comma-separated card ids (positive integers up to ${MAX_ID})`
    return new AppError('INVALID_PARAMETER', `Invalid query: '${field}' ${message}; ${problem}`, [{ field, message }])
  }
  const items = raw.split(',')
  if (raw.trim() === '') throw refuse('it is empty')
  if (items.length > max) throw refuse(`got ${items.length}`)
  const ids = new Set<number>()
  for (const item of items) {
    const text = item.trim()
    const id = ID.test(text) ? Number(text) : Number.NaN
    if (!(id <= MAX_ID)) throw refuse(text === '' ? 'an item is empty' : `'${text.slice(0, 20)}' is not one`)
    ids.add(id)
  }
  return [...ids]
}
