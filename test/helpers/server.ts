import { afterAll } from 'bun:test'
import { type AppDeps, createApp } from '../../src/app'

export interface TestServer {
  base: string
  get(path: string, init?: RequestInit): Promise<Response>
}

/** The real app on a real port: tests speak HTTP to it. Stopped after the file's tests. */
export function startServer(deps: AppDeps): TestServer {
  const app = createApp(deps).listen({ port: 0, hostname: '127.0.0.1' })
  const base = `http://127.0.0.1:${app.server!.port}`
  afterAll(() => app.stop())
  return { base, get: (path, init) => fetch(base + path, init) }
}
