import { describe, expect, test } from 'bun:test'
import { Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { fakeClock } from '../../test/helpers/clock'
import { connectionTimeoutSeconds } from './bun-workarounds'
import { errorHandler } from './http'
import { createLogger } from './logger'
import { requestRules } from './request-rules'

// The body's time limit is a rule about time, so it is judged on a fake clock (docs/testing.md
// "Time"); test/flows/request-limits.test.ts checks it over real sockets.

const REQUEST_TIMEOUT_SECONDS = 2

function appOn(clock: ReturnType<typeof fakeClock>) {
  return new Elysia()
    .use(requestRules({ maxBodyBytes: 1_024, requestTimeoutSeconds: REQUEST_TIMEOUT_SECONDS }, clock))
    .use(errorHandler(createLogger('silent'), { allowedMethods: () => [] }))
    .post('/echo', ({ body }) => body, { body: Type.Object({ name: Type.String() }) })
}

/** A chunked POST whose body the test writes piece by piece, and the app's answer to it. */
function slowPost(app: ReturnType<typeof appOn>) {
  let writer!: ReadableStreamDefaultController<Uint8Array>
  const body = new ReadableStream<Uint8Array>({ start: (controller) => void (writer = controller) })
  const request = new Request('http://localhost/echo', {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
  })
  return {
    answer: app.handle(request),
    send: (text: string) => writer.enqueue(new TextEncoder().encode(text)),
    end: () => writer.close(),
  }
}

describe(`a body must arrive whole within ${REQUEST_TIMEOUT_SECONDS} s`, () => {
  test('one whole at 1,999 ms is read and answered, and its deadline is dropped', async () => {
    const clock = fakeClock()
    const { answer, send, end } = slowPost(appOn(clock))
    send('{"name":')
    await clock.advance(1_999)
    send('"x"}')
    end()
    const response = await answer
    expect([response.status, await response.json(), response.headers.get('connection')]).toEqual([200, { name: 'x' }, null])
    expect(clock.pending()).toBe(0)
  })

  test('one still coming at 2,000 ms, however steadily, is a 408 that closes the connection', async () => {
    const clock = fakeClock()
    const { answer, send } = slowPost(appOn(clock))
    send('{"name":"')
    for (let ms = 0; ms < 1_999; ms += 500) {
      await clock.advance(Math.min(500, 1_999 - ms))
      send('x')
    }
    await clock.advance(1)
    const response = await answer
    expect([response.status, await response.json(), response.headers.get('connection')]).toEqual([
      408,
      {
        error: {
          code: 'REQUEST_TIMEOUT',
          message: `The request body took longer than the limit of ${REQUEST_TIMEOUT_SECONDS} s to arrive`,
          details: [{ field: 'body', message: `must arrive within ${REQUEST_TIMEOUT_SECONDS} s` }],
          request_id: response.headers.get('x-request-id'),
        },
      },
      'close',
    ])
  })
})

test("Bun's connection timeout is a 4 s tick over the setting, which its timers may fire up to a tick early, at most 255", () => {
  expect([1, 4, 5, 10, 251, 255].map(connectionTimeoutSeconds)).toEqual([5, 8, 9, 14, 255, 255])
})
