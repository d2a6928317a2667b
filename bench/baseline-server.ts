// The yardstick: a bare Bun.serve answering every request with the given bytes as JSON.
export {}
const body = await Bun.file(process.argv[2]!).bytes()
const server = Bun.serve({
  port: Number(process.argv[3] ?? 0),
  hostname: '127.0.0.1',
  fetch: () => new Response(body, { headers: { 'content-type': 'application/json' } }),
})
console.log(JSON.stringify({ msg: 'listening', url: `http://127.0.0.1:${server.port}` }))
