import { describe, expect, test } from 'bun:test'
import { type SQL, sql } from 'drizzle-orm'
import { PRIMARY_PRINTING_FIRST, selectRows } from '../../../test/helpers/db'
import { seededCatalogServer } from '../../../test/helpers/server'

const { database, server, proKey, freeKey } = await seededCatalogServer()

const get = (path: string, key = proKey) => server.json(path, key)
const rows = <T>(query: SQL) => selectRows<T>(database.db, query)

/** Facts read straight from the database, to compare the API against. */
const [someSet] = await rows<{ id: number; game_id: number; card_count: number; name: string }>(
  sql`select s.id, s.game_id, s.card_count, s.name from sets s
      where (select count(*) from cards c where c.set_id = s.id and c.product_type = 'Sealed Products') > 0
        and (select count(*) from cards c where c.set_id = s.id) > 3
        -- cards with several printings, so the primary printing is a choice the test can check
        and exists (select 1 from cards c join card_prices cp on cp.card_id = c.id and cp.printing <> 'Normal'
                     where c.set_id = s.id and exists (select 1 from card_prices n where n.card_id = c.id and n.printing = 'Normal'))
      order by s.id limit 1`,
)
const [pokemon] = await rows<{ id: number; set_count: number }>(sql`select id, set_count from games where slug = 'pokemon'`)
const [setTotal] = await rows<{ n: number }>(sql`select count(*)::int as n from sets`)
const [multiPrinting] = await rows<{ card_id: number; n: number }>(
  sql`select card_id, count(*)::int as n from card_prices group by card_id having count(*) > 1 order by card_id limit 1`,
)
const [singlePrinting] = await rows<{ card_id: number; printing: string }>(
  sql`select card_id, min(printing) as printing from card_prices group by card_id having count(*) = 1 order by card_id limit 1`,
)
const [withHp] = await rows<{ id: number }>(sql`select id from cards where hp is not null order by id limit 1`)
const [withoutHp] = await rows<{ id: number }>(sql`select id from cards where hp is null order by id limit 1`)

describe('GET /v1/sets', () => {
  test('lists every set with its game, newest first, paged without repeats', async () => {
    const first = await get('/v1/sets?per_page=100')
    expect(first.status).toBe(200)
    expect(first.body.meta).toEqual({ total: setTotal!.n, page: 1, per_page: 100, has_more: setTotal!.n > 100 })
    expect(Object.keys(first.body.data[0]).sort()).toEqual(
      [
        'abbreviation',
        'card_count',
        'game_id',
        'game_name',
        'game_slug',
        'id',
        'image_url',
        'last_synced_at',
        'marketplace_id',
        'name',
        'release_date',
        'set_icon_url',
        'slug',
      ].sort(),
    )
    const dates = first.body.data.map((s: any) => s.release_date)
    expect(dates).toEqual([...dates].sort().reverse())
    const second = await get('/v1/sets?per_page=100&page=2')
    const ids = new Set(first.body.data.map((s: any) => s.id))
    expect(second.body.data.some((s: any) => ids.has(s.id))).toBe(false)
    expect(first.body.rate_limit.daily_limit).toBe(10_000)
  })

  test('filters by game slug; an unknown game is 404; a page past the end is empty with the total', async () => {
    const { body } = await get('/v1/sets?game=pokemon&per_page=100')
    expect(body.meta.total).toBe(pokemon!.set_count)
    expect(body.data.every((s: any) => s.game_slug === 'pokemon' && s.game_id === pokemon!.id)).toBe(true)
    expect((await get('/v1/sets?game=no-such-game')).status).toBe(404)
    const past = await get('/v1/sets?game=pokemon&page=1000')
    expect(past.body).toMatchObject({ data: [], meta: { total: pokemon!.set_count, has_more: false } })
  })

  test('per_page above 100 is served as 100 (200 and 101 alike); 0 and 1.5 are 400', async () => {
    const hundred = await get('/v1/sets?per_page=100')
    for (const perPage of ['200', '101']) {
      const { status, body } = await get(`/v1/sets?per_page=${perPage}`)
      expect(status).toBe(200)
      expect(body.meta).toEqual(hundred.body.meta)
      expect(body.data).toEqual(hundred.body.data)
    }
    expect(hundred.body.data).toHaveLength(Math.min(100, setTotal!.n))
    const paged = await get(`/v1/sets/${someSet!.id}/cards?per_page=200`)
    expect(paged.status).toBe(200)
    expect(paged.body.meta.per_page).toBe(100)
    for (const perPage of ['0', '1.5']) {
      for (const path of ['/v1/sets', `/v1/sets/${someSet!.id}/cards`]) {
        const { status, body } = await get(`${path}?per_page=${perPage}`)
        expect({ path, perPage, status, field: body.error?.details?.[0]?.field }).toEqual({ path, perPage, status: 400, field: 'per_page' })
      }
    }
  })

  test('refuses bad paging and a missing key', async () => {
    expect((await get('/v1/sets?per_page=0')).body.error.code).toBe('INVALID_PARAMETER')
    expect((await get('/v1/sets?page=0')).status).toBe(400)
    expect((await server.get('/v1/sets')).status).toBe(401)
  })
})

