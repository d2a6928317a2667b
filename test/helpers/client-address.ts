import { request } from 'node:http'

let last = 0

/**
 * A loopback address no other caller in this process has had (never fetch's 127.0.0.1). Linux
 * routes all of 127.0.0.0/8 to the loopback interface, so a test can be as many clients as it
 * likes, each seen by the server as its socket's peer address: the only address the service trusts.
 */
export function freshAddress(): string {
  const n = ++last
  return `127.1.${n >> 8}.${n & 0xff}`
}

/** A request as fetch makes it, but sent from `localAddress` (fetch cannot choose its source address). */
export function fetchFrom(localAddress: string, url: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Response> {
  return new Promise((resolve, reject) => {
    const outgoing = request(url, { method: init.method ?? 'GET', headers: init.headers, localAddress, agent: false }, (incoming) => {
      const chunks: Buffer[] = []
      incoming.on('data', (chunk: Buffer) => chunks.push(chunk))
      incoming.on('error', reject)
      incoming.on('end', () => {
        const headers = new Headers()
        for (const [name, value] of Object.entries(incoming.headers)) for (const one of [value ?? []].flat()) headers.append(name, one)
        const status = incoming.statusCode!
        resolve(new Response(status === 204 || status === 304 ? null : Buffer.concat(chunks), { status, headers }))
      })
    })
    outgoing.on('error', reject)
    outgoing.end(init.body)
  })
}
