import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { selectRows } from '../../../test/helpers/db'
import { seededCatalogServer } from '../../../test/helpers/server'
import { cleanName } from '../../shared/text'
import { MAX_AUTOCOMPLETE } from './model'

const { database, server, proKey, freeKey } = await seededCatalogServer()

const autocomplete = (params: Record<string, string>, key: string | null = proKey) => server.json(`/v1/cards/autocomplete?${new URLSearchParams(params)}`, key ?? undefined)

// The catalog as stored, to pick prefixes from and to compute the answers independently.
const cards = await selectRows<{ name: string; clean_name: string; game_id: number }>(database.db, sql`select name, clean_name, game_id from cards`)
const games = await selectRows<{ id: number; slug: string }>(database.db, sql`select id, slug from games order by id`)

const byCodePoint = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/**
 * The answer the API promises, computed plainly: names starting with the text, then names where
 * every word of the text starts a word of the name; each group shorter clean names first, then by
 * name; distinct names, at most MAX_AUTOCOMPLETE.
 */
function expected(text: string, gameId?: number): string[] {
  const words = text.split(' ')
  const groupOf = (clean: string) => (clean.startsWith(text) ? 0 : words.every((word) => clean.split(' ').some((part) => part.startsWith(word))) ? 1 : -1)
  const matches = cards
    .filter((card) => gameId === undefined || card.game_id === gameId)
    .map((card) => ({ ...card, group: groupOf(card.clean_name) }))
    .filter((card) => card.group >= 0)
    .sort((a, b) => a.group - b.group || a.clean_name.length - b.clean_name.length || byCodePoint(a.name, b.name))
  return [...new Set(matches.map((card) => card.name))].slice(0, MAX_AUTOCOMPLETE)
}

/** Distinct names whose clean name starts with the text, and distinct names with a word starting with it. */
function counts(text: string, gameId?: number) {
  const inGame = cards.filter((card) => gameId === undefined || card.game_id === gameId)
  const starting = new Set(inGame.filter((card) => card.clean_name.startsWith(text)).map((card) => card.name)).size
  const anyWord = new Set(inGame.filter((card) => card.clean_name.split(' ').some((word) => word.startsWith(text))).map((card) => card.name)).size
  return { starting, anyWord }
}

/** The two-letter prefixes of name words. */
const prefixes = [
  ...new Set(
    cards.flatMap((card) =>
      card.clean_name
        .split(' ')
        .filter((word) => /^[a-z]{2}/.test(word))
        .map((word) => word.slice(0, 2)),
    ),
  ),
]

/** A prefix with more than 20 word matches, of which some but fewer than 20 names start with it: both groups show and the list is cut. */
const mixed = prefixes.find((prefix) => {
  const { starting, anyWord } = counts(prefix)
  return starting > 0 && starting < MAX_AUTOCOMPLETE && anyWord > MAX_AUTOCOMPLETE + starting
})
/** A prefix matching names in at least two games. */
const shared = prefixes.find((prefix) => new Set(cards.filter((card) => card.clean_name.split(' ').some((word) => word.startsWith(prefix))).map((card) => card.game_id)).size >= 2)
const sharedGame = games.find((game) => cards.some((card) => card.game_id === game.id && card.clean_name.split(' ').some((word) => word.startsWith(shared!))))
const [accented] = await selectRows<{ name: string; clean_name: string }>(database.db, sql`select name, clean_name from cards where name ~ '[éëáñÉ]' order by id limit 1`)
const [twoWords] = await selectRows<{ name: string; clean_name: string }>(
  database.db,
  sql`select name, clean_name from cards where clean_name ~ '^[a-z]{4,} [a-z]{4,}$' order by id limit 1`,
)