describe('GET /v1/sets/:id', () => {
  test('the full set with game_id, game_name and game_slug', async () => {
    const { status, body } = await get(`/v1/sets/${someSet!.id}`)
    expect(status).toBe(200)
    expect(body.data).toMatchObject({ id: someSet!.id, name: someSet!.name, game_id: someSet!.game_id, card_count: someSet!.card_count })
    expect(typeof body.data.game_slug).toBe('string')
  })

  test("its marketplace group id, image and icon: the marketplace's, or null when unknown", async () => {
    // As from a source without them: this set loses its pictures, the others keep the demo marketplace's.
    await database.db.execute(sql`update sets set image_url = null, set_icon_url = null where id = ${someSet!.id}`)
    const [other] = await rows<{ id: number }>(sql`select id from sets where id <> ${someSet!.id} and set_icon_url is not null order by id limit 1`)
    const facts = new Map(
      (
        await rows<{ id: number; marketplace_id: number; image_url: string | null; set_icon_url: string | null }>(
          sql`select id, marketplace_group_id as marketplace_id, image_url, set_icon_url from sets`,
        )
      ).map(({ id, ...set }) => [id, set]),
    )
    expect((await get(`/v1/sets/${someSet!.id}`)).body.data).toMatchObject({ ...facts.get(someSet!.id), image_url: null, set_icon_url: null })
    const known = (await get(`/v1/sets/${other!.id}`)).body.data
    expect(known).toMatchObject(facts.get(other!.id)!)
    expect(known.image_url).toBeString()
    expect(known.set_icon_url).toBeString()
    const listed = (await get(`/v1/sets?game=${(await get(`/v1/sets/${someSet!.id}`)).body.data.game_slug}&per_page=100`)).body.data
    for (const set of listed) expect({ marketplace_id: set.marketplace_id, image_url: set.image_url, set_icon_url: set.set_icon_url }).toEqual(facts.get(set.id)!)
    const everySet = (await get('/v1/sets?per_page=100')).body.data
    expect(everySet.some((set: any) => set.set_icon_url === null) && everySet.some((set: any) => set.set_icon_url !== null)).toBe(true)
  })

  test('unknown is 404; zero, negative, fractional and non-numeric ids are 400', async () => {
    expect((await get('/v1/sets/99999999')).body.error.code).toBe('NOT_FOUND')
    for (const id of ['0', '-1', '1.5', 'abc', '99999999999']) {
      const { status, body } = await get(`/v1/sets/${id}`)
      expect({ id, status, code: body.error?.code }).toEqual({ id, status: 400, code: 'INVALID_PARAMETER' })
    }
  })
})

