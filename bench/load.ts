/**
 * Load generation judged on the server's own CPU (bench/README.md "Budgets"): a run sends requests from a
 * list (each its own path and headers, cycled) at a fixed concurrency and reads the server
 * process's user + system CPU time from /proc around it, so a ratio between two servers is CPU per
 * request, whatever the client could push. wrk (Debian package `wrk`) when it is installed, since
 * autocannon on the same two cores caps a bare Bun.serve near 60% of what wrk reaches; autocannon
 * otherwise, and the run says which. With `maxRequests` a run ends at that count, by either tool;
 * `loadCount` sends exactly a number of requests, by autocannon.
 */
import { rmSync } from 'node:fs'
import autocannon from 'autocannon'
import { machineCpuSeconds, processCpuTimes } from './database'

export interface BenchRequest {
  path: string
  headers?: Record<string, string>
}

export const keyHeaders = (key: string) => ({ 'x-api-key': key })

/** Each path with one of the keys, taken in turn: many accounts share every path. */
export function keyedRequests(paths: string[], keys: string[]): BenchRequest[] {
  const count = Math.max(paths.length, keys.length)
  return Array.from({ length: count }, (_, i) => ({ path: paths[i % paths.length]!, headers: keyHeaders(keys[i % keys.length]!) }))
}

export interface LoadOptions {
  /** The server's origin, `http://127.0.0.1:port`. */
  url: string
  /** The process answering, whose CPU is measured. */
  pid: number
  requests: BenchRequest[]
  connections: number
  seconds: number
  /** Stop after about this many responses (a hot account has one quota): the run ends at whichever comes first. */
  maxRequests?: number
}

export interface LoadRun {
  tool: 'wrk' | 'autocannon'
  requests: number
  seconds: number
  rps: number
  /** Latency percentiles, ms. */
  p50: number
  p99: number
  /** Server CPU time (user + system) per request, in µs. */
  cpuPerRequestUs: number
  /** The system (kernel) part of it, µs. */
  systemPerRequestUs: number
  /** Server CPU seconds over wall seconds: about 1 when a single-threaded server was saturated. */
  cpuBusy: number
  /** Stopped at `maxRequests` before its duration (wrk: up to one request per connection more, those in flight). */
  capped: boolean
  /**
   * The share of the machine's CPU time the hypervisor gave to other guests during the run
   * (/proc/stat steal): on the shared VMs the benches have run on, the same yardstick moved 2×
   * between runs, and this says when a run was starved.
   */
  steal: number
  /** CPU seconds of the client (wrk's process, or this one for autocannon) during the run. */
  clientCpuSeconds: number
  /** Busy CPU seconds of the whole machine during the run (/proc/stat): less the server's, the client's and the database's, what else ran. */
  machineBusySeconds: number
}

let wrkPath: string | null | undefined
/** wrk's path, or null when it is not installed. */
export function wrkInstalled(): string | null {
  wrkPath ??= Bun.which('wrk')
  return wrkPath
}

const WRK_THREADS = 1

/** A Lua string literal. */
const lua = (text: string) => `"${text.replace(/[\\"]/g, (c) => `\\${c}`).replace(/\n/g, '\\n')}"`

/**
 * The wrk script: every request pre-formatted in init (the cheap way, per wrk's SCRIPTING), picked
 * in turn; a thread stops after its share of `maxRequests` and prints CAPPED; `done` prints one JSON line.
 */
