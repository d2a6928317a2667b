import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { fakeClock } from '../../../test/helpers/clock'
import { freshDatabase, selectRows, testLogger } from '../../../test/helpers/db'
import { TEST_NOW } from '../../../test/helpers/env'
import { startServer, type TestServer } from '../../../test/helpers/server'
import { createDemoSource } from '../ingest/sources/demo'
import { openCatalogReads } from './routes'

const database = await freshDatabase('seeded')
// The demo source gives every game and set an image, and major games and some others a logo and
// their sets an icon. One game and Pokemon's newest set lose theirs, as from a source without them.
await database.db.execute(sql`update games set image_url = null, logo_url = null where slug = 'magic-the-gathering'`)
await database.db.execute(sql`update sets set image_url = null, set_icon_url = null
                              where id = (select s.id from sets s join games g on g.id = s.game_id where g.slug = 'pokemon'
                                          order by s.release_date desc, s.id limit 1)`)
const server: TestServer = startServer({ db: database.db, redis: undefined, logger: testLogger })
const json = (path: string) => server.json(path)

/** Each game's or set's marketplace id and pictures, read straight from the table. */
type Facts<Picture extends string> = { marketplace_id: number; image_url: string | null } & Record<Picture, string | null>
async function marketplaceFacts(table: 'games'): Promise<Map<number, Facts<'logo_url'>>>
async function marketplaceFacts(table: 'sets'): Promise<Map<number, Facts<'set_icon_url'>>>
async function marketplaceFacts(table: 'games' | 'sets') {
  const rows = await selectRows<{ id: number } & Facts<'logo_url' | 'set_icon_url'>>(
    database.db,
    table === 'games'
      ? sql`select id, marketplace_category_id as marketplace_id, image_url, logo_url from games`
      : sql`select id, marketplace_group_id as marketplace_id, image_url, set_icon_url from sets`,
  )
  return new Map(rows.map(({ id, ...facts }) => [id, facts]))
}

