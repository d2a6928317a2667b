import { afterAll } from 'bun:test'
import { type App, type AppDeps, appReady, createApp, refreshAppSnapshot, stopApp } from '../../src/app'
import { loadConfig } from '../../src/config'
import { accountWithKey } from './auth'
import { freshDatabase, testClock, testLogger, tinySource } from './db'

/**
 * AppDeps where the clock (default: TEST_NOW), the marketplace (default: the tiny demo marketplace the
 * seeded catalog came from) and any config entry (default: the service's, no Secure cookie) may be left out.
 */
export type TestAppDeps = Omit<AppDeps, 'clock' | 'config' | 'source'> & Partial<Pick<AppDeps, 'clock' | 'source'>> & { config?: Partial<AppDeps['config']> }

const DEFAULT_CONFIG = loadConfig({})

export const appDeps = ({ config, ...deps }: TestAppDeps): AppDeps => ({ clock: testClock, source: tinySource(), ...deps, config: { ...DEFAULT_CONFIG, ...config } })

export interface TestServer {
  base: string
  get(path: string, init?: RequestInit): Promise<Response>
  /** GET with the API key (if any), read as JSON. */
  json(path: string, key?: string): Promise<{ status: number; body: any; headers: Headers }>
  /** Resolves once the first price snapshot is built (`/ready` then says so). */
  ready(): Promise<void>
  /** Rebuilds the price snapshot from the database now, as a sync's announcement would; resolves once it serves. */
  refreshSnapshot(): Promise<void>
  /** Stops it now (and flushes its counters); otherwise it stops after the file's tests. */
  stop(): Promise<void>
}

/** The real app on a real port: tests speak HTTP to it. Stopped after the file's tests. */
export function startServer(deps: TestAppDeps, extend: (app: App) => App = (app) => app): TestServer {
  const app = extend(createApp(appDeps(deps))).listen({ port: 0, hostname: '127.0.0.1' })
  const base = `http://127.0.0.1:${app.server!.port}`
  const stop = () => stopApp(app)
  afterAll(stop, 60_000) // stopping drains connections and flushes counters to the database
  const get = (path: string, init?: RequestInit) => fetch(base + path, init)
  const json = async (path: string, key?: string) => {
    const response = await get(path, key === undefined ? undefined : { headers: { 'x-api-key': key } })
    return { status: response.status, body: (await response.json()) as any, headers: response.headers }
  }
  return { base, get, json, ready: () => appReady(app), refreshSnapshot: () => refreshAppSnapshot(app), stop }
}

/** The seeded demo catalog served over HTTP with the in-process quota store, and a Pro and a Free key. */
export async function seededCatalogServer() {
  const database = await freshDatabase('seeded')
  const server = startServer({ db: database.db, redis: undefined, logger: testLogger })
  const proKey = (await accountWithKey(database.db, 'pro')).key
  const freeKey = (await accountWithKey(database.db, 'free')).key
  return { database, server, proKey, freeKey }
}