function wrkScript(requests: BenchRequest[], perThread: number | undefined): string {
  const formatted = requests.map(({ path, headers = {} }) => {
    const table = Object.entries(headers).map(([name, value]) => `[${lua(name)}] = ${lua(value)}`)
    return `wrk.format("GET", ${lua(path)}, { ${table.join(', ')} })`
  })
  return `
local list = {}
local count = 0
local next = 0
init = function(args)
  ${formatted.map((request) => `list[#list + 1] = ${request}`).join('\n  ')}
  next = math.random(#list) - 1
end
request = function()
  next = next % #list + 1
  return list[next]
end
${
  perThread === undefined
    ? ''
    : `response = function(status, headers, body)
  count = count + 1
  if count == ${perThread} then
    io.write("${CAPPED}\\n")
    io.flush()
    wrk.thread:stop()
  end
end`
}
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), e.connect, e.read, e.write, e.status, e.timeout))
end
`
}

/** The line a wrk thread prints when it reaches its share of `maxRequests`. */
const CAPPED = 'WRK-CAPPED'

/** wrk's whole stdout; `onCapped` once every thread has printed CAPPED. */
async function readStdout(stdout: ReadableStream<Uint8Array>, onCapped: () => void): Promise<string> {
  const decoder = new TextDecoder()
  let out = ''
  let told = false
  for await (const chunk of stdout) {
    out += decoder.decode(chunk, { stream: true })
    if (!told && out.split(CAPPED).length - 1 >= WRK_THREADS) {
      told = true
      onCapped()
    }
  }
  return out + decoder.decode()
}

async function runWrk(options: LoadOptions): Promise<ClientRun> {
  const script = `/tmp/tcg-bench-${process.pid}-${Bun.hash(JSON.stringify(options.requests)).toString(36)}.lua`
  const perThread = options.maxRequests === undefined ? undefined : Math.ceil(options.maxRequests / WRK_THREADS)
  await Bun.write(script, wrkScript(options.requests, perThread))
  try {
    const child = Bun.spawn([wrkInstalled()!, `-t${WRK_THREADS}`, `-c${options.connections}`, `-d${options.seconds}s`, '--timeout', '5s', '-s', script, options.url], {
      stdout: 'pipe',
      stderr: 'pipe',
    })
    // wrk's main thread sleeps out the whole duration after its threads stop at the cap; SIGINT ends the sleep, and wrk reports the time it ran.
    const [out, err, code] = await Promise.all([readStdout(child.stdout, () => child.kill('SIGINT')), new Response(child.stderr).text(), child.exited])
    const line = /^WRK (.*)$/m.exec(out)?.[1]
    if (code !== 0 || line === undefined) throw new Error(`wrk failed (${code}): ${err}${out}`)
    const result = JSON.parse(line) as Record<string, number>
    const failures = ['connect', 'read', 'write', 'status', 'timeout'].filter((name) => result[name]! > 0)
    if (failures.length > 0) throw new Error(`${options.url}: ${failures.map((name) => `${result[name]} ${name} errors`).join(', ')}`)
    const seconds = result.duration_us! / 1e6
    const clientCpuSeconds = Number(child.resourceUsage()?.cpuTime.total ?? Number.NaN) / 1e6
    return { tool: 'wrk', requests: result.requests!, seconds, rps: result.requests! / seconds, p50: result.p50_us! / 1000, p99: result.p99_us! / 1000, clientCpuSeconds }
  } finally {
    rmSync(script, { force: true })
  }
}

type ClientRun = Omit<LoadRun, 'cpuPerRequestUs' | 'systemPerRequestUs' | 'cpuBusy' | 'capped' | 'steal' | 'machineBusySeconds'>

/**
 * autocannon for a duration or a number of requests. With `amount` it notices it is done only on
 * its one-second tick, so its own duration is rounded up to whole seconds (20,000 requests in
 * 2.3 s read as 6,645 req/s instead of 8,700): req/s is timed here, to the last response.
 */
function runAutocannon(options: Omit<LoadOptions, 'seconds' | 'maxRequests'>, length: { duration: number } | { amount: number }): Promise<ClientRun> {
  let next = Math.floor(Math.random() * options.requests.length)
  const cpuBefore = process.cpuUsage()
  const started = performance.now()
  let last = started
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: options.url,
        connections: options.connections,
        ...length,
        requests: [
          {
            setupRequest: (request) => {
              const chosen = options.requests[next++ % options.requests.length]!
              return { ...request, path: chosen.path, headers: { ...request.headers, ...chosen.headers } }
            },
          },
        ],
      },
      (error, result) => {
        if (error) return reject(error)
        if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
          return reject(new Error(`${options.url}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`))
        }
        const seconds = (last - started) / 1000
        const requests = result.requests.total
        const cpu = process.cpuUsage(cpuBefore)
        resolve({
          tool: 'autocannon',
          requests,
          seconds,
          rps: requests / seconds,
          p50: result.latency.p50,
          p99: result.latency.p99,
          clientCpuSeconds: (cpu.user + cpu.system) / 1e6,
        })
      },
    )
    instance.on('response', () => {
      last = performance.now()
    })
  })
}

/** A client run with the answering process's CPU around it, and the machine's steal. */
async function measured(pid: number, run: () => Promise<ClientRun>): Promise<Omit<LoadRun, 'capped'>> {
  const before = processCpuTimes(pid)
  const machineBefore = machineCpuSeconds()
  const wallBefore = performance.now()
  const client = await run()
  const after = processCpuTimes(pid)
  const machineAfter = machineCpuSeconds()
  const wall = (performance.now() - wallBefore) / 1000
  const system = after.system - before.system
  const cpu = after.user - before.user + system
  return {
    ...client,
    cpuPerRequestUs: (cpu / client.requests) * 1e6,
    systemPerRequestUs: (system / client.requests) * 1e6,
    cpuBusy: cpu / wall,
    steal: (machineAfter.steal - machineBefore.steal) / Math.max(0.01, machineAfter.total - machineBefore.total),
    machineBusySeconds: machineAfter.busy - machineBefore.busy,
  }
}

/** One run against `options.url`, with the answering process's CPU per request. Throws on any error or non-2xx answer. */
export async function load(options: LoadOptions): Promise<LoadRun> {
  const length = options.maxRequests === undefined ? { duration: options.seconds } : { amount: options.maxRequests }
  const run = await measured(options.pid, () => (wrkInstalled() ? runWrk(options) : runAutocannon(options, length)))
  return { ...run, capped: options.maxRequests !== undefined && run.requests >= options.maxRequests }
}

/**
 * Exactly `amount` requests, by autocannon whether or not wrk is installed (a wrk run stopped at a
 * count may answer a few more, those in flight), for runs that must stay within one account's quota. autocannon reports whole milliseconds,
 * and its req/s is bounded by the client on the same cores: compare servers on `cpuPerRequestUs`.
 */
export async function loadCount(server: { url: string; child: { pid: number } }, requests: BenchRequest[], amount: number, connections: number): Promise<LoadRun> {
  const run = () => runAutocannon({ url: server.url, pid: server.child.pid, requests, connections }, { amount })
  return { ...(await measured(server.child.pid, run)), capped: false }
}

/** Back-to-back runs as one: totals summed, CPU per request over all requests, the worst p50 and p99. */
export function combineRuns(runs: LoadRun[]): LoadRun {
  const requests = runs.reduce((sum, r) => sum + r.requests, 0)
  const seconds = runs.reduce((sum, r) => sum + r.seconds, 0)
  const weighted = (field: 'cpuPerRequestUs' | 'systemPerRequestUs') => runs.reduce((sum, r) => sum + r[field] * r.requests, 0) / requests
  return {
    tool: runs[0]!.tool,
    requests,
    seconds,
    rps: requests / seconds,
    p50: Math.max(...runs.map((r) => r.p50)),
    p99: Math.max(...runs.map((r) => r.p99)),
    cpuPerRequestUs: weighted('cpuPerRequestUs'),
    systemPerRequestUs: weighted('systemPerRequestUs'),
    cpuBusy: Math.min(...runs.map((r) => r.cpuBusy)),
    capped: runs.some((r) => r.capped),
    steal: runs.reduce((sum, r) => sum + r.steal * r.seconds, 0) / seconds,
    clientCpuSeconds: runs.reduce((sum, r) => sum + r.clientCpuSeconds, 0),
    machineBusySeconds: runs.reduce((sum, r) => sum + r.machineBusySeconds, 0),
  }
}