describe('GET /v1/cards/autocomplete', () => {
  test('the fixtures exist', () => {
    for (const fact of [mixed, shared, sharedGame, accented, twoWords]) expect(fact).toBeDefined()
  })

  test('a 2-letter prefix: up to 20 distinct names, names starting with it first, then names with a word starting with it', async () => {
    const { status, body, headers } = await autocomplete({ q: mixed! })
    expect(status).toBe(200)
    expect(headers.get('content-type')).toContain('application/json')
    expect(body.data).toEqual(expected(mixed!))
    expect(body.data).toHaveLength(MAX_AUTOCOMPLETE)
    expect(new Set(body.data).size).toBe(body.data.length)
    expect(body.meta).toEqual({ total: MAX_AUTOCOMPLETE })
    const starting = counts(mixed!).starting
    const startsWith = body.data.map((name: string) => cleanName(name).startsWith(mixed!))
    expect(startsWith).toEqual([...Array(starting).fill(true), ...Array(MAX_AUTOCOMPLETE - starting).fill(false)])
    for (const name of body.data)
      expect(
        cleanName(name)
          .split(' ')
          .some((word) => word.startsWith(mixed!)),
      ).toBe(true)
  })

  test('several words: each must start a word of the name, in any order', async () => {
    const [first, second] = twoWords!.clean_name.split(' ') as [string, string]
    const q = `${second.slice(0, 3)} ${first.slice(0, 3)}`
    const { status, body } = await autocomplete({ q })
    expect(status).toBe(200)
    expect(body.data).toEqual(expected(q))
    expect(body.data).toContain(twoWords!.name)
  })

  test('game keeps to that game', async () => {
    const all = await autocomplete({ q: shared! })
    const inGame = await autocomplete({ q: shared!, game: sharedGame!.slug })
    expect(inGame.status).toBe(200)
    expect(inGame.body.data).toEqual(expected(shared!, sharedGame!.id))
    const namesOfGame = new Set(cards.filter((card) => card.game_id === sharedGame!.id).map((card) => card.name))
    for (const name of inGame.body.data) expect(namesOfGame.has(name)).toBe(true)
    expect(all.body.data).toEqual(expected(shared!))
  })

  test('case, accents and punctuation do not matter', async () => {
    const plain = accented!.clean_name
    const answers = await Promise.all([accented!.name, accented!.name.toUpperCase(), plain, ` ${plain.replaceAll(' ', ' -- ')}! `].map((q) => autocomplete({ q })))
    for (const { status, body } of answers) {
      expect(status).toBe(200)
      expect(body.data).toContain(accented!.name)
      expect(body.data).toEqual(answers[0]!.body.data)
    }
    expect(answers[0]!.body.data).toEqual(expected(plain))
  })

  test('no match is an empty list', async () => {
    const { status, body } = await autocomplete({ q: 'qzxjvwqzxj' })
    expect(status).toBe(200)
    expect(body.data).toEqual([])
    expect(body.meta).toEqual({ total: 0 })
    expect(body.rate_limit).toBeDefined()
  })

  test('q missing, too short, too long or without a letter or digit is a 400; an unknown game a 404', async () => {
    const cases: [Record<string, string>, number, string][] = [
      [{}, 400, 'q'],
      [{ q: 'a' }, 400, 'q'],
      [{ q: ' a ' }, 400, 'q'],
      [{ q: 'x'.repeat(201) }, 400, 'q'],
      [{ q: '!?' }, 400, 'q'],
      [{ q: 'ch', game: 'no-such-game' }, 404, 'no-such-game'],
    ]
    for (const [params, status, named] of cases) {
      const { status: got, body } = await autocomplete(params)
      expect({ params, status: got }).toEqual({ params, status })
      expect(JSON.stringify(body.error)).toContain(named)
      expect(body.rate_limit).toBeDefined() // refused after the key was charged
    }
  })

  test('no key is 401; every tier may ask, and each call costs one unit', async () => {
    const anonymous = await autocomplete({ q: mixed! }, null)
    expect(anonymous.status).toBe(401)
    expect(anonymous.body.error.code).toBe('API_KEY_REQUIRED')
    const free = await autocomplete({ q: mixed! }, freeKey)
    expect(free.status).toBe(200)
    expect(free.body.rate_limit).toMatchObject({ daily_limit: 100 })
    expect(free.headers.get('x-ratelimit-limit')).toBe('100')
    const again = await autocomplete({ q: mixed! }, freeKey)
    expect(again.body.rate_limit.daily_remaining).toBe(free.body.rate_limit.daily_remaining - 1)
    expect(again.headers.get('x-ratelimit-remaining')).toBe(String(again.body.rate_limit.daily_remaining))
  })

  test('the path is not taken for a card id: /v1/cards/autocomplete answers names, /v1/cards/:id still the card', async () => {
    const [card] = await selectRows<{ id: number; name: string }>(database.db, sql`select id, name from cards order by id limit 1`)
    const named = await server.json(`/v1/cards/${card!.id}`, proKey)
    expect(named.status).toBe(200)
    expect(named.body.data).toMatchObject({ id: card!.id, name: card!.name })
    const names = await autocomplete({ q: mixed! })
    expect(names.status).toBe(200)
    expect(Array.isArray(names.body.data)).toBe(true)
    // Without q it is autocomplete's refusal, naming q, not a card id's.
    const bare = await server.json('/v1/cards/autocomplete', proKey)
    expect(bare.status).toBe(400)
    expect(bare.body.error.details).toEqual([expect.objectContaining({ field: 'q' })])
  })

  test('the OpenAPI document has the route with its query and answer schemas and an example', async () => {
    const doc = (await server.json('/openapi.json')).body
    const operation = doc.paths['/v1/cards/autocomplete']?.get
    expect(operation).toBeDefined()
    const parameters = Object.fromEntries(operation.parameters.map((parameter: any) => [parameter.name, parameter]))
    expect(parameters.q).toMatchObject({ in: 'query', required: true, schema: { type: 'string', minLength: 2 } })
    expect(parameters.game).toMatchObject({ in: 'query', schema: { type: 'string' } })
    expect(parameters.game.required ?? false).toBe(false)
    const ok = operation.responses['200'].content['application/json']
    expect(ok.schema.properties.data).toMatchObject({ type: 'array', items: { type: 'string' }, maxItems: MAX_AUTOCOMPLETE })
    expect(ok.schema.properties.meta.properties.total).toMatchObject({ type: 'integer' })
    expect(ok.schema.required).toEqual(expect.arrayContaining(['data', 'meta', 'rate_limit']))
    expect(ok.example.data.length).toBeGreaterThan(0)
    for (const status of ['400', '401', '404']) expect(operation.responses[status]).toBeDefined()
  })
})
