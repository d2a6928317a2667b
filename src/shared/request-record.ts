/**
 * What one finished request was, handed once per request to whoever counts or logs requests
 * (the access log, metrics) after its answer is ready (docs/adr/0121-request-ids-and-the-access-log.md).
 */
export interface RequestRecord {
  /** The request method, upper case. */
  method: string
  /** The route template (`/v1/cards/:id/prices`), never the raw path or its query; `unmatched` when no route matched. */
  route: string
  /** The answer's status code. */
  status: number
  /** Milliseconds from the request entering everyRequest to its answer being ready (not the body fully sent). */
  durationMs: number
  /**
   * The body's length in bytes, when known without reading it: noted by the code that built the
   * body from bytes (withBodyLength: kept answers, snapshot and catalog bytes), declared as
   * Content-Length, or 0 for a HEAD, 204 or 304. Undefined for a streamed answer of unknown
   * length (exports) and a body Elysia serialises from an object or a string.
   */
  bytes: number | undefined
  /** The account a key or session identified, if any. */
  accountId: number | undefined
  /** The tier of that account, if any. */
  tier: string | undefined
  /** The request id echoed as `X-Request-Id`. */
  requestId: string
}

/** Called once per request after its answer is ready. */
export type RequestDone = (record: RequestRecord) => void
