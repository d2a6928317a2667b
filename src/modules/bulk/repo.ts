import { and, eq, inArray, sql } from 'drizzle-orm'
import { type Executor, selectRows } from '../../db/client'
import { cards } from '../../db/schema'
import { type CardRecord, cardsWhere } from '../catalog/queries'

/** Cards whose cleaned name is one of `cleanNames` (index cards_clean_name_idx), optionally of one game. */
export async function findCardsByCleanName(db: Executor, cleanNames: string[], gameId: number | undefined): Promise<CardRecord[]> {
  if (cleanNames.length === 0) return []
  return cardsWhere(db, and(inArray(cards.cleanName, cleanNames), gameId === undefined ? undefined : eq(cards.gameId, gameId)))
}

export interface NameCandidate {
  /** Position of the name in `cleanNames`. */
  position: number
  cardId: number
  score: number
}

/** How many candidates a fuzzy lookup returns per name. */
export const CANDIDATES_PER_NAME = 5

/**
 * For each name, the cards whose cleaned names are most similar to it (pg_trgm similarity, at least
 * the 0.3 threshold of `%`, through the trigram index), best first, at most CANDIDATES_PER_NAME: one
 * statement for all the names (a VALUES list joined laterally), not a query per name.
 */
export async function findSimilarNames(db: Executor, cleanNames: string[], gameId: number | undefined): Promise<NameCandidate[]> {
  if (cleanNames.length === 0) return []
  const names = sql.join(
    cleanNames.map((name, position) => sql`(${name}::text, ${position}::int)`),
    sql`, `,
  )
  const rows = await selectRows<NameCandidate>(
    db,
    sql`
    select q.position, m.id as "cardId", m.score
    from (values ${names}) as q(name, position)
    cross join lateral (
      select ${cards.id} as id, similarity(${cards.cleanName}, q.name) as score
      from ${cards}
      where ${cards.cleanName} % q.name ${gameId === undefined ? sql`` : sql`and ${cards.gameId} = ${gameId}`}
      order by score desc, ${cards.id}
      limit ${CANDIDATES_PER_NAME}
    ) m
    order by q.position, m.score desc, m.id`,
  )
  return rows.map((row) => ({ position: Number(row.position), cardId: Number(row.cardId), score: Number(row.score) }))
}
