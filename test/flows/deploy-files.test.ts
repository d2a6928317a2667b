import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { loadConfig } from '../../src/config'
import { envOf, execForm, finalStage, readDockerfile } from '../helpers/docker-files'
import { ROOT } from '../helpers/process'

// What can be checked of the image and of compose.yaml without a container engine: the files are
// read and cross-checked here; test/flows/production-install.test.ts runs what the image runs.

interface Service {
  build?: string
  image?: string
  environment?: Record<string, string>
  depends_on?: Record<string, { condition: string }>
  healthcheck?: { test?: string[] }
  volumes?: string[]
  ports?: string[]
  secrets?: { source: string; uid?: string; mode?: number }[]
  networks?: string[]
}

const compose = Bun.YAML.parse(readFileSync(join(ROOT, 'compose.yaml'), 'utf8')) as {
  services: Record<string, Service>
  volumes: Record<string, unknown>
  networks: Record<string, { ipam: { config: { subnet: string }[] } }>
  secrets: Record<string, { environment?: string; file?: string }>
}
const services = compose.services
const apiNodes = Object.keys(services).filter((name) => services[name]!.build !== undefined)
const instructions = readDockerfile()
const image = finalStage(instructions)
const last = (keyword: string) => image.findLast((instruction) => instruction.keyword === keyword)
const imageEnv = Object.assign({}, ...image.filter((instruction) => instruction.keyword === 'ENV').map((instruction) => envOf(instruction.args))) as Record<string, string>
const haproxyConfig = readFileSync(join(ROOT, 'deploy/haproxy.cfg'), 'utf8')

describe('the Dockerfile', () => {
  test('production dependencies only, installed from the lockfile', () => {
    const install = instructions.filter((instruction) => instruction.keyword === 'RUN' && instruction.args.includes('npm '))
    expect(install.map((instruction) => instruction.args.match(/npm \S+/)![0])).toEqual(['npm ci'])
    expect(install[0]!.args).toContain('--omit=dev')
    // The image runs no npm: its last stage copies the installed tree from the one that did.
    expect(image.some((instruction) => instruction.keyword === 'RUN' && /\bnpm\b/.test(instruction.args))).toBe(false)
    expect(image.some((instruction) => instruction.keyword === 'COPY' && /--from=\S+ \/app\/node_modules/.test(instruction.args))).toBe(true)
  })

  test('runs as a user other than root, the command in exec form under an init that passes signals on', () => {
    const user = last('USER')!.args
    expect(['root', '0', '0:0']).not.toContain(user)
    expect(image.findIndex((instruction) => instruction.keyword === 'USER')).toBeLessThan(image.findIndex((instruction) => instruction.keyword === 'CMD'))
    expect(execForm(last('CMD')!.args)).toEqual(['bun', 'src/index.ts'])
    expect(execForm(last('ENTRYPOINT')!.args)).toEqual(['/usr/bin/tini', '--'])
    expect(imageEnv.PATH).toStartWith(`${last('WORKDIR')!.args}/node_modules/.bin:`)
  })

  test('its health check asks /ready on the port the service listens on, with a start period', () => {
    const check = last('HEALTHCHECK')!.args
    expect(check).toMatch(/--start-period=\d+s/)
    const command = execForm(check.slice(check.indexOf('CMD ') + 4))!
    expect(command.slice(0, 2)).toEqual(['bun', '-e'])
    expect(command[2]).toContain("'/ready'")
    expect(command[2]).toContain('process.env.PORT')
    expect(command[2]).toContain('r.status === 200')
    expect(imageEnv).toMatchObject({ NODE_ENV: 'production', HOST: '0.0.0.0', PORT: '3000', DATA_DIR: '/data' })
  })
})

