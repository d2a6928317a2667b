/**
 * A fake TCGCSV mirror (test/fixtures/fake-tcgcsv.ts) in its own process, on a real socket that a
 * test can slow, break or kill. Expectations come from test/fixtures/tcgcsv-data.ts.
 *
 *   const mirror = await startFakeTcgcsv()
 *   await mirror.setFault({ kind: 'status', status: 429, retryAfter: 2, match: '/prices', times: 1 })
 *   ... await mirror.stop()
 */

import { DEFAULT_MIRROR_DATE, type LoggedRequest, type MirrorSize, type Modification, type TcgcsvFault } from '../fixtures/fake-tcgcsv'
import type { TcgcsvMirrorCounts } from '../fixtures/tcgcsv-data'
import { spawnUntilListening, stopProcess } from './process'

/** A User-Agent the fake mirror accepts, as a test client's. */
export const TEST_USER_AGENT = 'tcg-price-api-tests/1.0 (+https://example.org/tcg-price-api; ops@example.org)'

export interface FakeTcgcsv {
  /** Base URL, e.g. http://127.0.0.1:40123 (a source's `url`). */
  url: string
  /** The mirror process's pid (benches read its CPU from /proc). */
  pid: number
  size: MirrorSize
  /** What the mirror holds: categories, groups, products and price rows. */
  counts: TcgcsvMirrorCounts
  /** Replaces the active faults; [] clears them. */
  setFault(fault: TcgcsvFault | TcgcsvFault[]): Promise<void>
  /** The faults still active (a fault with `times` clears itself once used up). */
  faults(): Promise<TcgcsvFault[]>
  /** Every request the mirror received since it started or was reset, in order; control requests not included. */
  requests(): Promise<LoggedRequest[]>
  /** Clears the faults and the request log. */
  reset(): Promise<void>
  /** Moves the mirror to `date` (YYYY-MM-DD): its prices and last-updated.txt. */
  setDay(date: string): Promise<void>
  /** Renames one product of the group and bumps the group's modifiedOn. */
  modifyGroup(groupId: number): Promise<Modification>
  /** SIGKILL: the mirror dies mid-answer, as a crashed server would. */
  kill(): Promise<void>
  /** SIGTERM, then SIGKILL if it lingers; for cleanup. */
  stop(): Promise<void>
}

export interface FakeTcgcsvOptions {
  size?: MirrorSize
  /** The mirror's first day (YYYY-MM-DD); TCGCSV_BASE_DATE by default. */
  date?: string
}

export async function startFakeTcgcsv(options: FakeTcgcsvOptions = {}): Promise<FakeTcgcsv> {
  const size = options.size ?? 'small'
  const args = ['test/fixtures/fake-tcgcsv.ts', '--port', '0', '--size', size, '--date', options.date ?? DEFAULT_MIRROR_DATE]
  const started = await spawnUntilListening(args, process.env)
  const mirrorLine = started.lines.find((line) => line.msg === 'mirror')
  if (!mirrorLine) throw new Error('the fake mirror did not log its counts')
  const { categories, groups, products, priceRows } = mirrorLine as TcgcsvMirrorCounts

  const control = async <T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> => {
    const response = await fetch(started.url + path, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    if (!response.ok) throw new Error(`fake mirror ${method} ${path}: ${response.status} ${await response.text()}`)
    return (await response.json()) as T
  }

  return {
    url: started.url,
    pid: started.child.pid,
    size,
    counts: { categories, groups, products, priceRows },
    async setFault(fault) {
      await control('POST', '/_fault', fault)
    },
    async faults() {
      return (await control<{ faults: TcgcsvFault[] }>('GET', '/_fault')).faults
    },
    async requests() {
      return (await control<{ requests: LoggedRequest[] }>('GET', '/_requests')).requests
    },
    async reset() {
      await control('POST', '/_reset', {})
    },
    async setDay(date) {
      await control('POST', '/_day', { date })
    },
    modifyGroup(groupId) {
      return control<Modification>('POST', '/_modify', { groupId })
    },
    async kill() {
      started.child.kill('SIGKILL')
      await started.child.exited
    },
    stop: () => stopProcess(started.child),
  }
}
