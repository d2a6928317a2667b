import { describe, expect, test } from 'bun:test'
import { JOBS, type JobName, latestRunAtOrBefore, newYorkTime, nextRunAfter, runsAfter } from './schedule'

const pattern = (name: JobName) => JOBS.find((job) => job.name === name)!.pattern
const iso = (dates: Date[]) => dates.map((date) => date.toISOString())

/** The New York calendar day of an instant, written apart from the code under test. */
const newYorkDay = (instant: Date) => new Intl.DateTimeFormat('en-CA', { timeZone: 'America/New_York' }).format(instant)

describe('the job table', () => {
  test('one job per update tier at the times of docs/adr/0063-the-schedule.md, and the every-minute re-crawl', () => {
    expect(JOBS.map((job) => [job.name, job.pattern, job.tier])).toEqual([
      ['sync-tier-3', '0 2 * * *', 3],
      ['sync-tier-2', '0 3 * * *', 2],
      ['sync-tier-1', '0 4 * * 1,4', 1],
      ['sync-tier-0', '0 4 * * 0', 0],
      ['condition-recrawl', '* * * * *', undefined],
    ])
  })
})

describe('cron instants across daylight-saving changes (America/New_York)', () => {
  // 2027-03-14: clocks jump from 02:00 EST to 03:00 EDT, so 02:00 does not exist that day.
  test('spring forward: tier 3 (02:00) fires once, at 03:00 EDT, and 06:00 UTC from the next day on', () => {
    expect(iso(runsAfter(pattern('sync-tier-3'), new Date('2027-03-12T12:00:00Z'), 4))).toEqual([
      '2027-03-13T07:00:00.000Z', // 02:00 EST
      '2027-03-14T07:00:00.000Z', // the missing 02:00, run at 03:00 EDT
      '2027-03-15T06:00:00.000Z', // 02:00 EDT
      '2027-03-16T06:00:00.000Z',
    ])
  })

  test('spring forward: tier 2 (03:00), tier 1 (Mon and Thu 04:00) and tier 0 (Sun 04:00) move by one hour in UTC', () => {
    expect(iso(runsAfter(pattern('sync-tier-2'), new Date('2027-03-12T12:00:00Z'), 3))).toEqual([
      '2027-03-13T08:00:00.000Z',
      '2027-03-14T07:00:00.000Z',
      '2027-03-15T07:00:00.000Z',
    ])
    expect(iso(runsAfter(pattern('sync-tier-1'), new Date('2027-03-08T12:00:00Z'), 3))).toEqual([
      '2027-03-11T09:00:00.000Z', // Thursday, EST
      '2027-03-15T08:00:00.000Z', // Monday, EDT
      '2027-03-18T08:00:00.000Z',
    ])
    expect(iso(runsAfter(pattern('sync-tier-0'), new Date('2027-03-06T12:00:00Z'), 2))).toEqual([
      '2027-03-07T09:00:00.000Z',
      '2027-03-14T08:00:00.000Z', // the changeover Sunday: 04:00 EDT exists
    ])
  })

  // 2026-11-01: clocks fall back from 02:00 EDT to 01:00 EST, so 01:00 to 01:59 happens twice.
  test('fall back: 02:00 comes once (EST, after the repeated hour), 03:00 and 04:00 move by one hour in UTC', () => {
    expect(iso(runsAfter(pattern('sync-tier-3'), new Date('2026-10-30T12:00:00Z'), 3))).toEqual([
      '2026-10-31T06:00:00.000Z', // 02:00 EDT
      '2026-11-01T07:00:00.000Z', // 02:00 EST
      '2026-11-02T07:00:00.000Z',
    ])
    expect(iso(runsAfter(pattern('sync-tier-2'), new Date('2026-10-30T12:00:00Z'), 3))).toEqual([
      '2026-10-31T07:00:00.000Z',
      '2026-11-01T08:00:00.000Z',
      '2026-11-02T08:00:00.000Z',
    ])
    expect(iso(runsAfter(pattern('sync-tier-0'), new Date('2026-10-30T12:00:00Z'), 2))).toEqual(['2026-11-01T09:00:00.000Z', '2026-11-08T09:00:00.000Z'])
    expect(iso(runsAfter(pattern('sync-tier-1'), new Date('2026-10-28T12:00:00Z'), 2))).toEqual(['2026-10-29T08:00:00.000Z', '2026-11-02T09:00:00.000Z'])
  })

  test('a time inside the repeated hour (01:30) still fires once that day, at its first occurrence', () => {
    expect(iso(runsAfter('30 1 * * *', new Date('2026-10-31T12:00:00Z'), 2))).toEqual(['2026-11-01T05:30:00.000Z', '2026-11-02T06:30:00.000Z'])
  })

  test('every daily job runs exactly once on each New York day through both changes', () => {
    for (const name of ['sync-tier-3', 'sync-tier-2'] as const) {
      for (const [from, days] of [
        ['2026-10-25T12:00:00Z', 14],
        ['2027-03-07T12:00:00Z', 14],
      ] as const) {
        const runs = runsAfter(pattern(name), new Date(from), days)
        const runDays = runs.map(newYorkDay)
        expect(new Set(runDays).size).toBe(days)
        // Consecutive calendar days: none skipped, none doubled.
        for (let i = 1; i < runDays.length; i++) {
          expect(Date.parse(`${runDays[i]}T00:00:00Z`) - Date.parse(`${runDays[i - 1]}T00:00:00Z`)).toBe(86_400_000)
        }
      }
    }
  })

  test('the every-minute job never fires twice in a minute, and keeps going through both changes', () => {
    // In the repeated hour croner may fire each wall-clock minute once (skipping the second 01:xx)
    // or every real minute, depending on whether TZ is set: either way at most once a minute.
    const fall = runsAfter(pattern('condition-recrawl'), new Date('2026-11-01T05:58:30Z'), 64)
    expect(fall[0]!.toISOString()).toBe('2026-11-01T05:59:00.000Z')
    expect(fall.map((run) => run.toISOString())).toContain('2026-11-01T07:00:00.000Z')
    for (let i = 1; i < fall.length; i++) expect(fall[i]!.getTime() - fall[i - 1]!.getTime()).toBeGreaterThanOrEqual(60_000)
    const spring = runsAfter(pattern('condition-recrawl'), new Date('2027-03-14T06:58:30Z'), 3)
    expect(iso(spring)).toEqual(['2027-03-14T06:59:00.000Z', '2027-03-14T07:00:00.000Z', '2027-03-14T07:01:00.000Z'])
  })
})

