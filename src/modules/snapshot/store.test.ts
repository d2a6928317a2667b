import { afterAll, describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { accountWithKey, testRedis, testRedisPrefix } from '../../../test/helpers/auth'
import { freshDatabase, selectRows, testClock, testLogger } from '../../../test/helpers/db'
import { TEST_NOW, TEST_REDIS_URL } from '../../../test/helpers/env'
import { eventually } from '../../../test/helpers/eventually'
import { startServer } from '../../../test/helpers/server'
import { bulkPrices } from '../prices/service'
import { loadSnapshotSource } from './repo'
import { publishSnapshotChanged, type SnapshotStore, snapshotChannel, snapshotStore } from './store'

// A private copy of the seeded catalog whose prices these tests rewrite, as a sync would: every
// price row gets a marker low price and a newer update time, which moves the fingerprint.
const database = await freshDatabase('seeded')
const { db } = database
const priced = await selectRows<{ card_id: number }>(db, sql`select distinct card_id from card_prices order by card_id limit 500`)
const ids = priced.map((row) => row.card_id).join(',')
let rewrites = 0

/** Rewrites every price row with `low_price = marker`; returns the marker. */
async function rewritePrices(): Promise<number> {
  const marker = ++rewrites
  const at = new Date(TEST_NOW.getTime() + marker * 1000)
  await db.execute(sql`update card_prices set low_price = ${marker}, last_updated_at = ${at.toISOString()}::timestamptz`)
  return marker
}

/** The low prices of a bulk answer's priced rows: one value when it came from one snapshot. */
const lowPrices = (data: { low_price: number | null }[]) => new Set(data.map((row) => row.low_price).filter((price) => price !== null))

/** A bulk answer's rows as a client reads them, from its JSON bytes; its row objects (msgpack's) must agree. */
function answered(body: ReturnType<typeof bulkPrices>): { low_price: number | null }[] {
  const data = JSON.parse(body.json('', '').toString())
  expect(body.rows()).toEqual(data)
  return data
}

const quietPoll = 3_600_000 // these tests trigger rebuilds themselves

describe('snapshot store', () => {
  const store = snapshotStore({ db, redis: undefined, logger: testLogger, clock: testClock, pollMs: quietPoll })
  afterAll(() => store.close())

  test('a refresh without a change in the database keeps the same snapshot', async () => {
    const first = await store.get()
    expect(await store.refresh()).toBe(first)
  })

  test('swaps whole snapshots under concurrent reads: no answer mixes two, each version always means the same data', async () => {
    await rewritePrices()
    await store.refresh() // from here on every snapshot holds one marker low price
    const markerOfVersion = new Map<string, number>()
    let answers = 0
    for (let round = 0; round < 4; round++) {
      const marker = await rewritePrices()
      const rebuilt = store.refresh()
      const readers = Array.from({ length: 8 }, async () => {
        for (let i = 0; i < 40; i++) {
          const snapshot = await store.get()
          const body = bulkPrices(snapshot, ids)
          const { meta } = body
          await new Promise((resolve) => setImmediate(resolve)) // let the build progress between reads
          const seen = lowPrices(answered(body))
          expect(seen.size).toBe(1)
          const [low] = seen
          const known = markerOfVersion.get(meta.snapshot_version)
          if (known === undefined) markerOfVersion.set(meta.snapshot_version, low!)
          else expect(low).toBe(known)
          answers++
        }
      })
      await Promise.all([rebuilt, ...readers])
      expect(lowPrices(answered(bulkPrices(await store.get(), ids)))).toEqual(new Set([marker]))
    }
    expect(answers).toBe(4 * 8 * 40)
    expect(new Set(markerOfVersion.values()).size).toBe(markerOfVersion.size)
  }, 60_000) // five snapshot builds: 13 s seen with both cores busy
})

describe('a change announced during a build', () => {
  test('is picked up by one more build right after it, whose snapshot the refresh resolves with', async () => {
    // The build reads the rows, then waits at a gate: the change commits and is announced
    // (refresh) while the build holds the old rows.
    let hold = false
    let atGate = () => {}
    let open = () => {}
    const reached = new Promise<void>((resolve) => (atGate = resolve))
    const gate = new Promise<void>((resolve) => (open = resolve))
    const store = snapshotStore({
      db,
      redis: undefined,
      logger: testLogger,
      clock: testClock,
      pollMs: quietPoll,
      load: async (database) => {
        const source = await loadSnapshotSource(database)
        if (hold) {
          atGate()
          await gate
        }
        return source
      },
    })
    afterAll(() => store.close())
    await store.get()
    await rewritePrices()
    hold = true
    const running = store.refresh()
    await reached
    hold = false
    const marker = await rewritePrices()
    const next = store.refresh()
    expect(next).not.toBe(running) // the running build read before the change: not the caller's answer
    expect(store.refresh()).toBe(next) // every refresh asked for meanwhile shares the one build after it
    open()
    expect(lowPrices(answered(bulkPrices(await running, ids)))).not.toEqual(new Set([marker])) // it read before the change
    expect(lowPrices(answered(bulkPrices(await next, ids)))).toEqual(new Set([marker]))
    expect(await store.get()).toBe(await next)
  })
})

describe.skipIf(!TEST_REDIS_URL)('snapshot-changed over Redis (needs TEST_REDIS_URL)', () => {
  test('every node rebuilds when the sync announces new prices, and their ETags move on', async () => {
    const prefix = testRedisPrefix()
    const [nodeRedis, otherRedis, cliRedis] = [await testRedis(prefix), await testRedis(prefix), await testRedis(prefix)]
    const server = startServer({ db, redis: nodeRedis, logger: testLogger })
    const other = snapshotStore({ db, redis: otherRedis, logger: testLogger, clock: testClock, pollMs: quietPoll })
    afterAll(() => other.close())
    const key = (await accountWithKey(db, 'pro')).key
    await server.ready()
    await other.get()
    const subscribers = async () => ((await cliRedis!.pubsub('NUMSUB', snapshotChannel(cliRedis!))) as [string, number])[1]
    await eventually(async () => (await subscribers()) === 2, { what: 'both nodes subscribed' })

    const path = `/v1/bulk/prices?ids=${ids}`
    const before = await server.get(path, { headers: { 'x-api-key': key } })
    const etag = before.headers.get('etag')!
    const marker = await rewritePrices()
    await publishSnapshotChanged(cliRedis, testLogger)

    const body: any = await eventually(
      async () => {
        const answer: any = await (await server.get(path, { headers: { 'x-api-key': key } })).json()
        return lowPrices(answer.data).has(marker) && answer
      },
      { what: 'the node answering the new prices' },
    )
    expect(lowPrices(body.data)).toEqual(new Set([marker]))
    const after = await server.get(path, { headers: { 'x-api-key': key, 'if-none-match': etag } })
    expect(after.status).toBe(200)
    expect(after.headers.get('etag')).not.toBe(etag)
    await eventually(() => other.status()?.version === body.meta.snapshot_version, { what: 'the other node rebuilt' })
  })
})

describe('prices first, then the search index (docs/adr/0119-prices-first-then-the-search-index.md)', () => {
  /** A store whose builds wait, once their prices serve, at a gate the test opens (or fails) when `hold` is set. */
  function heldStore() {
    const held = { hold: false, fail: false, reached: () => {}, open: () => {} }
    let gate: Promise<void> = Promise.resolve()
    let reached: Promise<void> = Promise.resolve()
    const arm = () => {
      held.hold = true
      reached = new Promise<void>((resolve) => (held.reached = resolve))
      gate = new Promise<void>((resolve) => (held.open = resolve))
    }
    const store = snapshotStore({
      db,
      redis: undefined,
      logger: testLogger,
      clock: testClock,
      pollMs: quietPoll,
      beforeSearchIndex: async () => {
        if (!held.hold) return
        held.hold = false
        held.reached()
        await gate
        if (held.fail) {
          held.fail = false
          throw new Error('the index build failed (test)')
        }
      },
    })
    afterAll(() => store.close())
    return { store, held, arm, reached: () => reached }
  }

  /** Renames a card, as a sync would (its updated_at moves the fingerprint); returns its id. */
  async function renameCard(name: string): Promise<number> {
    const [card] = await selectRows<{ id: number }>(db, sql`select id from cards order by id limit 1`)
    await db.execute(sql`update cards set name = ${name}, clean_name = ${name.toLowerCase()}, updated_at = updated_at + interval '1 second' where id = ${card!.id}`)
    return card!.id
  }

  const found = (snapshot: Awaited<ReturnType<SnapshotStore['get']>>, text: string) => snapshot.search.search({ text, sort: 'relevance', offset: 0, limit: 10 }).ids

  test('while the new index is built, prices are the new ones and searches answer from the previous snapshot, whole', async () => {
    const { store, held, arm, reached } = heldStore()
    const before = await store.get()
    expect((await store.searching.get()).version).toBe(before.version)
    const id = await renameCard('Zyzzyva Heldbuild')
    const marker = await rewritePrices()
    arm()
    const rebuilt = store.refresh()
    await reached()
    const prices = await store.get()
    expect(prices).not.toBe(before)
    expect(lowPrices(answered(bulkPrices(prices, ids)))).toEqual(new Set([marker]))
    expect(prices.searchable).toBe(false)
    const searching = await store.searching.get()
    expect(searching.version).toBe(before.version) // the previous snapshot, index and rows together
    expect(found(searching, 'zyzzyva heldbuild')).toEqual([])
    expect(store.status()).toMatchObject({ version: prices.version, search_version: before.version })
    held.open()
    expect(await rebuilt).toBe(prices)
    expect((await store.searching.get()).version).toBe(prices.version)
    expect(found(await store.searching.get(), 'zyzzyva heldbuild')).toEqual([id])
    expect(store.status()).toMatchObject({ version: prices.version, search_version: prices.version })
  })

  test('an index build that fails leaves the new prices serving and searches on the previous snapshot; the next refresh builds the index owed', async () => {
    const { store, held, arm, reached } = heldStore()
    const before = await store.get()
    const id = await renameCard('Zyzzyva Failedindex')
    arm()
    held.fail = true
    const rebuilt = store.refresh()
    await reached()
    held.open()
    await expect(rebuilt).rejects.toThrow('the index build failed (test)')
    const prices = await store.get()
    expect(prices).not.toBe(before)
    expect((await store.searching.get()).version).toBe(before.version)
    expect(await store.refresh()).toBe(prices) // the data has not changed: no new snapshot, but its index
    expect((await store.searching.get()).version).toBe(prices.version)
    expect(found(await store.searching.get(), 'zyzzyva failedindex')).toEqual([id])
  })

  test('before the first index is built, searches wait for it', async () => {
    const { store } = heldStore()
    const first = store.searching.get()
    expect(first).toBeInstanceOf(Promise)
    const snapshot = await first
    expect(snapshot.searchable).toBe(true)
    expect((await store.get()).version).toBe(snapshot.version)
  })

  // docs/adr/0129-the-rebuild-s-peak-and-the-type-ahead-s-tail.md: during the next index build the
  // replaced snapshot's bulk rows, movers and changes are garbage; only what searches read stays.
  test('searches answering from a replaced snapshot do not hold its bulk rows', async () => {
    const { store, arm, reached, held } = heldStore()
    const replaced = new WeakRef(await store.get())
    const searchingBefore = await store.searching.get()
    await renameCard('Zyzzyva Released')
    arm()
    const rebuilt = store.refresh()
    await reached()
    expect(await store.get()).not.toBe(replaced.deref())
    await eventually(
      () => {
        Bun.gc(true)
        return replaced.deref() === undefined
      },
      { what: 'the replaced snapshot collected' },
    )
    // Searches still answer from it, index and rows together.
    expect(await store.searching.get()).toBe(searchingBefore)
    expect(found(searchingBefore, 'zyzzyva released')).toEqual([])
    expect(searchingBefore.cardWithPrice(priced[0]!.card_id)?.id).toBe(priced[0]!.card_id)
    held.open()
    await rebuilt
    expect(found(await store.searching.get(), 'zyzzyva released')).toHaveLength(1)
  })
})
