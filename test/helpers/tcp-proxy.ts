import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net'

/**
 * A TCP proxy a test puts between a service and PostgreSQL or Redis to make a real outage: it
 * forwards until told to refuse new connections (the port stops listening: ECONNREFUSED), to stall
 * them (accepted, never answered: the client's connect timeout decides), to cut the open ones, or
 * to hold the server's replies (requests still reach the server and run: the client's command
 * timeout fires though the server did the work, as when the client's event loop stalls).
 */
export interface TcpProxy {
  port: number
  /** Connections accepted so far, in every mode: how often the client tried to connect. */
  readonly accepted: number
  /** `url` (a postgres:// URL) pointed at the proxy instead of its own host and port. */
  via(url: string): string
  /** New connections are refused (the listening socket closes); open ones carry on. */
  refuse(): Promise<void>
  /** New connections are accepted and held without a byte forwarded either way. */
  stall(): Promise<void>
  /** Closes every open connection, both sides: queries in flight fail, the pool must reconnect. */
  cut(): void
  /** From now on, bytes from the server are held back (in order) instead of reaching the client. */
  holdReplies(): void
  /** Sends what was held back, and forwards replies again. */
  releaseReplies(): void
  /** Forwards new connections again. */
  resume(): Promise<void>
  close(): Promise<void>
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>()
  let mode: 'forward' | 'stall' = 'forward'
  let server: Server | undefined
  let port = 0
  let accepted = 0
  /** While set, the server's bytes wait here, per client socket, in order. */
  let heldReplies: [Socket, Buffer][] | undefined

  const track = (socket: Socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {}) // a cut or a closed peer: the 'close' that follows is enough
  }

  function accept(client: Socket) {
    accepted++
    track(client)
    if (mode === 'stall') return
    const upstream = connect(target.port, target.host)
    track(upstream)
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
    client.pipe(upstream)
    upstream.on('data', (chunk: Buffer) => (heldReplies ? heldReplies.push([client, chunk]) : client.write(chunk)))
  }

  async function listen() {
    if (server) return
    const next = createServer(accept)
    await new Promise<void>((resolve, reject) => {
      next.once('error', reject)
      next.listen(port, '127.0.0.1', () => resolve())
    })
    server = next
    port = (next.address() as AddressInfo).port
  }

  async function unlisten() {
    const current = server
    server = undefined
    // close() stops accepting at once; its callback would wait for the open connections to end.
    current?.close()
  }

  await listen()
  return {
    get port() {
      return port
    },
    get accepted() {
      return accepted
    },
    via(url) {
      const parsed = new URL(url)
      parsed.hostname = '127.0.0.1'
      parsed.port = String(port)
      return parsed.toString()
    },
    async refuse() {
      await unlisten()
    },
    async stall() {
      mode = 'stall'
      await listen()
    },
    cut() {
      for (const socket of sockets) socket.destroy()
    },
    holdReplies() {
      heldReplies ??= []
    },
    releaseReplies() {
      const held = heldReplies ?? []
      heldReplies = undefined
      for (const [client, chunk] of held) if (!client.destroyed) client.write(chunk)
    },
    async resume() {
      mode = 'forward'
      await listen()
    },
    async close() {
      await unlisten()
      for (const socket of sockets) socket.destroy()
    },
  }
}
