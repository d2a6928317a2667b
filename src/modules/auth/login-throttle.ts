import type Redis from 'ioredis'
import { AppError } from '../../shared/errors'

/**
 * Failed logins are counted per email and per client address over a window. Past the soft limit
 * each attempt waits longer before it is checked; past the hard limit it is refused with 429
 * until the window ends. A successful login clears the email's count (not the address's).
 */
export const LOGIN_THROTTLE = {
  windowSeconds: 15 * 60,
  email: { slowAfter: 3, refuseAt: 10 },
  address: { slowAfter: 20, refuseAt: 50 },
  stepDelayMs: 200,
  maxDelayMs: 1_000,
} as const

interface Count {
  failures: number
  /** Seconds until the window ends. */
  resetIn: number
}

interface FailureCounter {
  read(key: string): Promise<Count>
  add(key: string): Promise<void>
  clear(key: string): Promise<void>
}

const ADD_LUA = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return n
`

function redisCounter(redis: Redis): FailureCounter {
  const client = redis as Redis & { tcgAddFailure(key: string, window: number): Promise<number> }
  if (typeof client.tcgAddFailure !== 'function') client.defineCommand('tcgAddFailure', { numberOfKeys: 1, lua: ADD_LUA })
  return {
    async read(key) {
      const [[, failures], [, ttl]] = (await client.multi().get(key).ttl(key).exec()) as [[null, string | null], [null, number]]
      return { failures: Number(failures ?? 0), resetIn: Math.max(ttl, 0) }
    },
    add: async (key) => void (await client.tcgAddFailure(key, LOGIN_THROTTLE.windowSeconds)),
    clear: async (key) => void (await client.del(key)),
  }
}

function memoryCounter(now: () => number): FailureCounter {
  const entries = new Map<string, { failures: number; endsAt: number }>()
  const live = (key: string) => {
    const entry = entries.get(key)
    if (entry && entry.endsAt <= now()) entries.delete(key)
    return entries.get(key)
  }
  return {
    async read(key) {
      const entry = live(key)
      return entry ? { failures: entry.failures, resetIn: Math.ceil((entry.endsAt - now()) / 1000) } : { failures: 0, resetIn: 0 }
    },
    async add(key) {
      const entry = live(key)
      if (entry) entry.failures++
      else entries.set(key, { failures: 1, endsAt: now() + LOGIN_THROTTLE.windowSeconds * 1000 })
      if (entries.size > 100_000) for (const k of entries.keys()) live(k) // sweep expired entries
    },
    async clear(key) {
      entries.delete(key)
    },
  }
}

/** Redis when configured, with this process's counter standing in while Redis fails. */
function counterWithFallback(redis: Redis | undefined): FailureCounter {
  const local = memoryCounter(() => Date.now())
  if (!redis) return local
  const shared = redisCounter(redis)
  const either =
    <A extends unknown[], R>(pick: (c: FailureCounter) => (...args: A) => Promise<R>) =>
    (...args: A) =>
      pick(shared)(...args).catch(() => pick(local)(...args))
  return { read: either((c) => c.read), add: either((c) => c.add), clear: either((c) => c.clear) }
}

export interface LoginThrottle {
  /** Waits or refuses (429) according to earlier failures for this email and address. */
  admit(email: string, address: string): Promise<void>
  failed(email: string, address: string): Promise<void>
  succeeded(email: string): Promise<void>
}

export function loginThrottle(redis: Redis | undefined, sleep = Bun.sleep): LoginThrottle {
  const counter = counterWithFallback(redis)
  const emailKey = (email: string) => `login:email:${email}`
  const addressKey = (address: string) => `login:addr:${address}`
  return {
    async admit(email, address) {
      const [byEmail, byAddress] = await Promise.all([counter.read(emailKey(email)), counter.read(addressKey(address))])
      const refused = [
        byEmail.failures >= LOGIN_THROTTLE.email.refuseAt ? byEmail.resetIn : 0,
        byAddress.failures >= LOGIN_THROTTLE.address.refuseAt ? byAddress.resetIn : 0,
      ]
      const retryAfter = Math.max(...refused)
      if (retryAfter > 0) {
        throw new AppError(
          'TOO_MANY_ATTEMPTS',
          `Too many failed logins; try again in ${retryAfter} seconds`,
          undefined,
          { 'retry-after': String(retryAfter) },
        )
      }
      const excess = Math.max(
        byEmail.failures - LOGIN_THROTTLE.email.slowAfter,
        byAddress.failures - LOGIN_THROTTLE.address.slowAfter,
      )
      if (excess > 0) await sleep(Math.min(excess * LOGIN_THROTTLE.stepDelayMs, LOGIN_THROTTLE.maxDelayMs))
    },
    async failed(email, address) {
      await Promise.all([counter.add(emailKey(email)), counter.add(addressKey(address))])
    },
    succeeded: (email) => counter.clear(emailKey(email)),
  }
}