describe('GET /v1/sets/:id/cards', () => {
  test("card-with-price rows with the primary printing's price, in card number order", async () => {
    const { status, body } = await get(`/v1/sets/${someSet!.id}/cards?per_page=100`)
    expect(status).toBe(200)
    expect(body.meta.total).toBe(someSet!.card_count)
    expect(Object.keys(body.data[0]).sort()).toEqual(
      [
        'foil_only',
        'game_name',
        'game_slug',
        'id',
        'image_url',
        'low_price',
        'lowest_with_shipping',
        'market_price',
        'marketplace_id',
        'median_price',
        'name',
        'number',
        'clean_name',
        'price_updated_at',
        'printing',
        'product_type',
        'rarity',
        'set_name',
        'set_slug',
        'total_listings',
      ].sort(),
    )
    const [slugs] = await rows<{ set_slug: string; game_slug: string }>(
      sql`select s.slug as set_slug, g.slug as game_slug from sets s join games g on g.id = s.game_id where s.id = ${someSet!.id}`,
    )
    for (const card of body.data) expect(card).toMatchObject(slugs!)
    const expected = await rows<{ id: number; printing: string | null; market_price: number | null }>(sql`
      select c.id, p.printing, p.market_price from cards c join games g on g.id = c.game_id
      left join lateral (
        select cp.printing, cp.market_price from card_prices cp where cp.card_id = c.id
        order by ${PRIMARY_PRINTING_FIRST}
        limit 1) p on true
      where c.set_id = ${someSet!.id}`)
    const byId = new Map(expected.map((row) => [row.id, row]))
    for (const card of body.data) {
      expect({ id: card.id, printing: card.printing, market_price: card.market_price }).toEqual(byId.get(card.id)!)
      expect(card.set_name).toBe(someSet!.name)
    }
    // Cards by number (shorter first: 2 before 10), then sealed products, which have none (null), by id.
    const cards = body.data.filter((c: any) => c.product_type === 'Cards')
    const sealed = body.data.filter((c: any) => c.product_type === 'Sealed Products')
    expect(sealed.length).toBeGreaterThan(0)
    expect(body.data).toEqual([...cards, ...sealed])
    const numbers = cards.map((c: any) => c.number)
    expect(numbers.every((n: unknown) => typeof n === 'string' && n !== '')).toBe(true)
    expect(numbers).toEqual([...numbers].sort((a: string, b: string) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0)))
    expect(sealed.map((c: any) => c.number)).toEqual(sealed.map(() => null))
    expect(sealed.map((c: any) => c.id)).toEqual(sealed.map((c: any) => c.id).sort((a: number, b: number) => a - b))
  })

  test('number order across pages: the sealed products come last, after the last card', async () => {
    const pages: any[] = []
    for (let page = 1; page <= Math.ceil(someSet!.card_count / 3); page++) pages.push(...(await get(`/v1/sets/${someSet!.id}/cards?per_page=3&page=${page}`)).body.data)
    const types = pages.map((c: any) => c.product_type)
    expect(types.indexOf('Sealed Products')).toBe(types.lastIndexOf('Cards') + 1)
    expect(pages).toEqual((await get(`/v1/sets/${someSet!.id}/cards?per_page=100`)).body.data)
  })

  test('type filter and every sort; price sorts put unpriced cards last', async () => {
    const sealed = await get(`/v1/sets/${someSet!.id}/cards?type=Sealed%20Products`)
    expect(sealed.body.data.length).toBeGreaterThan(0)
    expect(sealed.body.data.every((c: any) => c.product_type === 'Sealed Products')).toBe(true)
    const cardsOnly = await get(`/v1/sets/${someSet!.id}/cards?type=Cards&per_page=100`)
    expect(cardsOnly.body.meta.total + sealed.body.meta.total).toBe(someSet!.card_count)

    const asc = (await get(`/v1/sets/${someSet!.id}/cards?sort=price_asc&per_page=100`)).body.data.map((c: any) => c.market_price)
    const priced = asc.filter((p: number | null) => p !== null)
    expect(priced).toEqual([...priced].sort((a: number, b: number) => a - b))
    expect(asc.slice(priced.length).every((p: number | null) => p === null)).toBe(true)
    const desc = (await get(`/v1/sets/${someSet!.id}/cards?sort=price_desc&per_page=100`)).body.data.map((c: any) => c.market_price)
    expect(desc.filter((p: number | null) => p !== null)).toEqual([...priced].reverse())
    const names = (await get(`/v1/sets/${someSet!.id}/cards?sort=name&per_page=100`)).body.data.map((c: any) => c.name)
    expect(names).toEqual([...names].sort((a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)))
  })

  test('pages of two never repeat or skip a card, whatever the sort', async () => {
    for (const sort of ['number', 'name', 'price_asc', 'price_desc']) {
      const seen: number[] = []
      for (let page = 1; page <= Math.ceil(someSet!.card_count / 2); page++) {
        seen.push(...(await get(`/v1/sets/${someSet!.id}/cards?sort=${sort}&per_page=2&page=${page}`)).body.data.map((c: any) => c.id))
      }
      expect(new Set(seen).size).toBe(someSet!.card_count)
      expect(seen).toHaveLength(someSet!.card_count)
    }
  })

  test('refusals: unknown type or sort names the allowed values; unknown set 404, also past the end', async () => {
    const badType = await get(`/v1/sets/${someSet!.id}/cards?type=Foo`)
    expect(badType.status).toBe(400)
    expect(badType.body.error.message).toContain('type')
    const badSort = await get(`/v1/sets/${someSet!.id}/cards?sort=cheap`)
    expect(badSort.status).toBe(400)
    expect(badSort.body.error.message).toContain('sort')
    expect((await get('/v1/sets/99999999/cards')).status).toBe(404)
    const past = await get(`/v1/sets/${someSet!.id}/cards?page=500`)
    expect(past.body.meta).toMatchObject({ total: someSet!.card_count, has_more: false })
  })
})

