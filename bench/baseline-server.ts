// The yardstick: a bare Bun.serve answering as JSON with the given bytes for every path or, given a
// `.paths.json` file ({ "/path?query": body }), with each path's own body, so a scenario whose
// responses differ in size is measured against the same bytes.
export {}

const [file = '', port = '0'] = process.argv.slice(2)
const headers = { 'content-type': 'application/json' }
let fetch: (request: Request) => Response
if (file.endsWith('.paths.json')) {
  const bodies = new Map<string, Uint8Array>()
  for (const [path, body] of Object.entries((await Bun.file(file).json()) as Record<string, string>)) bodies.set(path, Buffer.from(body))
  let origin = 0
  fetch = (request) => {
    origin ||= request.url.indexOf('/', request.url.indexOf('//') + 2)
    const body = bodies.get(request.url.slice(origin))
    return body ? new Response(body, { headers }) : new Response('no such path', { status: 404 })
  }
} else {
  const body = await Bun.file(file).bytes()
  fetch = () => new Response(body, { headers })
}
const server = Bun.serve({ port: Number(port), hostname: '127.0.0.1', fetch })
console.log(JSON.stringify({ msg: 'listening', url: `http://127.0.0.1:${server.port}` }))
