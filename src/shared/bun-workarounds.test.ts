import { describe, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Elysia } from 'elysia'
import { BUN_SERVE_OPTIONS, ELYSIA_OPTIONS, headOfStreamedAnswer } from './bun-workarounds'

// Each test checks the platform's own behaviour that a workaround in bun-workarounds.ts exists for:
// it fails once Bun (or Elysia) no longer behaves so, and the workaround can go. Not tested here:
// - connectionTimeoutSeconds (Bun's timers tick every 4 s): seeing a connection closed up to a
//   tick early takes more than a tick of real time and a measurement of it;
// - withoutConnectionTimeout (Bun's timer runs while a body arrives): seeing Bun close a trickled
//   body's connection takes the same, with the body paced by the clock.

/** strace, where it is installed and may trace a child (not in every container). */
const strace = Bun.which('strace')

/** A Bun process running `code`, which prints its server's port: that port, and the process. */
async function serverProcess(code: string, wrap: string[] = [], env: Record<string, string | undefined> = process.env) {
  const child = Bun.spawn([...wrap, process.execPath, '-e', code], { stdout: 'pipe', stderr: 'ignore', env })
  const reader = child.stdout.getReader()
  let text = ''
  while (!text.includes('\n')) {
    const { done, value } = await reader.read()
    if (done) throw new Error('the server exited before listening')
    text += new TextDecoder().decode(value)
  }
  return { url: `http://127.0.0.1:${text.trim()}/`, child }
}

/**
 * The sendto/sendmsg calls a Bun.serve makes to answer one request with a 20 kB body built by
 * `answer` on a later event-loop turn (a setTimeout), counted by strace once the server, stopped
 * after that answer, has exited.
 */
async function sendsForOneAnswer(answer: string): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'bun-workarounds-'))
  const log = join(dir, 'strace.log')
  const code = `
    const body = Buffer.alloc(20_000, 97)
    const answer = () => ${answer}
    const server = Bun.serve({ port: 0, hostname: '127.0.0.1', development: false, fetch: () => new Promise((resolve) => setTimeout(() => { resolve(answer()); server.stop() }, 0)) })
    console.log(server.port)`
  const { url, child } = await serverProcess(code, [strace!, '-f', '-qq', '-e', 'trace=sendto,sendmsg', '-o', log])
  try {
    const response = await fetch(url)
    expect((await response.arrayBuffer()).byteLength).toBe(20_000)
  } finally {
    await child.exited
  }
  const sends = readFileSync(log, 'utf8')
    .split('\n')
    .filter((line) => /\b(sendto|sendmsg)\(/.test(line)).length
  rmSync(dir, { recursive: true, force: true })
  return sends
}

describe('Bun writes a buffered body of 15 KiB or more answered on a later turn piecemeal (bytesResponse)', () => {
  test.skipIf(!strace)('a buffered body: the status line and every header name and value are a send(2) of their own', async () => {
    expect(await sendsForOneAnswer('new Response(body)')).toBeGreaterThan(10)
  })

  test.skipIf(!strace)('a one-chunk stream and a direct stream: the headers and the body in a couple of sends', async () => {
    const stream = 'new Response(new ReadableStream({ start(c) { c.enqueue(body); c.close() } }))'
    const direct = "new Response(new ReadableStream({ type: 'direct', pull(c) { c.write(body.subarray(0, 100)); c.write(body.subarray(100)); c.end() } }))"
    expect(await sendsForOneAnswer(stream)).toBeLessThanOrEqual(3)
    expect(await sendsForOneAnswer(direct)).toBeLessThanOrEqual(3)
  })
})

describe("Bun's development error page (BUN_SERVE_OPTIONS.development)", () => {
  // In a process of its own: the test runner reports an error thrown in a server it runs as its own.
  const answerOfFailingServer = async (options: string) => {
    const code = `const server = Bun.serve({ port: 0, hostname: '127.0.0.1', ${options} fetch() { throw new Error('the secret inside') } }); console.log(server.port)`
    const { url, child } = await serverProcess(code, [], { ...process.env, NODE_ENV: 'development' })
    try {
      const response = await fetch(url)
      return { status: response.status, text: await response.text() }
    } finally {
      child.kill()
      await child.exited
    }
  }

  test('by default, outside production, an error escaping a handler is answered with its message; with the option, not', async () => {
    expect((await answerOfFailingServer('')).text).toContain('the secret inside')
    const hidden = await answerOfFailingServer(`...${JSON.stringify(BUN_SERVE_OPTIONS)},`)
    expect(hidden.status).toBe(500)
    expect(hidden.text).not.toContain('the secret inside')
  })
})

describe("Elysia reads a path from the URL's 11th character (ELYSIA_OPTIONS.handler.standardHostname)", () => {
  test('by default a URL with a short host is routed by a wrong path; with the option, by its own', async () => {
    const route = (app: Elysia) => app.get('/v1/games', () => 'games')
    const byDefault = route(new Elysia())
    const withOption = route(new Elysia(ELYSIA_OPTIONS))
    expect((await byDefault.fetch(new Request('http://x/v1/games'))).status).toBe(404)
    expect((await byDefault.fetch(new Request('http://localhost/v1/games'))).status).toBe(200)
    const answer = await withOption.fetch(new Request('http://x/v1/games'))
    expect(answer.status).toBe(200)
    expect(await answer.text()).toBe('games')
  })
})

describe('Bun gives a body-less answer to HEAD a Content-Length of 0 (headOfStreamedAnswer)', () => {
  test('without the workaround a HEAD announces an empty body; with it, a chunked one, as its streamed GET', async () => {
    const headers = { 'content-type': 'text/csv' }
    const server = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      ...BUN_SERVE_OPTIONS,
      fetch: (request) => (new URL(request.url).pathname === '/plain' ? new Response(null, { headers }) : headOfStreamedAnswer(headers)),
    })
    try {
      const plain = await fetch(new URL('/plain', server.url), { method: 'HEAD' })
      expect(plain.headers.get('content-length')).toBe('0')
      const worked = await fetch(new URL('/worked', server.url), { method: 'HEAD' })
      expect(worked.headers.get('content-length')).toBeNull()
      expect(worked.headers.get('transfer-encoding')).toBe('chunked')
    } finally {
      await server.stop(true)
    }
  })
})
