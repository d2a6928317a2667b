import { afterAll } from 'bun:test'
import { resolve } from 'node:path'
import { systemClock, withTimeout } from '../../src/shared/clock'

export const ROOT = resolve(import.meta.dir, '../..')

export interface Listening {
  url: string
  /** Every JSON log line up to and including the "listening" one. */
  lines: Record<string, any>[]
  /** Every other stdout line up to then (what the process prints for people, not as a log). */
  text: string[]
  child: ReturnType<typeof Bun.spawn>
  /** Its stdout after the "listening" line, once it ends: with `keepRest` only, '' otherwise (kept, an access log's lines would pile up). */
  rest: Promise<string>
}

/**
 * Starts `bun <args>` in the project root (or `bun` and `cwd` as given: another install of the
 * service) and resolves once it logs a JSON line whose `msg` starts with "listening" (carrying its
 * `url`). Its stdout keeps being drained afterwards, or its next log line would fail with EPIPE.
 */
export async function spawnUntilListening(
  args: string[],
  env: Record<string, string | undefined>,
  { bun = process.execPath, cwd = ROOT, keepRest = false }: { bun?: string; cwd?: string; keepRest?: boolean } = {},
): Promise<Listening> {
  // No metrics listener unless the test asks for one: servers started side by side would compete for its port.
  const child = Bun.spawn([bun, ...args], { cwd, env: { METRICS_PORT: '0', ...env }, stdout: 'pipe', stderr: 'pipe' })
  const reader = child.stdout.getReader()
  const decoder = new TextDecoder()
  const lines: Record<string, any>[] = []
  const text: string[] = []
  let buffered = ''
  for (;;) {
    const { done, value } = await reader.read()
    if (done) {
      const stderr = await new Response(child.stderr).text()
      await child.exited
      const how = child.signalCode ? `signal ${child.signalCode}` : `code ${child.exitCode}`
      throw new Error(`bun ${args.join(' ')} exited (${how}) before listening: ${stderr}\nits stdout: ${[...text, ...lines.map((l) => JSON.stringify(l))].join('\n')}`)
    }
    buffered += decoder.decode(value, { stream: true })
    let newline = buffered.indexOf('\n')
    while (newline >= 0) {
      const raw = buffered.slice(0, newline)
      buffered = buffered.slice(newline + 1)
      newline = buffered.indexOf('\n')
      const line = raw.startsWith('{') ? JSON.parse(raw) : undefined
      if (line === undefined) {
        text.push(raw)
        continue
      }
      lines.push(line)
      if (typeof line.msg === 'string' && line.msg.startsWith('listening')) {
        const rest = (async () => {
          let after = keepRest ? buffered : ''
          for (;;) {
            const { done, value } = await reader.read()
            if (done) return after + decoder.decode()
            if (keepRest) after += decoder.decode(value, { stream: true })
          }
        })()
        return { url: line.url, lines, text, child, rest }
      }
    }
  }
}

/**
 * Stops `child` for cleanup: SIGTERM, then SIGKILL if it has not exited within `graceMs`, so a
 * hook that stops a process always ends. Not for tests of a graceful stop, which must see it happen.
 */
export async function stopProcess(child: ReturnType<typeof Bun.spawn>, graceMs = 10_000): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
  await withTimeout(systemClock, child.exited, graceMs, () => new Error('no exit')).catch(() => child.kill('SIGKILL'))
  await child.exited
}

/**
 * Real servers (`bun src/index.ts`) a describe block starts with `start(env)`: every one is killed
 * (SIGKILL) after the block. Call it before creating the block's database, so the servers are gone
 * before the database's own clean-up drops it.
 */
export function serverProcesses() {
  const nodes: Listening[] = []
  afterAll(async () => {
    for (const node of nodes) {
      node.child.kill('SIGKILL')
      await node.child.exited
    }
  }, 30_000)
  const start = async (env: Record<string, string | undefined>) => {
    const node = await spawnUntilListening(['src/index.ts'], env)
    nodes.push(node)
    return node
  }
  return { nodes, start }
}
