/**
 * The soak's load balancer: Debian's HAProxy on loopback, in front of the soak's nodes, started
 * and stopped by the soak (docs/adr/0124-the-soak-behind-a-real-load-balancer.md says why HAProxy
 * and why these settings).
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { eventually } from '../test/helpers/eventually'

export const HAPROXY = '/usr/sbin/haproxy'

export interface BalancedNode {
  /** The server's name in HAProxy, sent back to clients as `X-Soak-Server`. */
  name: string
  port: number
}

/**
 * The configuration: round robin; the health check of the shipped deploy/haproxy.cfg (`GET /ready`
 * every 2 s, out after 3 failures, back after 2 successes, each allowed 3 s since `/ready`'s own
 * checks give up after 2 s); a request whose connection to a node fails before it was
 * sent goes to the other node (`retries` with `option redispatch`), and one already sent is never
 * replayed (a replay would be charged twice). The answering node's name goes back in a header.
 */
export function haproxyConfig(port: number, statsPort: number, nodes: BalancedNode[], log = false): string {
  return `global
  maxconn 4096
  nbthread 1${log ? '\n  log stdout format raw local0' : ''}

defaults
  mode http${log ? '\n  log global\n  option httplog' : ''}
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  timeout http-keep-alive 60s
  timeout check 3s
  retries 2
  option redispatch 1
  retry-on conn-failure

frontend soak
  bind 127.0.0.1:${port}
  default_backend nodes

backend nodes
  balance roundrobin
  option httpchk GET /ready
  http-check expect status 200
  default-server inter 2s fall 3 rise 2
  http-after-response set-header X-Soak-Server %[srv_name]
${nodes.map((node) => `  server ${node.name} 127.0.0.1:${node.port} check`).join('\n')}

frontend stats
  bind 127.0.0.1:${statsPort}
  no log
  stats enable
  stats uri /stats
`
}

/** A free TCP port on loopback, from the kernel. */
export function freePort(): number {
  const server = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
  const { port } = server
  server.stop(true)
  return port
}

export interface Balancer {
  url: string
  pid: number
  /** Each server's state as HAProxy sees it (`UP`, `DOWN`, `UP 1/2`, …). */
  states(): Promise<Map<string, string>>
  /** Each server's statistics by the names of HAProxy's CSV header (`wretr` retries, `wredis` redispatches, `eresp`, `srv_abrt`, …). */
  stats(): Promise<Map<string, Record<string, string>>>
  stop(): Promise<void>
}

/** With `logFile`, HAProxy logs each request there (`option httplog`: node, timings, status, termination state). */
export async function startBalancer(nodes: BalancedNode[], logFile?: string): Promise<Balancer> {
  if (!existsSync(HAPROXY)) throw new Error(`${HAPROXY} is missing: install Debian's haproxy package`)
  const dir = mkdtempSync(join(tmpdir(), 'tcg-soak-haproxy-'))
  const port = freePort()
  const statsPort = freePort()
  const configFile = join(dir, 'haproxy.cfg')
  writeFileSync(configFile, haproxyConfig(port, statsPort, nodes, logFile !== undefined))
  // -db: stays in the foreground, so it is this process's child and dies with a SIGTERM to it.
  const child = Bun.spawn([HAPROXY, '-db', '-f', configFile], { stdout: logFile ? Bun.file(logFile) : 'ignore', stderr: 'pipe' })
  const statsUrl = `http://127.0.0.1:${statsPort}/stats;csv`
  const stats = async () => {
    const [header, ...lines] = (await (await fetch(statsUrl)).text()).split('\n')
    const names = header!.replace(/^# /, '').split(',')
    const result = new Map<string, Record<string, string>>()
    for (const line of lines) {
      const fields = line.split(',')
      if (fields[0] === 'nodes' && fields[1] !== 'FRONTEND' && fields[1] !== 'BACKEND' && fields[1])
        result.set(fields[1], Object.fromEntries(names.map((name, i) => [name, fields[i] ?? ''])))
    }
    return result
  }
  const states = async () => new Map([...(await stats())].filter(([, row]) => row.status).map(([name, row]) => [name, row.status!]))
  const stop = async () => {
    child.kill('SIGTERM')
    await child.exited
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    await eventually(async () => [...(await states()).values()].filter((state) => state === 'UP').length === nodes.length, {
      timeout: 15_000,
      what: 'HAProxy seeing every node UP',
    })
  } catch (error) {
    await stop()
    const stderr = child.exitCode === null ? '' : await new Response(child.stderr).text()
    throw new Error(`${error instanceof Error ? error.message : error}${stderr ? `; haproxy: ${stderr}` : ''}`)
  }
  return { url: `http://127.0.0.1:${port}`, pid: child.pid, states, stats, stop }
}

/** Waits until HAProxy sees `name` in `state`; resolves with when (epoch ms) it was first seen so. */
export async function whenState(balancer: Balancer, name: string, state: 'UP' | 'DOWN', timeout = 60_000): Promise<number> {
  await eventually(async () => (await balancer.states()).get(name) === state, { timeout, interval: 50, what: `HAProxy marking ${name} ${state}` })
  return performance.timeOrigin + performance.now()
}
