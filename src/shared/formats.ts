import { FormatRegistry } from '@sinclair/typebox'

// Why this module exists: TypeBox keeps string formats in one global registry, and importing
// @elysiajs/openapi replaces its entries ('date', 'email', …) with checks that build a new Zod
// schema for every value checked (its bundled @sinclair/typemap). Response validation checks every
// history row's date, so `GET /v1/cards/:id/history` spent about 2 ms of CPU per request there.
// These checks are plain functions of the string, and are what RFC 3339 and the URL standard say;
// 'numeric', Elysia's format for query and path numbers, is plain decimal.

const FULL_DATE = /^\d{4}-\d{2}-\d{2}$/
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
const DATE_TIME = /^(\d{4}-\d{2}-\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$/
// The HTML standard's "valid e-mail address", the pattern browsers use for <input type=email>.
const EMAIL = /^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$/

/** RFC 3339 full-date: YYYY-MM-DD naming a day that exists (2026-02-29 does not). */
function isFullDate(value: string): boolean {
  if (!FULL_DATE.test(value)) return false
  const year = Number(value.slice(0, 4))
  const month = Number(value.slice(5, 7))
  const day = Number(value.slice(8, 10))
  const leapDay = month === 2 && year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 1 : 0
  return month >= 1 && month <= 12 && day >= 1 && day <= DAYS_IN_MONTH[month - 1]! + leapDay
}

/** RFC 3339 date-time: a full-date, a time (leap second allowed) and a zone (Z or ±HH:MM). */
function isDateTime(value: string): boolean {
  const match = DATE_TIME.exec(value)
  if (!match || !isFullDate(match[1]!)) return false
  const [hour, minute, second] = [Number(match[2]), Number(match[3]), Number(match[4])]
  if (hour > 23 || minute > 59 || second > 60) return false
  return match[7] === undefined || (Number(match[7]) <= 23 && Number(match[8]) <= 59)
}

/**
 * A number as a URL writes it: decimal digits, an optional minus and fraction, no leading zero.
 * Elysia coerces query and path numbers through this format and reads them with Number(), which
 * takes '0x10', '1e1', '+16', '16.' and ' 16' (docs/adr/0001-query-integers.md).
 */
const DECIMAL_NUMBER = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?$/

/** An absolute URI (scheme included) that the URL parser accepts. */
const isUri = (value: string) => URL.canParse(value)

export const FORMAT_CHECKS: Record<string, (value: string) => boolean> = {
  date: isFullDate,
  'date-time': isDateTime,
  uri: isUri,
  email: (value) => value.length <= 254 && EMAIL.test(value),
  numeric: (value) => DECIMAL_NUMBER.test(value),
}

/**
 * Installs FORMAT_CHECKS in TypeBox's registry. Call it after every plugin is imported (createApp
 * does), since an import can overwrite the registry; checks look formats up when they run.
 */
export function registerFormats() {
  for (const [format, check] of Object.entries(FORMAT_CHECKS)) FormatRegistry.Set(format, check)
}
