/**
 * The layer check dependency-cruiser cannot express: no cycle between modules (a folder under
 * src/modules, or src/shared, src/db, src/jobs), counting type-only imports, whatever files the
 * cycle runs through (docs/architecture.md "Modules"). Tests are left out: they may reach anywhere.
 * Run by `npm run lint`; exits 1 and names one import per edge of each cycle.
 */
import { createRequire } from 'node:module'
import { cruise, type ICruiseOptions, type ICruiseResult } from 'dependency-cruiser'

// The layer rules' own resolution options, so both checks see the same graph.
const { options } = createRequire(import.meta.url)('../.dependency-cruiser.cjs') as { options: ICruiseOptions }

/** The module a source file belongs to, or undefined outside src/ (and for tests). */
export function moduleOf(path: string): string | undefined {
  if (path.endsWith('.test.ts')) return undefined
  return path.match(/^src\/modules\/([^/]+)\//)?.[1] ?? path.match(/^src\/([^/]+)\//)?.[1] ?? (path.startsWith('src/') ? path : undefined)
}

/** Strongly connected sets of more than one module (Tarjan), each with an example import per edge. */
export function moduleCycles(edges: Map<string, Map<string, string>>): string[][] {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const cycles: string[][] = []
  const visit = (node: string) => {
    index.set(node, index.size)
    low.set(node, index.get(node)!)
    stack.push(node)
    for (const next of edges.get(node)?.keys() ?? []) {
      if (!index.has(next)) {
        visit(next)
        low.set(node, Math.min(low.get(node)!, low.get(next)!))
      } else if (stack.includes(next)) low.set(node, Math.min(low.get(node)!, index.get(next)!))
    }
    if (low.get(node) !== index.get(node)) return
    const members: string[] = []
    for (let member = stack.pop(); member !== undefined; member = member === node ? undefined : stack.pop()) members.push(member)
    if (members.length > 1) cycles.push(members)
  }
  for (const node of edges.keys()) if (!index.has(node)) visit(node)
  return cycles
}

if (import.meta.main) {
  const output = (await cruise(['src'], options)).output as ICruiseResult
  const edges = new Map<string, Map<string, string>>()
  for (const file of output.modules) {
    const from = moduleOf(file.source)
    if (!from) continue
    for (const dependency of file.dependencies) {
      const to = moduleOf(dependency.resolved)
      if (!to || to === from) continue
      if (!edges.has(from)) edges.set(from, new Map())
      if (!edges.get(from)!.has(to)) edges.get(from)!.set(to, `${file.source} → ${dependency.resolved}`)
    }
  }
  const cycles = moduleCycles(edges)
  for (const members of cycles) {
    console.error(`module cycle: ${members.join(', ')}`)
    for (const from of members) for (const [to, example] of edges.get(from) ?? []) if (members.includes(to)) console.error(`  ${from} → ${to}: ${example}`)
  }
  if (cycles.length > 0) process.exit(1)
  console.log(`no module cycles (${edges.size} modules)`)
}
