import { readFileSync, writeFileSync } from 'node:fs'

/** A process's resident memory in MB from /proc: now (VmRSS) or its peak since the last reset (VmHWM). */
export function memoryMb(pid: number | 'self', field: 'VmHWM' | 'VmRSS'): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return match ? Number(match[1]) / 1024 : Number.NaN
}

/** Starts a phase's peak: the kernel resets VmHWM to the current RSS on "5" (Linux ≥ 4.0). */
export function resetPeak(): void {
  Bun.gc(true)
  try {
    writeFileSync('/proc/self/clear_refs', '5')
  } catch {
    // Without it the peak is the process's so far, which only overstates the phase's.
  }
}
