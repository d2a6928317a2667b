import { describe, expect, test } from 'bun:test'
import { fakeClock } from '../../test/helpers/clock'
import { createReadCache } from './read-cache'

describe('createReadCache', () => {
  test('concurrent misses for one key share one load', async () => {
    const cache = createReadCache(fakeClock(), 1_000)
    let loads = 0
    let finish!: () => void
    const loading = new Promise<void>((resolve) => (finish = resolve))
    const load = async () => {
      loads++
      await loading
      return loads
    }
    const reads = Promise.all([cache.get('k', load), cache.get('k', load), cache.get('k', load)])
    finish()
    expect(await reads).toEqual([1, 1, 1])
    expect(loads).toBe(1)
    expect(await cache.get('other', load)).toBe(2)
  })

  test('a failed load is forgotten, so the next read retries', async () => {
    const cache = createReadCache(fakeClock(), 60_000)
    await expect(cache.get('k', () => Promise.reject(new Error('db down')))).rejects.toThrow('db down')
    expect(await cache.get('k', async () => 'recovered')).toBe('recovered')
  })

  test('a slow failure after expiry does not evict the newer entry', async () => {
    const clock = fakeClock()
    const cache = createReadCache(clock, 20)
    let fail!: (error: Error) => void
    const slow = cache.get('k', () => new Promise<string>((_, reject) => (fail = reject)))
    await clock.advance(21)
    expect(await cache.get('k', async () => 'fresh')).toBe('fresh')
    fail(new Error('late'))
    await expect(slow).rejects.toThrow('late')
    expect(await cache.get('k', async () => 'reloaded')).toBe('fresh')
  })

  test('entries expire after the ttl', async () => {
    const clock = fakeClock()
    const cache = createReadCache(clock, 20)
    expect(await cache.get('k', async () => 'old')).toBe('old')
    await clock.advance(20)
    expect(await cache.get('k', async () => 'new')).toBe('old')
    await clock.advance(1)
    expect(await cache.get('k', async () => 'new')).toBe('new')
  })
})