describe('GET /v1/games', () => {
  test('lists all 57 games with every Game field, major games first', async () => {
    const { status, body } = await json('/v1/games?per_page=100')
    expect(status).toBe(200)
    expect(body.meta).toEqual({ total: 57, page: 1, per_page: 100, has_more: false })
    expect(body.data).toHaveLength(57)
    const game = body.data[0]
    expect(Object.keys(game).sort()).toEqual(['card_count', 'id', 'image_url', 'last_synced_at', 'logo_url', 'marketplace_id', 'name', 'priority', 'set_count', 'slug'].sort())
    expect(body.data.slice(0, 7).every((g: any) => g.priority === 3)).toBe(true)
    expect(body.data.slice(7).every((g: any) => g.priority === 2)).toBe(true)
    expect(new Date(game.last_synced_at).toISOString()).toBe(game.last_synced_at)
    expect(game.set_count).toBeGreaterThan(0)
    expect(game.card_count).toBeGreaterThan(0)
  })

  test("each game's marketplace id is its category id, and its image and logo are the marketplace's or null", async () => {
    const facts = await marketplaceFacts('games')
    const games = (await json('/v1/games?per_page=100')).body.data
    for (const game of games) expect({ marketplace_id: game.marketplace_id, image_url: game.image_url, logo_url: game.logo_url }).toEqual(facts.get(game.id)!)
    const pokemon = games.find((game: any) => game.slug === 'pokemon')
    expect(pokemon.image_url).toBe(`https://marketplace.example/images/category/${pokemon.marketplace_id}.jpg`)
    expect(pokemon.logo_url).toBe(`https://marketplace.example/images/category/${pokemon.marketplace_id}/logo.png`)
    expect(games.filter((game: any) => game.image_url === null).map((game: any) => game.slug)).toEqual(['magic-the-gathering'])
    expect(games.filter((game: any) => game.logo_url === null).length).toBeGreaterThan(1)
    expect(games.filter((game: any) => game.logo_url !== null).length).toBeGreaterThan(1)
    expect(new Set(games.map((game: any) => game.marketplace_id)).size).toBe(57)
  })

  test('a repeat is answered from the kept bytes, with the same images and logos', async () => {
    const first = await server.get('/v1/games?per_page=100')
    const firstBody = await first.text()
    const repeat = await (await server.get('/v1/games?per_page=100')).text()
    expect(repeat).toBe(firstBody)
    const parsed = JSON.parse(repeat).data
    expect(parsed.every((game: any) => 'logo_url' in game && 'image_url' in game)).toBe(true)
    const sets = await (await server.get('/v1/games/pokemon/sets')).text()
    expect(await (await server.get('/v1/games/pokemon/sets')).text()).toBe(sets)
    expect(JSON.parse(sets).data.every((set: any) => 'set_icon_url' in set && 'image_url' in set)).toBe(true)
  })

  test('counts agree with the source catalog', async () => {
    const source = createDemoSource({ scale: 'tiny', now: () => TEST_NOW })
    const { body } = await json('/v1/games/pokemon')
    const sourceGame = (await source.listGames()).find((g) => g.slug === 'pokemon')!
    const sets = await source.listSets(sourceGame.categoryId)
    let products = 0
    for (const set of sets) products += (await source.listProducts(set.groupId)).length
    expect(body.data.set_count).toBe(sets.length)
    expect(body.data.card_count).toBe(products)
  })

  test('defaults to page 1 of 50 and pages without repeating or skipping a game', async () => {
    const first = await json('/v1/games')
    expect(first.body.meta).toEqual({ total: 57, page: 1, per_page: 50, has_more: true })
    expect(first.body.data).toHaveLength(50)
    const second = await json('/v1/games?page=2')
    expect(second.body.meta).toEqual({ total: 57, page: 2, per_page: 50, has_more: false })
    expect(second.body.data).toHaveLength(7)
    const small: number[] = []
    for (let page = 1; page <= 6; page++) {
      small.push(...(await json(`/v1/games?page=${page}&per_page=10`)).body.data.map((g: any) => g.id))
    }
    const all = (await json('/v1/games?per_page=100')).body.data.map((g: any) => g.id)
    expect(small).toEqual(all)
  })

  test('a page past the end is empty, not an error', async () => {
    const { status, body } = await json('/v1/games?page=99&per_page=100')
    expect(status).toBe(200)
    expect(body.data).toEqual([])
    expect(body.meta).toEqual({ total: 57, page: 99, per_page: 100, has_more: false })
  })

  test('per_page=100 is allowed, 1 is allowed', async () => {
    expect((await json('/v1/games?per_page=100')).status).toBe(200)
    const one = await json('/v1/games?per_page=1')
    expect(one.body.data).toHaveLength(1)
    expect(one.body.meta.has_more).toBe(true)
  })

  test.each(['200', '101', '1000000'])('per_page=%s is served as 100, and meta says 100', async (perPage) => {
    const { status, body } = await json(`/v1/games?per_page=${perPage}`)
    expect(status).toBe(200)
    expect(body.meta).toEqual({ total: 57, page: 1, per_page: 100, has_more: false })
    expect(body.data).toEqual((await json('/v1/games?per_page=100')).body.data)
    // Pages of 100 follow on: the second page starts past the first hundred, not past the number asked for.
    const second = await json(`/v1/games?per_page=${perPage}&page=2`)
    expect(second.body.meta).toEqual({ total: 57, page: 2, per_page: 100, has_more: false })
    expect(second.body.data).toEqual([])
  })

  test.each([
    ['page', '0'],
    ['page', '-1'],
    ['page', 'abc'],
    ['page', '1.5'],
    ['per_page', '0'],
    ['per_page', '1.5'],
    ['per_page', '-5'],
    ['per_page', 'ten'],
    ['per_page', ''],
  ])('400 INVALID_PARAMETER for %s=%s, naming the parameter', async (name, value) => {
    const { status, body } = await json(`/v1/games?${name}=${value}`)
    expect(status).toBe(400)
    expect(body.error.code).toBe('INVALID_PARAMETER')
    expect(body.error.message).toContain(name)
    expect(body.error.details[0].field).toBe(name)
  })

  test('the message tells the allowed range', async () => {
    const { body } = await json('/v1/games?per_page=0')
    expect(body.error.details[0].message).toBe('must be an integer of at least 1')
    expect((await json('/v1/games?page=0')).body.error.details[0].message).toBe('must be an integer from 1 to 1000000')
  })
})

