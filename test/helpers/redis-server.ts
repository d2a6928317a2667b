import Redis from 'ioredis'
import { eventually } from './eventually'

/** A TCP port nothing listens on right now. */
export async function freePort(): Promise<number> {
  const listener = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
  const port = listener.port
  listener.stop(true)
  return port
}

/**
 * Starts a private `redis-server` on 127.0.0.1:`port` with `args` (persistence settings) and
 * resolves once it answers PING, so tests can kill and restart a real Redis of their own.
 */
export async function spawnRedisServer(port: number, args: string[]): Promise<ReturnType<typeof Bun.spawn>> {
  const server = Bun.spawn(['redis-server', '--port', String(port), '--bind', '127.0.0.1', ...args], { stdout: 'ignore', stderr: 'ignore' })
  const answers = async () => {
    const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
    probe.on('error', () => {})
    try {
      await probe.connect()
      return (await probe.ping()) === 'PONG'
    } finally {
      probe.disconnect()
    }
  }
  try {
    // Not up, or still loading its data, until it answers.
    await eventually(answers, { timeout: 15_000, what: `redis-server answering on port ${port}` })
  } catch (error) {
    server.kill('SIGKILL')
    throw error
  }
  return server
}
