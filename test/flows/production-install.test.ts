import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { sql } from 'drizzle-orm'
import { systemClock, withTimeout } from '../../src/shared/clock'
import { testRedisPrefix } from '../helpers/auth'
import { freshDatabase, selectRows } from '../helpers/db'
import { envOf, execForm, finalStage, imageFiles, readDockerfile } from '../helpers/docker-files'
import { TEST_DATABASE_URL, TEST_REDIS_URL } from '../helpers/env'
import { eventually } from '../helpers/eventually'
import { type Listening, ROOT, spawnUntilListening, stopProcess } from '../helpers/process'
import { freePort } from '../helpers/redis-server'

// What the image does, done without a container engine: the files its Dockerfile copies (minus
// .dockerignore) go to a temporary directory, its `npm ci` installs the production tree there from
// the lockfile, and its CMD starts the service on PostgreSQL and Redis from that copy alone.

const instructions = readDockerfile()
const image = finalStage(instructions)
const workdir = image.findLast((instruction) => instruction.keyword === 'WORKDIR')!.args
const command = execForm(image.findLast((instruction) => instruction.keyword === 'CMD')!.args)!
/** The image's `npm ci`: the one RUN of an earlier stage that runs it, with the variables it sets first. */
const install = (() => {
  const run = instructions.find((instruction) => instruction.keyword === 'RUN' && instruction.args.includes('npm ci'))!
  const words = run.args
    .split('&&')
    .find((part) => part.includes('npm ci'))!
    .trim()
    .split(/\s+/)
  const env = envOf(words.filter((word) => /^[A-Z_]+=/.test(word)).join(' '))
  return { env, args: words.filter((word) => !/^[A-Z_]+=/.test(word)) }
})()

const packageJson = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> }
const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> }

// npm ci from the warm cache CI's own install leaves (about 10 s alone), then a start that migrates
// an empty database and seeds the tiny demo catalog: minutes on a loaded 2-core machine, still a bound on a hang.
const INSTALL_MS = 300_000
const START_MS = 180_000

const npm = Bun.which('npm')

const runs = Boolean(TEST_DATABASE_URL && npm)

