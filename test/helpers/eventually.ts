import { systemClock } from '../../src/shared/clock'

export interface EventuallyOptions {
  /** How long to keep asking, in ms of real time (default 10 s: generous for a loaded machine). */
  timeout?: number
  /** Pause between asks, in ms (default 20). */
  interval?: number
  /** What is awaited, for the failure message. */
  what?: string
}

/**
 * Asks `check` until it returns a value other than false, null or undefined without throwing, and
 * returns that value: the one way tests wait for something to become true (docs/testing.md).
 * On timeout it fails with the last error `check` threw, or says what was not reached.
 */
export async function eventually<T>(check: () => T | Promise<T>, options: EventuallyOptions = {}): Promise<Exclude<T, false | null | undefined>> {
  const { timeout = 10_000, interval = 20, what = 'the condition' } = options
  const deadline = systemClock.monotonic() + timeout
  let lastError: unknown
  for (;;) {
    try {
      const value = await check()
      if (value !== false && value !== null && value !== undefined) return value as Exclude<T, false | null | undefined>
      lastError = undefined
    } catch (error) {
      lastError = error
    }
    if (systemClock.monotonic() >= deadline) {
      if (lastError instanceof Error) {
        lastError.message = `${what} not reached within ${timeout} ms: ${lastError.message}`
        throw lastError
      }
      throw new Error(`${what} not reached within ${timeout} ms`)
    }
    await systemClock.sleep(interval)
  }
}