describe('GET /v1/games/:slug', () => {
  test('returns the game', async () => {
    const { status, body } = await json('/v1/games/magic-the-gathering')
    expect(status).toBe(200)
    expect(body.data.slug).toBe('magic-the-gathering')
    expect(body.data.priority).toBe(3)
    expect(body.data).toMatchObject({ image_url: null, logo_url: null })
    expect(body.data.marketplace_id).toBe((await marketplaceFacts('games')).get(body.data.id)!.marketplace_id)
    const pokemon = (await json('/v1/games/pokemon')).body.data
    expect({ marketplace_id: pokemon.marketplace_id, image_url: pokemon.image_url, logo_url: pokemon.logo_url }).toEqual((await marketplaceFacts('games')).get(pokemon.id)!)
    expect(pokemon.logo_url).toBeString()
  })

  test('an over-long slug is 400 naming the slug', async () => {
    const { status, body } = await json(`/v1/games/${'x'.repeat(101)}`)
    expect(status).toBe(400)
    expect(body.error.details).toEqual([{ field: 'slug', message: 'must be 1 to 100 characters long' }])
  })

  test('unknown slug is 404 NOT_FOUND in the error envelope', async () => {
    const { status, body } = await json('/v1/games/no-such-game')
    expect(status).toBe(404)
    expect(body).toEqual({ error: { code: 'NOT_FOUND', message: "Game 'no-such-game' not found", request_id: expect.any(String) } })
  })

  test('an all-digit value is the game id: the same game as by slug', async () => {
    const bySlug = (await json('/v1/games/magic-the-gathering')).body.data
    for (const id of [`${bySlug.id}`, `00${bySlug.id}`]) {
      const { status, body } = await json(`/v1/games/${id}`)
      expect(status).toBe(200)
      expect(body.data).toEqual(bySlug)
    }
    const other = (await json('/v1/games?per_page=100')).body.data.find((g: any) => g.id !== bySlug.id)
    expect((await json(`/v1/games/${other.id}`)).body.data.slug).toBe(other.slug)
  })

  test.each(['0', '999999', '2147483648', '99999999999999999999'])('an all-digit value no game has as id (%s) is 404, never read as a slug', async (id) => {
    const { status, body } = await json(`/v1/games/${id}`)
    expect(status).toBe(404)
    expect(body).toEqual({ error: { code: 'NOT_FOUND', message: `Game '${id}' not found`, request_id: expect.any(String) } })
  })

  test('a slug with digits and letters is still a slug', async () => {
    expect((await json('/v1/games/3d')).status).toBe(404)
    expect((await json('/v1/games/-3')).status).toBe(404)
  })
})