describe('GET /v1/sets/:id/prices', () => {
  test('Pro: one row per card × printing, equal to the table', async () => {
    const { status, body } = await get(`/v1/sets/${someSet!.id}/prices`)
    expect(status).toBe(200)
    const expected = await rows<{ card_id: number; printing: string; market_price: number | null; low_price: number }>(
      sql`select cp.card_id, cp.printing, cp.market_price, cp.low_price from card_prices cp join cards c on c.id = cp.card_id where c.set_id = ${someSet!.id}`,
    )
    expect(body.meta.total).toBe(expected.length)
    const key = (row: any) => `${row.card_id}/${row.printing}`
    expect(new Map(body.data.map((row: any) => [key(row), [row.market_price, row.low_price]]))).toEqual(
      new Map(expected.map((row) => [key(row), [row.market_price, row.low_price]])),
    )
    expect(Object.keys(body.data[0]).sort()).toEqual(
      [
        'buylist_price',
        'card_id',
        'foil_only',
        'image_url',
        'last_updated_at',
        'low_price',
        'lowest_with_shipping',
        'market_price',
        'market_price_as_of',
        'marketplace_id',
        'median_price',
        'name',
        'price_change_24h',
        'price_change_30d',
        'price_change_7d',
        'printing',
        'product_type',
      ].sort(),
    )
  })

  test("rows follow the set's card order: cards by number, then sealed products", async () => {
    const { body } = await get(`/v1/sets/${someSet!.id}/prices`)
    const cardOrder = (await get(`/v1/sets/${someSet!.id}/cards?per_page=100`)).body.data.map((c: any) => c.id)
    const rowOrder = body.data.map((row: any) => row.card_id).filter((id: number, index: number, all: number[]) => all.indexOf(id) === index)
    expect(rowOrder).toEqual(cardOrder.filter((id: number) => rowOrder.includes(id)))
    const types = body.data.map((row: any) => row.product_type)
    expect(types.indexOf('Sealed Products')).toBeGreaterThan(types.lastIndexOf('Cards'))
  })

  test('Free is 403 naming Pro and costs nothing; unknown set 404', async () => {
    const before = await get('/v1/sets/1', freeKey)
    const refused = await get(`/v1/sets/${someSet!.id}/prices`, freeKey)
    expect(refused.status).toBe(403)
    expect(refused.body.error).toMatchObject({ code: 'TIER_REQUIRED' })
    expect(refused.body.error.message).toContain('Pro')
    expect(refused.headers.get('x-ratelimit-remaining')).toBe(before.headers.get('x-ratelimit-remaining'))
    expect((await get('/v1/sets/99999999/prices')).status).toBe(404)
  })
})

describe('GET /v1/cards/:id', () => {
  test('every Card field; hp only where the game has it', async () => {
    const { status, body } = await get(`/v1/cards/${withHp!.id}`)
    expect(status).toBe(200)
    expect(Object.keys(body.data).sort()).toEqual(
      [
        'clean_name',
        'custom_attributes',
        'foil_only',
        'game_id',
        'game_name',
        'game_slug',
        'hp',
        'id',
        'image_url',
        'marketplace_id',
        'marketplace_url',
        'name',
        'number',
        'product_status_id',
        'product_type',
        'rarity',
        'set_id',
        'set_name',
        'set_slug',
        'shipping_category_id',
        'total_listings',
      ].sort(),
    )
    expect(body.data.id).toBe(withHp!.id)
    const [names] = await rows<{ set_name: string; set_slug: string; game_name: string; game_slug: string }>(sql`
      select s.name as set_name, s.slug as set_slug, g.name as game_name, g.slug as game_slug
      from cards c join sets s on s.id = c.set_id join games g on g.id = c.game_id where c.id = ${withHp!.id}`)
    expect(body.data).toMatchObject(names!)
    const without = await get(`/v1/cards/${withoutHp!.id}`)
    expect('hp' in without.body.data).toBe(false)
    expect((await get('/v1/cards/99999999')).status).toBe(404)
    expect((await get('/v1/cards/0')).status).toBe(400)
  })

  test('sealed products carry their shipping category', async () => {
    const [sealed] = await rows<{ id: number; shipping_category_id: number }>(
      sql`select id, shipping_category_id from cards where product_type = 'Sealed Products' order by id limit 1`,
    )
    const { body } = await get(`/v1/cards/${sealed!.id}`)
    expect(body.data.product_type).toBe('Sealed Products')
    expect([3, 4]).toContain(body.data.shipping_category_id)
    expect(body.data.shipping_category_id).toBe(sealed!.shipping_category_id)
    // A sealed product has no card number: null, not an empty string.
    expect(body.data.number).toBeNull()
    expect((await get(`/v1/cards/marketplace/${body.data.marketplace_id}`)).body.data.number).toBeNull()
    expect((await get(`/v1/cards/${withHp!.id}`)).body.data.number).toBeString()
  })
})