describe('compose.yaml', () => {
  test('PostgreSQL, Redis, two API nodes of one image and a load balancer, each with a health check', () => {
    expect(apiNodes).toEqual(['api-1', 'api-2'])
    expect(Object.keys(services).sort()).toEqual(['api-1', 'api-2', 'lb', 'postgres', 'redis'])
    const [first, second] = apiNodes.map((name) => services[name]!)
    expect(second!.build).toBe(first!.build!)
    expect(second!.image).toBe(first!.image!)
    expect(second!.environment).toEqual(first!.environment!)
    for (const name of ['postgres', 'redis', 'lb']) expect(services[name]!.healthcheck?.test?.length).toBeGreaterThan(0)
    // The nodes keep the image's own check (GET /ready) and only time it.
    for (const name of apiNodes) {
      expect(services[name]!.healthcheck).toBeDefined()
      expect(services[name]!.healthcheck!.test).toBeUndefined()
    }
  })

  test('every dependency names a service, and waits for it to be healthy or started', () => {
    for (const [name, service] of Object.entries(services)) {
      for (const [dependency, { condition }] of Object.entries(service.depends_on ?? {})) {
        expect({ name, dependency, exists: dependency in services }).toEqual({ name, dependency, exists: true })
        expect(['service_healthy', 'service_started']).toContain(condition)
      }
    }
    for (const name of apiNodes) expect(services[name]!.depends_on).toMatchObject({ postgres: { condition: 'service_healthy' }, redis: { condition: 'service_healthy' } })
    // One node at a time migrates and loads an empty catalog.
    expect(services['api-2']!.depends_on!['api-1']).toEqual({ condition: 'service_healthy' })
  })

  test('both nodes share PostgreSQL and Redis by service name, may both lead, and need the secrets set', () => {
    const env = services['api-1']!.environment!
    expect(new URL(env.DATABASE_URL!.replace(/\$\{[^}]*\}/g, 'x')).host).toBe('postgres:5432')
    expect(new URL(env.REDIS_URL!).host).toBe('redis:6379')
    expect(env.JOBS_ENABLED).toBe('true')
    expect(env.DATABASE_URL).toContain('${POSTGRES_PASSWORD:?')
    expect(services.postgres!.environment!.POSTGRES_PASSWORD).toMatch(/^\$\{POSTGRES_PASSWORD:\?.+\}$/)
    // The nodes listen on the image's port: nothing here moves it.
    expect(env.PORT).toBeUndefined()
  })

  test('the webhook key reaches the nodes as a compose secret file readable by the image user, never as a variable', () => {
    const imageUser = last('USER')!.args.split(':')[0]
    for (const name of apiNodes) {
      const env = services[name]!.environment!
      expect(env.WEBHOOK_SECRET_KEY).toBeUndefined()
      const [secret] = services[name]!.secrets!
      expect(env.WEBHOOK_SECRET_KEY_FILE).toBe(`/run/secrets/${secret!.source}`)
      expect(compose.secrets[secret!.source]).toEqual({ environment: 'WEBHOOK_SECRET_KEY' })
      // The image's user by number: compose sets the owner of a copied secret, and reads no passwd.
      expect(['tcg', '1000']).toContain(imageUser!)
      expect(secret).toMatchObject({ uid: '1000', mode: 0o400 })
    }
  })

  test("the nodes trust exactly the balancer's network, the only network the balancer is on", () => {
    expect(services.lb!.networks).toEqual(['balancer'])
    const subnet = compose.networks.balancer!.ipam.config[0]!.subnet
    for (const name of apiNodes) {
      expect(services[name]!.networks).toContain('balancer')
      expect(services[name]!.environment!.TRUSTED_PROXIES).toBe(subnet)
    }
    for (const name of ['postgres', 'redis']) expect(services[name]!.networks ?? []).not.toContain('balancer')
    // With its default value, a range the service itself accepts.
    const defaulted = subnet.replace(/\$\{[A-Z_]+:-([^}]+)\}/, '$1')
    expect(loadConfig({ TRUSTED_PROXIES: defaulted }).trustedProxies).toEqual([defaulted])
    // The balancer replaces the header with the address its client connected from.
    expect(haproxyConfig).toMatch(/^\s*http-request set-header X-Forwarded-For %\[src\]$/m)
    expect(haproxyConfig).not.toMatch(/option forwardfor/)
  })

  test('every named volume is declared', () => {
    const named = Object.values(services)
      .flatMap((service) => service.volumes ?? [])
      .map((volume) => volume.split(':')[0]!)
      .filter((source) => !source.startsWith('.') && !source.startsWith('/'))
    expect(named.length).toBeGreaterThan(0)
    for (const volume of named) expect(Object.keys(compose.volumes)).toContain(volume)
  })

  test("the load balancer runs deploy/haproxy.cfg, whose servers are the API nodes on the image's port, checked on /ready", () => {
    expect(services.lb!.volumes).toContain('./deploy/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro')
    const servers = [...haproxyConfig.matchAll(/^\s*server\s+(\S+)\s+(\S+):(\d+)/gm)].map(([, name, host, port]) => ({ name, host, port }))
    expect(servers).toEqual(apiNodes.map((name) => ({ name, host: name, port: imageEnv.PORT })))
    expect(haproxyConfig).toMatch(/^\s*option httpchk GET \/ready$/m)
    expect(haproxyConfig).toMatch(/^\s*http-check expect status 200$/m)
    const [published] = services.lb!.ports!
    const bound = [...haproxyConfig.matchAll(/^\s*bind :(\d+)$/gm)].map(([, port]) => port)
    expect(bound).toContain(published!.split(':').at(-1)!)
    // Its container's own check asks the monitor port, which is not published.
    const monitor = /^frontend monitor\n\s*bind :(\d+)\n\s*monitor-uri (\S+)$/m.exec(haproxyConfig)!
    expect(services.lb!.healthcheck!.test!.join(' ')).toContain(`/dev/tcp/127.0.0.1/${monitor[1]} && printf 'GET ${monitor[2]} `)
    expect(services.lb!.ports!.join(' ')).not.toContain(monitor[1])
  })

  const haproxy = Bun.which('haproxy')
  test.skipIf(!haproxy)('haproxy accepts the config; its only warnings are the service names this machine cannot resolve', async () => {
    const child = Bun.spawn([haproxy!, '-c', '-f', join(ROOT, 'deploy/haproxy.cfg')], { stdout: 'pipe', stderr: 'pipe' })
    const [code, stdout, stderr] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()])
    expect(code).toBe(0)
    expect(stdout).toContain('Configuration file is valid')
    const warnings = stderr.split('\n').filter((line) => line.includes('[WARNING]') || line.includes('[ALERT]'))
    for (const warning of warnings) expect(warning).toMatch(/could not resolve address '(api-1|api-2)'/)
  })
})
