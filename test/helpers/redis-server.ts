import Redis from 'ioredis'

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
  for (let attempt = 0; attempt < 100; attempt++) {
    const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
    probe.on('error', () => {})
    try {
      await probe.connect()
      if ((await probe.ping()) === 'PONG') return server
    } catch {
      // not up (or still loading its data) yet
    } finally {
      probe.disconnect()
    }
    await Bun.sleep(20)
  }
  server.kill('SIGKILL')
  throw new Error(`redis-server did not start on port ${port}`)
}