describe('GET /v1/cards/:id/prices', () => {
  test('an array for a card with several printings, a single object for one printing', async () => {
    const many = await get(`/v1/cards/${multiPrinting!.card_id}/prices`)
    expect(many.status).toBe(200)
    expect(Array.isArray(many.body.data)).toBe(true)
    expect(many.body.data).toHaveLength(multiPrinting!.n)
    expect(many.body.data.every((p: any) => p.card_id === multiPrinting!.card_id)).toBe(true)
    const one = await get(`/v1/cards/${singlePrinting!.card_id}/prices`)
    expect(Array.isArray(one.body.data)).toBe(false)
    expect(one.body.data).toMatchObject({ card_id: singlePrinting!.card_id, printing: singlePrinting!.printing })
  })

  test('printing filter is exact; a printing the card lacks is 400 listing its printings', async () => {
    const all = (await get(`/v1/cards/${multiPrinting!.card_id}/prices`)).body.data
    const only = await get(`/v1/cards/${multiPrinting!.card_id}/prices?printing=${encodeURIComponent(all[1].printing)}`)
    expect(only.body.data).toEqual([all[1]])
    const wrongCase = await get(`/v1/cards/${multiPrinting!.card_id}/prices?printing=${encodeURIComponent(all[1].printing.toLowerCase())}`)
    expect(wrongCase.status).toBe(400)
    expect(wrongCase.body.error.message).toContain(all[0].printing)
    expect((await get('/v1/cards/99999999/prices')).status).toBe(404)
  })
})

describe('GET /v1/cards/marketplace/:marketplaceId', () => {
  test('every field of the card by id, and prices without card_id and the 7d/30d changes', async () => {
    const [card] = await rows<{ id: number; marketplace_id: number; name: string }>(sql`select id, marketplace_id, name from cards where id = ${multiPrinting!.card_id}`)
    const { status, body } = await get(`/v1/cards/marketplace/${card!.marketplace_id}`)
    expect(status).toBe(200)
    const { prices, ...rest } = body.data
    expect(rest).toEqual((await get(`/v1/cards/${card!.id}`)).body.data)
    expect(rest).toMatchObject({ id: card!.id, name: card!.name, foil_only: expect.any(Number) })
    expect(prices).toHaveLength(multiPrinting!.n)
    // Card prices as below Pro: the lookup's prices carry no sales fields, whatever the tier.
    const byId = (await get(`/v1/cards/${card!.id}/prices`, freeKey)).body.data
    expect(prices).toEqual(byId.map(({ card_id: _id, price_change_7d: _7d, price_change_30d: _30d, ...price }: any) => price))
    for (const price of prices) {
      expect(Object.keys(price).some((k) => ['card_id', 'price_change_7d', 'price_change_30d'].includes(k))).toBe(false)
      expect(typeof price.price_change_24h === 'number' || price.price_change_24h === null).toBe(true)
    }
    // A card with no prices yet is still the whole card, with an empty list.
    const [bare] = await rows<{ id: number; marketplace_id: number }>(
      sql`select id, marketplace_id from cards c where not exists (select 1 from card_prices cp where cp.card_id = c.id) order by id limit 1`,
    )
    const unpriced = await get(`/v1/cards/marketplace/${bare!.marketplace_id}`)
    expect(unpriced.body.data).toEqual({ ...(await get(`/v1/cards/${bare!.id}`)).body.data, prices: [] })
    expect((await get('/v1/cards/marketplace/99999999')).status).toBe(404)
    expect((await get('/v1/cards/marketplace/x')).status).toBe(400)
  })
})
