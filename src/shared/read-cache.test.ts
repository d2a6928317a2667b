import { describe, expect, test } from 'bun:test'
import { createReadCache } from './read-cache'

describe('createReadCache', () => {
  test('concurrent misses for one key share one load', async () => {
    const cache = createReadCache(1_000)
    let loads = 0
    const load = async () => {
      loads++
      await Bun.sleep(5)
      return loads
    }
    const results = await Promise.all([cache.get('k', load), cache.get('k', load), cache.get('k', load)])
    expect(results).toEqual([1, 1, 1])
    expect(loads).toBe(1)
    expect(await cache.get('other', load)).toBe(2)
  })

  test('a failed load is forgotten, so the next read retries', async () => {
    const cache = createReadCache(60_000)
    await expect(cache.get('k', () => Promise.reject(new Error('db down')))).rejects.toThrow('db down')
    expect(await cache.get('k', async () => 'recovered')).toBe('recovered')
  })

  test('a slow failure after expiry does not evict the newer entry', async () => {
    const cache = createReadCache(20)
    let fail!: (error: Error) => void
    const slow = cache.get('k', () => new Promise<string>((_, reject) => (fail = reject)))
    await Bun.sleep(40)
    expect(await cache.get('k', async () => 'fresh')).toBe('fresh')
    fail(new Error('late'))
    await expect(slow).rejects.toThrow('late')
    expect(await cache.get('k', async () => 'reloaded')).toBe('fresh')
  })

  test('entries expire after the ttl', async () => {
    const cache = createReadCache(20)
    expect(await cache.get('k', async () => 'old')).toBe('old')
    expect(await cache.get('k', async () => 'new')).toBe('old')
    await Bun.sleep(40)
    expect(await cache.get('k', async () => 'new')).toBe('new')
  })
})
