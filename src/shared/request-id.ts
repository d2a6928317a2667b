import { AsyncLocalStorage } from 'node:async_hooks'
import { randomUUID } from 'node:crypto'
import type { Clock } from './clock'
import type { RequestDone } from './request-record'

// Request ids, and what is known of the request being handled wherever its handling goes
// (docs/adr/0121-request-ids-and-the-access-log.md).

export const REQUEST_ID_HEADER = 'x-request-id'

/** An incoming X-Request-Id kept as is: 1 to 128 characters a log line, a header and a URL carry unescaped. */
const WELL_FORMED = /^[A-Za-z0-9._:-]{1,128}$/

/** The request id of a request that sent `incoming` (its X-Request-Id, or null): that one when well-formed, a new UUID otherwise. */
export const requestIdFor = (incoming: string | null): string => (incoming !== null && WELL_FORMED.test(incoming) ? incoming : randomUUID())

/** What is known of the request being handled, filled in as its handling learns it. */
interface RequestState {
  readonly id: string
  /** The route template; undefined until a router names it. */
  route: string | undefined
  accountId: number | undefined
  tier: string | undefined
  /** The body length its builder noted (withBodyLength), and the status it was noted with. */
  bytes: number | undefined
  bytesStatus: number
  /** When the request entered the step (the clock's monotonic milliseconds). */
  readonly started: number
}

const requests = new AsyncLocalStorage<RequestState>()

/** The id of the request being handled here, if any: log lines and error envelopes carry it. */
export const currentRequestId = (): string | undefined => requests.getStore()?.id

/** Notes the route template the router matched for the request being handled. */
export function noteRoute(route: string) {
  const state = requests.getStore()
  if (state) state.route = route
}

/** Notes the account a key or session identified for the request being handled. */
export function noteAccount(accountId: number, tier: string) {
  const state = requests.getStore()
  if (state === undefined) return
  state.accountId = accountId
  state.tier = tier
}

/**
 * `response`, noting that its body is `bytes` long for the request record. Noted in the request's
 * state rather than on the Response, which Elysia copies; used only if the answer keeps its status.
 */
export function withBodyLength(response: Response, bytes: number): Response {
  const state = requests.getStore()
  if (state) {
    state.bytes = bytes
    state.bytesStatus = response.status
  }
  return response
}

/** The route template of an answered request no router named (refused before routing, or no route): bounded, never the raw path. */
export const UNMATCHED_ROUTE = 'unmatched'

export interface RequestTracking {
  clock: Pick<Clock, 'monotonic'>
  /** Called once per request with its record, after its answer is ready. */
  done: RequestDone | undefined
  /** The route template of a request no router named while it was handled (a refusal before routing), or UNMATCHED_ROUTE. */
  routeOf: (request: Request) => string
  /** The answer to an error that escaped every handler: the last-resort 500, with this request's id in its envelope. */
  lastResort: (error: unknown) => Response
}

/**
 * The outermost request step: gives the request its id (the incoming X-Request-Id when well-formed),
 * runs the rest within it (log lines and error envelopes read it through currentRequestId), echoes it
 * as X-Request-Id on the answer, whatever answered, and hands the request's record to `done`.
 * `route` is the template when the router that called it already knows it (a hot path).
 * Synchronous answers stay synchronous: the hot repeats are answered without a promise.
 */
export function requestTracking(tracking: RequestTracking) {
  return (route?: string) =>
    (request: Request, next: (request: Request) => Response | Promise<Response>): Response | Promise<Response> => {
      const state: RequestState = {
        id: requestIdFor(request.headers.get(REQUEST_ID_HEADER)),
        route,
        accountId: undefined,
        tier: undefined,
        bytes: undefined,
        bytesStatus: 0,
        started: tracking.clock.monotonic(),
      }
      let answer: Response | Promise<Response>
      try {
        answer = requests.run(state, next, request)
      } catch (error) {
        return finished(tracking, request, state, requests.run(state, tracking.lastResort, error))
      }
      // A hot answer is finished here, with no closure made for it.
      if (answer instanceof Response) return finished(tracking, request, state, answer)
      return answer.then(
        (response) => finished(tracking, request, state, response),
        (error: unknown) => finished(tracking, request, state, requests.run(state, tracking.lastResort, error)),
      )
    }
}

/** The answer with the request's id echoed, its record handed to `done`. */
function finished(tracking: RequestTracking, request: Request, state: RequestState, response: Response): Response {
  response.headers.set(REQUEST_ID_HEADER, state.id)
  tracking.done?.({
    method: request.method,
    route: state.route ?? tracking.routeOf(request),
    status: response.status,
    durationMs: tracking.clock.monotonic() - state.started,
    bytes: bodyLength(request.method, response, state),
    accountId: state.accountId,
    tier: state.tier,
    requestId: state.id,
  })
  return response
}

/** RequestRecord `bytes`: none to send, else the noted length when the answer kept the status it was noted with, else a declared Content-Length. */
function bodyLength(method: string, response: Response, state: RequestState): number | undefined {
  if (method === 'HEAD' || response.status === 204 || response.status === 304) return 0
  if (state.bytes !== undefined && state.bytesStatus === response.status) return state.bytes
  const declared = response.headers.get('content-length')
  return declared === null ? undefined : Number(declared)
}
