import type Redis from 'ioredis'
import type { Clock } from '../../shared/clock'
import { AppError } from '../../shared/errors'

/**
 * Login attempts are counted before the password is checked, in the one atomic step that also
 * decides, so concurrent guesses are throttled exactly like sequential ones. Three counts: per
 * (email, address) with the strict limit, so a stranger's guesses do not lock the owner out
 * elsewhere; per email with a ceiling far above it, against a guesser spread over many addresses;
 * per address, against one address guessing many emails. Past a count's `slowAfter` an attempt
 * waits longer before it is checked; at `refuseAt` it is refused with 429 until that count's window
 * ends. A success forgives its email's attempts from its address (in all three counts), never the
 * address's attempts at other emails. docs/adr/0035-login-and-sign-up-throttling.md has the trade-off.
 */
export const LOGIN_THROTTLE = {
  windowSeconds: 15 * 60,
  pair: { slowAfter: 3, refuseAt: 10 },
  email: { slowAfter: 20, refuseAt: 100 },
  address: { slowAfter: 20, refuseAt: 50 },
  stepDelayMs: 200,
  maxDelayMs: 1_000,
} as const

/** Sign-ups per address, whatever their outcome: bounds probing for registered emails through 409. */
export const SIGNUP_THROTTLE = { windowSeconds: 60 * 60, refuseAt: 5 } as const

export interface Taken {
  /** Seconds until the window of a count at its limit ends; 0 when admitted. */
  retryAfter: number
  /** When admitted, each key's count including this attempt. */
  counts: number[]
}

/** Counts attempts per key in fixed windows: Redis when configured, so every node counts together. */
export interface AttemptCounter {
  /**
   * One atomic step: refuses, counting nothing, when a key has reached its limit; otherwise counts
   * one on every key, a key's window starting at its first count.
   */
  take(keys: string[], limits: number[], windowSeconds: number): Promise<Taken>
  /** Deletes the first key and takes its count off the others (down to zero). */
  forgive(keys: string[]): Promise<void>
}

const TAKE_LUA = `
local retry = 0
for i, key in ipairs(KEYS) do
  if tonumber(redis.call('GET', key) or '0') >= tonumber(ARGV[i + 1]) then
    retry = math.max(retry, redis.call('TTL', key), 1)
  end
end
if retry > 0 then return {retry} end
local taken = {0}
for i, key in ipairs(KEYS) do
  local n = redis.call('INCR', key)
  if n == 1 then redis.call('EXPIRE', key, ARGV[1]) end
  taken[i + 1] = n
end
return taken
`

// DECRBY on a missing key would create it without a window, hence the GET first.
const FORGIVE_LUA = `
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
redis.call('DEL', KEYS[1])
for i = 2, #KEYS do
  if n > 0 then
    if tonumber(redis.call('GET', KEYS[i]) or '0') <= n then redis.call('DEL', KEYS[i]) else redis.call('DECRBY', KEYS[i], n) end
  end
end
return n
`

type ThrottleCommands = {
  tcgTakeAttempt(keyCount: number, ...args: (string | number)[]): Promise<number[]>
  tcgForgiveAttempts(keyCount: number, ...keys: string[]): Promise<number>
}

function redisCounter(redis: Redis): AttemptCounter {
  const client = redis as Redis & ThrottleCommands
  if (typeof client.tcgTakeAttempt !== 'function') {
    client.defineCommand('tcgTakeAttempt', { lua: TAKE_LUA })
    client.defineCommand('tcgForgiveAttempts', { lua: FORGIVE_LUA })
  }
  return {
    async take(keys, limits, windowSeconds) {
      const [retryAfter, ...counts] = await client.tcgTakeAttempt(keys.length, ...keys, windowSeconds, ...limits)
      return { retryAfter: retryAfter!, counts }
    },
    forgive: async (keys) => void (await client.tcgForgiveAttempts(keys.length, ...keys)),
  }
}