describe.skipIf(!runs)('the production install, as the image makes it', async () => {
  // Bun runs a skipped block's body too: nothing of it may happen then, and the run reports why.
  if (!runs) {
    test('needs PostgreSQL (TEST_DATABASE_URL) and npm', () => {})
    return
  }
  const dir = mkdtempSync(join(tmpdir(), 'tcg-image-'))
  let node: Listening | undefined
  let env: Record<string, string>
  let bun: string

  // Registered before the database, so the server is gone before the database's own clean-up drops it.
  afterAll(async () => {
    if (node) await stopProcess(node.child)
    if (balancer) await stopProcess(balancer.child)
    rmSync(dir, { recursive: true, force: true })
  }, 60_000)

  const database = await freshDatabase('empty')
  // Nothing migrated, not even the extension: the start must apply every migration itself.
  await database.db.execute(sql.raw('drop schema if exists drizzle cascade; drop schema public cascade; create schema public'))

  beforeAll(
    async () => {
      for (const file of imageFiles(instructions)) {
        mkdirSync(dirname(join(dir, file.target)), { recursive: true })
        copyFileSync(join(ROOT, file.source), join(dir, file.target))
      }
      const child = Bun.spawn([npm!, ...install.args.slice(1), '--prefer-offline'], {
        cwd: dir,
        env: { ...process.env, ...install.env },
        stdout: 'pipe',
        stderr: 'pipe',
      })
      const [code, stderr] = await withTimeout(systemClock, Promise.all([child.exited, new Response(child.stderr).text()]), INSTALL_MS, () => {
        child.kill('SIGKILL')
        return new Error(`${install.args.join(' ')} took over ${INSTALL_MS} ms`)
      })
      if (code !== 0) throw new Error(`${install.args.join(' ')} failed (${code}): ${stderr}`)
      // The image's environment, its WORKDIR being the copy; then what a test machine needs instead:
      // loopback and a free port, a database and a Redis namespace of the test's own.
      const imageEnv = Object.assign({}, ...image.filter((instruction) => instruction.keyword === 'ENV').map((instruction) => envOf(instruction.args)))
      env = {
        ...imageEnv,
        PATH: imageEnv.PATH!.replaceAll(workdir, dir).replace('$PATH', process.env.PATH ?? ''),
        HOST: '127.0.0.1',
        PORT: '0',
        DATA_DIR: join(dir, 'data'),
        DATABASE_URL: database.url!,
        ...(TEST_REDIS_URL && { REDIS_URL: TEST_REDIS_URL, REDIS_KEY_PREFIX: testRedisPrefix() }),
        WEBHOOK_SECRET_KEY: Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64'),
        DEMO_DATA: 'true',
        DEMO_SCALE: 'tiny',
        CONDITION_RECRAWL_PER_MINUTE: '0',
        LOG_LEVEL: 'info',
      }
      bun = Bun.which(command[0]!, { PATH: env.PATH })!
      node = await withTimeout(systemClock, spawnUntilListening(command.slice(1), env, { bun, cwd: dir }), START_MS, () => new Error(`no start within ${START_MS} ms`))
    },
    INSTALL_MS + START_MS + 60_000,
  )

  test('the image copies the code, the migrations and the package files, never tests, benches or .env files', () => {
    const copied = readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((path) => !path.startsWith('node_modules') && !path.startsWith('data'))
    expect(copied).toContain('src/index.ts')
    expect(copied).toContain('drizzle/0000_extensions.sql')
    expect(copied).toContain('package-lock.json')
    expect(copied.filter((path) => /^(test|bench|docs|\.git)\/|\.test\.ts$|(^|\/)\.env/.test(path))).toEqual([])
  })

  test('npm installs the production tree only, with its own Bun as the command', () => {
    expect(install.args).toContain('--omit=dev')
    const devOnly = Object.entries(lock.packages).filter(([path, entry]) => path && entry.dev)
    expect(devOnly.length).toBeGreaterThan(0)
    expect(devOnly.filter(([path]) => existsSync(join(dir, path))).map(([path]) => path)).toEqual([])
    // Direct dev dependencies the lockfile marks dev-only (typescript is also a peer of elysia's, so it stays).
    for (const name of ['@biomejs/biome', 'drizzle-kit', 'fast-check', 'autocannon', 'dependency-cruiser']) {
      expect(packageJson.devDependencies[name]).toBeDefined()
      expect(existsSync(join(dir, 'node_modules', name))).toBe(false)
    }
    expect(realpathSync(bun)).toBe(realpathSync(join(dir, 'node_modules/bun/bin/bun.exe')))
  })

  test('the start migrated the empty database and loaded a catalog, and /ready says ready', async () => {
    const journal = JSON.parse(readFileSync(join(ROOT, 'drizzle/meta/_journal.json'), 'utf8')) as { entries: unknown[] }
    const [applied] = await selectRows<{ n: number }>(database.db, sql`select count(*)::int as n from drizzle.__drizzle_migrations`)
    expect(applied!.n).toBe(journal.entries.length)
    const ready = await fetch(`${node!.url}/ready`)
    expect(ready.status).toBe(200)
    const body = (await ready.json()) as any
    expect(body.status).toBe('ready')
    expect(body.checks).toMatchObject({ database: 'ok', data: 'ok', redis: TEST_REDIS_URL ? 'ok' : 'not_configured' })
    expect(body.snapshot.cards).toBeGreaterThan(0)
  })

  test("the image's health check passes against this node and fails where nothing listens", async () => {
    const healthcheck = image.findLast((instruction) => instruction.keyword === 'HEALTHCHECK')!.args
    const [program, ...args] = execForm(healthcheck.slice(healthcheck.indexOf('CMD ') + 4))!
    expect(program).toBe(command[0]!)
    const check = async (port: number) => {
      const child = Bun.spawn([bun, ...args], { cwd: dir, env: { ...env, PORT: String(port) }, stdout: 'ignore', stderr: 'ignore' })
      return await child.exited
    }
    expect(await check(Number(new URL(node!.url).port))).toBe(0)
    expect(await check(await freePort())).toBe(1)
  })

  test('open reads, the docs page assets from node_modules, and a keyed read with a key the copy’s CLI made', async () => {
    const games = await fetch(`${node!.url}/v1/games`)
    expect(games.status).toBe(200)
    expect(((await games.json()) as any).data.length).toBeGreaterThan(0)
    const asset = await fetch(`${node!.url}/docs/assets/swagger-ui.css`)
    expect(asset.status).toBe(200)
    expect((await asset.text()).length).toBeGreaterThan(1000)

    const cli = async (...args: string[]) => {
      const child = Bun.spawn([bun, 'src/cli.ts', ...args], { cwd: dir, env, stdout: 'pipe', stderr: 'pipe' })
      const [code, stdout, stderr] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()])
      if (code !== 0) throw new Error(`cli ${args[0]} failed (${code}): ${stderr}`)
      return stdout.trim().split('\n')
    }
    await cli('account:create', '--email', 'image@example.com', '--password', 'a long enough password', '--tier', 'pro')
    const key = (await cli('key:create', '--email', 'image@example.com')).at(-1)!
    const [card] = await selectRows<{ id: number }>(database.db, sql`select id from cards order by id limit 1`)
    const prices = await fetch(`${node!.url}/v1/cards/${card!.id}/prices`, { headers: { 'x-api-key': key } })
    expect(prices.status).toBe(200)
    const data = ((await prices.json()) as { data: { printing: string }[] }).data
    expect(data.length).toBeGreaterThan(0)
    expect(typeof data[0]!.printing).toBe('string')
  }, 120_000)

  // The shipped HAProxy config with only its addresses changed: loopback ports, api-1 this node, api-2 a closed port.
  const haproxyBinary = Bun.which('haproxy')
  let balancer: { child: ReturnType<typeof Bun.spawn>; url: string; monitor: string; log: () => string } | undefined

  /** compose.yaml's health check of the balancer's container, run here against its monitor port. */
  const balancerCheck = async () => {
    const compose = Bun.YAML.parse(readFileSync(join(ROOT, 'compose.yaml'), 'utf8')) as { services: { lb: { healthcheck: { test: string[] } } } }
    const [kind, ...check] = compose.services.lb.healthcheck.test
    expect(kind).toBe('CMD')
    const monitorPort = new URL(balancer!.monitor).port
    const child = Bun.spawn(
      check.map((word) => word.replace('/8404', `/${monitorPort}`)),
      { stdout: 'ignore', stderr: 'ignore' },
    )
    return await child.exited
  }

  test.skipIf(!haproxyBinary)(
    'behind the load balancer: every request answered though one node is down, each with a request id',
    async () => {
      const [front, monitor, closed] = [await freePort(), await freePort(), await freePort()]
      const config = readFileSync(join(ROOT, 'deploy/haproxy.cfg'), 'utf8')
        .replace('bind :8080', `bind 127.0.0.1:${front}`)
        .replace('bind :8404', `bind 127.0.0.1:${monitor}`)
        .replace('api-1:3000', new URL(node!.url).host)
        .replace('api-2:3000', `127.0.0.1:${closed}`)
      const configPath = join(dir, 'haproxy.cfg')
      await Bun.write(configPath, config)
      const child = Bun.spawn([haproxyBinary!, '-db', '-f', configPath], { stdout: 'pipe', stderr: 'pipe' })
      let log = ''
      void (async () => {
        for await (const chunk of child.stdout) log += new TextDecoder().decode(chunk)
      })()
      balancer = { child, url: `http://127.0.0.1:${front}`, monitor: `http://127.0.0.1:${monitor}/healthz`, log: () => log }
      await eventually(async () => (await fetch(balancer!.monitor)).status === 200, { timeout: 30_000, what: 'the balancer seeing a node up' })
      const answers = await Promise.all(Array.from({ length: 20 }, () => fetch(`${balancer!.url}/v1/games`).then((answer) => answer.status)))
      expect(answers).toEqual(Array(20).fill(200))
      await fetch(`${balancer.url}/ready`, { headers: { 'x-request-id': 'client-chosen-id.1' } })
      // Its log line per request carries the id: the client's, or one it made (a UUID).
      const ids = await eventually(
        () => {
          const found = [...log.matchAll(/\{([^}]*)\}/g)].map((match) => match[1]!)
          return found.length >= 21 && found
        },
        { what: 'the balancer logging 21 requests' },
      )
      expect(await balancerCheck()).toBe(0)
      expect(ids).toContain('client-chosen-id.1')
      expect(ids.filter((id) => /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id)).length).toBe(20)
    },
    60_000,
  )

  test('SIGTERM stops it cleanly: exit code 0, nothing on stderr', async () => {
    const child = node!.child
    const stderr = new Response(child.stderr as ReadableStream).text()
    child.kill('SIGTERM')
    const code = await withTimeout(systemClock, child.exited, 30_000, () => new Error('no exit within 30 s of SIGTERM'))
    expect(code).toBe(0)
    expect(child.signalCode).toBeNull()
    expect(await stderr).toBe('')
    node = undefined
    if (balancer) {
      // Its only node gone, the balancer says so to its own health check.
      await eventually(async () => (await fetch(balancer!.monitor)).status === 503, { timeout: 30_000, what: 'the balancer seeing no node up' })
      expect(await balancerCheck()).not.toBe(0)
      await stopProcess(balancer.child)
    }
  })
})
