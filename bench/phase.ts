import { readFileSync, writeFileSync } from 'node:fs'
import { machineCpuSeconds, postgresCpuSeconds, processCpuSeconds } from './database'

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

/** CPU seconds of a phase: this process, PostgreSQL, each named process, and everything else on the machine. */
export interface PhaseCpu {
  self: number
  postgres: number
  /** By name, e.g. `{ 'the mirror': … }`. */
  processes: Record<string, number>
  others: number
}

export interface Phase<T> {
  value: T
  seconds: number
  /** This process's peak RSS during the phase. */
  peakMb: number
  cpu: PhaseCpu
}

/** Runs `run` as one measured phase of a bench, logging its wall time, peak RSS and CPU split on stderr. */
export async function measurePhase<T>(name: string, run: () => Promise<T>, processes: Record<string, number> = {}): Promise<Phase<T>> {
  const cpuNow = () => {
    const usage = process.cpuUsage()
    return {
      machine: machineCpuSeconds().busy,
      self: (usage.user + usage.system) / 1e6,
      postgres: postgresCpuSeconds(),
      processes: Object.fromEntries(Object.entries(processes).map(([label, pid]) => [label, processCpuSeconds(pid)])),
    }
  }
  resetPeak()
  const before = cpuNow()
  const started = performance.now()
  console.error(`${name}…`)
  const value = await run()
  const seconds = (performance.now() - started) / 1000
  const after = cpuNow()
  const peakMb = memoryMb('self', 'VmHWM')
  const self = after.self - before.self
  const postgres = after.postgres - before.postgres
  const named = Object.fromEntries(Object.keys(processes).map((label) => [label, after.processes[label]! - before.processes[label]!]))
  const namedTotal = Object.values(named).reduce((sum, n) => sum + n, 0)
  const cpu = { self, postgres, processes: named, others: Math.max(0, after.machine - before.machine - self - postgres - namedTotal) }
  console.error(`${name}: ${seconds.toFixed(1)} s, peak RSS ${peakMb.toFixed(0)} MB, ${describeCpu(cpu)}`)
  return { value, seconds, peakMb, cpu }
}

export const describeCpu = (cpu: PhaseCpu) =>
  [
    `CPU: this process ${cpu.self.toFixed(1)} s`,
    `PostgreSQL ${cpu.postgres.toFixed(1)} s`,
    ...Object.entries(cpu.processes).map(([label, seconds]) => `${label} ${seconds.toFixed(1)} s`),
    `other processes ${cpu.others.toFixed(1)} s`,
  ].join(', ')
