import { expect } from 'bun:test'

/** One scrape, parsed: each sample's value by its name and labels. */
export interface Exposition {
  text: string
  /** The sample whose name and whole label set are these; undefined when there is none. */
  value(name: string, labels?: Record<string, string>): number | undefined
  /** Every sample's name (a histogram's `_bucket`, `_sum` and `_count` included). */
  names(): Set<string>
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g

/** The Prometheus text format (version 0.0.4), as a scraper reads it. */
export function parseExposition(text: string): Exposition {
  const samples: { name: string; labels: Record<string, string>; value: number }[] = []
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const match = SAMPLE.exec(line)
    if (!match) throw new Error(`not a sample line: ${line}`)
    const labels: Record<string, string> = {}
    for (const [, name, value] of (match[2] ?? '').matchAll(LABEL)) labels[name!] = value!.replace(/\\n/g, '\n').replace(/\\(.)/g, '$1')
    const raw = match[3]!
    samples.push({ name: match[1]!, labels, value: raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : Number(raw) })
  }
  const same = (a: Record<string, string>, b: Record<string, string>) => Object.keys(a).length === Object.keys(b).length && Object.entries(b).every(([k, v]) => a[k] === v)
  return {
    text,
    value: (name, labels = {}) => samples.find((sample) => sample.name === name && same(sample.labels, labels))?.value,
    names: () => new Set(samples.map((sample) => sample.name)),
  }
}

/** GETs a metrics listener's `/metrics` over HTTP, as Prometheus does, and parses it. */
export async function scrape(base: string): Promise<Exposition> {
  const response = await fetch(`${base}/metrics`)
  expect(response.status).toBe(200)
  expect(response.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8')
  return parseExposition(await response.text())
}
