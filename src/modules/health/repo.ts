import { sql } from 'drizzle-orm'
import type { Executor } from '../../db/client'

/** The cheapest statement: answers when the database does. */
export async function pingDatabase(db: Executor): Promise<void> {
  await db.execute(sql`select 1`)
}