describe('the latest scheduled instant (what catch-up runs)', () => {
  test('is the instant itself when asked at it, the one before when asked just before', () => {
    expect(latestRunAtOrBefore(pattern('sync-tier-3'), new Date('2026-11-21T07:00:00Z'))?.toISOString()).toBe('2026-11-21T07:00:00.000Z')
    expect(latestRunAtOrBefore(pattern('sync-tier-3'), new Date('2026-11-21T06:59:59Z'))?.toISOString()).toBe('2026-11-20T07:00:00.000Z')
  })

  test('finds a weekly job a week back, and the spring-forward run of a 02:00 job', () => {
    expect(latestRunAtOrBefore(pattern('sync-tier-0'), new Date('2026-11-21T12:00:00Z'))?.toISOString()).toBe('2026-11-15T09:00:00.000Z')
    expect(latestRunAtOrBefore(pattern('sync-tier-1'), new Date('2026-11-22T12:00:00Z'))?.toISOString()).toBe('2026-11-19T09:00:00.000Z')
    expect(latestRunAtOrBefore(pattern('sync-tier-3'), new Date('2027-03-14T07:30:00Z'))?.toISOString()).toBe('2027-03-14T07:00:00.000Z')
    expect(latestRunAtOrBefore(pattern('condition-recrawl'), new Date('2026-11-21T12:00:30Z'))?.toISOString()).toBe('2026-11-21T12:00:00.000Z')
  })

  test('agrees with the next instant: no instant lies between them', () => {
    for (const job of JOBS) {
      for (const at of ['2026-11-01T06:30:00Z', '2027-03-14T06:30:00Z', '2026-11-24T17:00:00Z']) {
        const latest = latestRunAtOrBefore(job.pattern, new Date(at))!
        expect(latest.getTime()).toBeLessThanOrEqual(Date.parse(at))
        expect(nextRunAfter(job.pattern, latest)!.getTime()).toBeGreaterThan(Date.parse(at))
      }
    }
  })
})

test('New York wall-clock time carries the offset in force at the instant', () => {
  expect(newYorkTime(new Date('2026-11-25T07:00:00Z'))).toBe('2026-11-25T02:00:00-05:00')
  expect(newYorkTime(new Date('2027-03-15T06:00:00Z'))).toBe('2027-03-15T02:00:00-04:00')
  expect(newYorkTime(new Date('2026-11-01T05:30:00Z'))).toBe('2026-11-01T01:30:00-04:00')
  expect(newYorkTime(new Date('2026-11-01T06:30:00Z'))).toBe('2026-11-01T01:30:00-05:00')
})
