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

/** One bench's rows in bench/results.md, with when and on what they were measured. */
export interface ResultSection {
  bench: string
  /** ISO 8601 instant the bench started. */
  date: string
  /** The machine line (describeMachine) with the load average at the bench's start. */
  machine: string
  rows: BudgetRow[]
  /** A note under the machine line: how the rows were measured where it is not a plain run. */
  note?: string
}

const sectionStart = (bench: string) => `<!-- bench ${bench} -->`
const sectionEnd = (bench: string) => `<!-- /bench ${bench} -->`
const SECTION = /<!-- bench ([\w-]+) -->\n[\s\S]*?<!-- \/bench \1 -->\n?/g

/** A bench's section of bench/results.md, between markers so a later run can replace it alone. */
export function resultSection(section: ResultSection): string {
  const lines = [sectionStart(section.bench), `### ${section.bench}`, '', `${section.date.slice(0, 10)} · ${section.machine}`, '']
  if (section.note) lines.push(section.note, '')
  lines.push('| measure | value | budget | result |', '|---|---|---|---|')
  for (const row of section.rows) lines.push(`| ${row.measure} | ${row.value} | ${row.budget} | ${verdict(row)} |`)
  lines.push(sectionEnd(section.bench), '')
  return lines.join('\n')
}

/**
 * bench/results.md with the given benches' sections replaced (or added) and every other bench's
 * section kept as it was, with its own date and machine; sections in `order`, unknown ones after.
 */
export function mergeResults(existing: string, sections: ResultSection[], order: string[], header: string): string {
  const kept = new Map<string, string>()
  for (const match of existing.matchAll(SECTION)) kept.set(match[1]!, match[0].endsWith('\n') ? match[0] : `${match[0]}\n`)
  for (const section of sections) kept.set(section.bench, resultSection(section))
  const names = [...order.filter((name) => kept.has(name)), ...[...kept.keys()].filter((name) => !order.includes(name))]
  return [header, ...names.map((name) => kept.get(name)!)].join('\n')
}
