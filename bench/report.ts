import { appendFileSync } from 'node:fs'

/** One judged (or reported) figure of a bench: what `bench/all.ts` gathers into one table. */
export interface BudgetRow {
  bench: string
  measure: string
  value: string
  budget: string
  /** undefined: reported, not judged. */
  pass?: boolean
}

const verdict = (row: BudgetRow) => (row.pass === undefined ? '–' : row.pass ? 'PASS' : 'FAIL')

/** The budget table as Markdown. */
export function budgetTable(rows: BudgetRow[]): string {
  const lines = ['| bench | measure | value | budget | result |', '|---|---|---|---|---|']
  for (const row of rows) lines.push(`| ${row.bench} | ${row.measure} | ${row.value} | ${row.budget} | ${verdict(row)} |`)
  return lines.join('\n')
}

/**
 * Prints a bench's budget rows and, under `bench/all.ts` (BENCH_RESULTS_FILE set), hands them on
 * as JSON lines. True when none failed.
 */
export function reportBudgets(rows: BudgetRow[]): boolean {
  console.log(budgetTable(rows))
  const file = process.env.BENCH_RESULTS_FILE
  if (file) appendFileSync(file, rows.map((row) => `${JSON.stringify(row)}\n`).join(''))
  return rows.every((row) => row.pass !== false)
}