function memoryCounter(now: () => number): AttemptCounter {
  const entries = new Map<string, { count: number; endsAt: number }>()
  const live = (key: string) => {
    const entry = entries.get(key)
    if (entry && entry.endsAt <= now()) entries.delete(key)
    return entries.get(key)
  }
  // No await inside either method: each runs to completion, as atomic as the Lua scripts.
  return {
    async take(keys, limits, windowSeconds) {
      const retryAfter = Math.max(
        0,
        ...keys.map((key, i) => {
          const entry = live(key)
          return entry && entry.count >= limits[i]! ? Math.max(1, Math.ceil((entry.endsAt - now()) / 1000)) : 0
        }),
      )
      if (retryAfter > 0) return { retryAfter, counts: [] }
      if (entries.size > 100_000) for (const key of entries.keys()) live(key) // sweep expired entries
      const counts = keys.map((key) => {
        const entry = live(key)
        if (entry) return ++entry.count
        entries.set(key, { count: 1, endsAt: now() + windowSeconds * 1000 })
        return 1
      })
      return { retryAfter: 0, counts }
    },
    async forgive([first, ...others]) {
      const forgiven = live(first!)?.count ?? 0
      entries.delete(first!)
      for (const key of others) {
        const entry = live(key)
        if (entry && (entry.count -= forgiven) <= 0) entries.delete(key)
      }
    },
  }
}

/** Redis when configured, with this process's counter (its windows timed by `clock`) standing in while Redis fails. */
export function attemptCounter(redis: Redis | undefined, clock: Clock): AttemptCounter {
  const local = memoryCounter(() => clock.monotonic())
  if (!redis) return local
  const shared = redisCounter(redis)
  const either =
    <A extends unknown[], R>(pick: (c: AttemptCounter) => (...args: A) => Promise<R>) =>
    (...args: A) =>
      pick(shared)(...args).catch(() => pick(local)(...args))
  return { take: either((c) => c.take), forgive: either((c) => c.forgive) }
}

/**
 * The address a client is counted under. An IPv6 client usually holds a whole /64 and picks any
 * address in it at will, so it is counted per /64; an IPv4-mapped address is its IPv4 address.
 */
export function throttledAddress(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  if (mapped) return mapped[1]!
  if (!address.includes(':')) return address
  const [head = '', tail] = address.split('::')
  const left = head ? head.split(':') : []
  const right = tail ? tail.split(':') : []
  const groups = tail === undefined ? left : [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right]
  return `${groups
    .slice(0, 4)
    .map((group) => parseInt(group, 16).toString(16))
    .join(':')}::/64`
}

export interface LoginThrottle {
  /** Counts a login attempt before its password is checked, then waits or refuses (429) by the counts. */
  attempt(email: string, address: string): Promise<void>
  /** The password was right: forgives this email's attempts from this address. */
  succeeded(email: string, address: string): Promise<void>
  /** Counts a sign-up from this address, refusing (429) past the limit. */
  signup(address: string): Promise<void>
}

const tooMany = (what: string, retryAfter: number) =>
  new AppError('TOO_MANY_ATTEMPTS', `${what}; try again in ${retryAfter} seconds`, undefined, { 'retry-after': String(retryAfter) })

/** `clock.sleep` is how an attempt past `slowAfter` waits. */
export function loginThrottle(counter: AttemptCounter, clock: Pick<Clock, 'sleep'>): LoginThrottle {
  const scopes = [LOGIN_THROTTLE.pair, LOGIN_THROTTLE.email, LOGIN_THROTTLE.address]
  const loginKeys = (email: string, address: string) => {
    const counted = throttledAddress(address)
    return [`login:pair:${JSON.stringify([email, counted])}`, `login:email:${email}`, `login:addr:${counted}`]
  }
  return {
    async attempt(email, address) {
      const limits = scopes.map((scope) => scope.refuseAt)
      const { retryAfter, counts } = await counter.take(loginKeys(email, address), limits, LOGIN_THROTTLE.windowSeconds)
      if (retryAfter > 0) throw tooMany('Too many login attempts', retryAfter)
      // The counts include this attempt: the first one after `slowAfter` others waits one step.
      const excess = Math.max(...scopes.map((scope, i) => counts[i]! - 1 - scope.slowAfter))
      if (excess > 0) await clock.sleep(Math.min(excess * LOGIN_THROTTLE.stepDelayMs, LOGIN_THROTTLE.maxDelayMs))
    },
    succeeded: (email, address) => counter.forgive(loginKeys(email, address)),
    async signup(address) {
      const key = `signup:addr:${throttledAddress(address)}`
      const { retryAfter } = await counter.take([key], [SIGNUP_THROTTLE.refuseAt], SIGNUP_THROTTLE.windowSeconds)
      if (retryAfter > 0) throw tooMany('Too many sign-ups from this address', retryAfter)
    },
  }
}