describe('GET /v1/games/:slug/sets', () => {
  test("lists the sets newest first with the list fields and the game's id, name and slug", async () => {
    const { status, body } = await json('/v1/games/pokemon/sets')
    expect(status).toBe(200)
    expect(body.data.length).toBeGreaterThan(0)
    expect(body.meta.total).toBe(body.data.length)
    expect(Object.keys(body.data[0]).sort()).toEqual(
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
    const facts = await marketplaceFacts('sets')
    for (const set of body.data) expect({ marketplace_id: set.marketplace_id, image_url: set.image_url, set_icon_url: set.set_icon_url }).toEqual(facts.get(set.id)!)
    // The newest set lost its pictures above; the others have the demo marketplace's.
    expect(body.data[0]).toMatchObject({ image_url: null, set_icon_url: null })
    for (const set of body.data.slice(1)) {
      expect(set.image_url).toBe(`https://marketplace.example/images/group/${set.marketplace_id}.jpg`)
      expect(set.set_icon_url).toBe(`https://marketplace.example/images/group/${set.marketplace_id}/icon.svg`)
    }
    const game = (await json('/v1/games/pokemon')).body.data
    for (const set of body.data) expect(set).toMatchObject({ game_id: game.id, game_name: game.name, game_slug: 'pokemon' })
    const dates = body.data.map((s: any) => s.release_date)
    expect(dates).toEqual([...dates].sort().reverse())
    for (const set of body.data) expect(set.release_date).toMatch(/^\d{4}-\d{2}-\d{2}$/)
  })

  test('pages through the sets', async () => {
    const all = (await json('/v1/games/pokemon/sets?per_page=100')).body
    const first = (await json('/v1/games/pokemon/sets?per_page=1&page=1')).body
    expect(first.data[0]).toEqual(all.data[0])
    expect(first.meta).toEqual({ total: all.meta.total, page: 1, per_page: 1, has_more: all.meta.total > 1 })
  })

  test('unknown slug is 404', async () => {
    const { status, body } = await json('/v1/games/nope/sets')
    expect(status).toBe(404)
    expect(body.error.code).toBe('NOT_FOUND')
  })

  test('the game id names the game here too', async () => {
    const game = (await json('/v1/games/pokemon')).body.data
    const byId = await json(`/v1/games/${game.id}/sets?per_page=1&page=2`)
    expect(byId.status).toBe(200)
    expect(byId.body.data).toHaveLength(1)
    expect(byId.body).toEqual((await json('/v1/games/pokemon/sets?per_page=1&page=2')).body)
    expect((await json('/v1/games/999999/sets')).status).toBe(404)
    expect((await json('/v1/games/2147483648/sets')).status).toBe(404)
  })

  test('per_page above 100 is served as 100', async () => {
    const { status, body } = await json('/v1/games/pokemon/sets?per_page=500')
    expect(status).toBe(200)
    expect(body.meta.per_page).toBe(100)
  })

  test('bad pagination is 400 before any lookup', async () => {
    const { status, body } = await json('/v1/games/nope/sets?per_page=0')
    expect(status).toBe(400)
    expect(body.error.code).toBe('INVALID_PARAMETER')
  })
})

describe('errors outside the routes', () => {
  test('an unknown route is 404 NOT_FOUND', async () => {
    const { status, body } = await json('/v1/nothing-here')
    expect(status).toBe(404)
    expect(body.error.code).toBe('NOT_FOUND')
  })

  test('a wrong method on a known path is 405 with Allow', async () => {
    const response = await server.get('/v1/games', { method: 'DELETE' })
    expect(response.status).toBe(405)
    expect(response.headers.get('allow')).toBe('GET')
    expect(((await response.json()) as any).error.code).toBe('METHOD_NOT_ALLOWED')
  })

  test('responses are JSON', async () => {
    const response = await server.get('/v1/games')
    expect(response.headers.get('content-type')).toContain('application/json')
  })
})

describe('open catalog reads kept for repeats', () => {
  test('a repeat is answered from the kept bytes only until the read they came from expires', async () => {
    const clock = fakeClock()
    const reads = openCatalogReads(clock, 60)
    let version = 0
    const load = async () => ({ data: { version: ++version } })
    const request = new Request('http://localhost/v1/games?per_page=5')
    const repeat = reads.early
    expect(repeat(request, '/v1/games?per_page=5')).toBeUndefined() // nothing read yet
    expect(await (await reads.json(request, 'games:1:5', load)).json()).toEqual({ data: { version: 1 } })
    expect(await repeat(request, '/v1/games?per_page=5')!.json()).toEqual({ data: { version: 1 } })
    expect(repeat(request, '/v1/games?per_page=05')).toBeUndefined() // kept by the exact path and query
    await clock.advance(59)
    expect(await repeat(request, '/v1/games?per_page=5')!.json()).toEqual({ data: { version: 1 } })
    await clock.advance(2)
    expect(repeat(request, '/v1/games?per_page=5')).toBeUndefined()
    expect(await (await reads.json(request, 'games:1:5', load)).json()).toEqual({ data: { version: 2 } })
    expect(await repeat(request, '/v1/games?per_page=5')!.json()).toEqual({ data: { version: 2 } })
  })

  test('a failed read is not kept', async () => {
    const reads = openCatalogReads(fakeClock(), 1_000)
    const request = new Request('http://localhost/v1/games/nope')
    await expect(reads.json(request, 'game:nope', () => Promise.reject(new Error('not found')))).rejects.toThrow('not found')
    expect(reads.early(request, '/v1/games/nope')).toBeUndefined()
  })
})
