import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join, posix } from 'node:path'
import { ROOT } from './process'

/** One Dockerfile instruction: its stage's index, its keyword (upper case) and the rest of its line. */
export interface Instruction {
  stage: number
  keyword: string
  args: string
}

/** The Dockerfile's instructions, continuation lines joined and comments (the syntax line too) left out. */
export function readDockerfile(path = join(ROOT, 'Dockerfile')): Instruction[] {
  const instructions: Instruction[] = []
  let stage = -1
  let pending = ''
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (/^\s*#/.test(line)) continue
    pending += line.replace(/\\\s*$/, ' ')
    if (/\\\s*$/.test(line)) continue
    const text = pending.trim()
    pending = ''
    if (!text) continue
    const [, keyword = '', args = ''] = /^(\S+)\s*(.*)$/.exec(text)!
    if (keyword.toUpperCase() === 'FROM') stage++
    instructions.push({ stage, keyword: keyword.toUpperCase(), args: args.trim() })
  }
  return instructions
}

/** The instructions of the last stage: what the image is. */
export function finalStage(instructions: Instruction[]): Instruction[] {
  const last = Math.max(...instructions.map((instruction) => instruction.stage))
  return instructions.filter((instruction) => instruction.stage === last)
}

/** An exec-form argument (`["bun", "src/index.ts"]`), or undefined for the shell form. */
export function execForm(args: string): string[] | undefined {
  return args.startsWith('[') ? (JSON.parse(args) as string[]) : undefined
}

/** The variables an `ENV` sets, in its `NAME=value` form (several per line). */
export function envOf(args: string): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [, name, value] of args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S*)/g)) env[name!] = value!.replace(/^"|"$/g, '')
  return env
}

/**
 * Whether `.dockerignore` keeps `path` (relative, with `/`) out of the build context, as Docker
 * decides: the last pattern matching the path or one of its parent directories wins, `!` re-admits.
 */
export function dockerIgnore(path = join(ROOT, '.dockerignore')): (file: string) => boolean {
  const rules = readFileSync(path, 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => {
      const negated = line.startsWith('!')
      const pattern = posix.normalize(line.slice(negated ? 1 : 0).replace(/^\/+/, ''))
      return { negated, glob: new Bun.Glob(pattern) }
    })
  return (file) => {
    const parts = file.split('/')
    const candidates = parts.map((_, index) => parts.slice(0, index + 1).join('/'))
    let ignored = false
    for (const rule of rules) if (candidates.some((candidate) => rule.glob.match(candidate))) ignored = !rule.negated
    return ignored
  }
}

/** Every file under `path` (relative to the root), itself if it is a file. */
function filesUnder(root: string, path: string): string[] {
  if (!statSync(join(root, path)).isDirectory()) return [path]
  return readdirSync(join(root, path)).flatMap((name) => filesUnder(root, posix.join(path, name)))
}

/** A file the image copies from the build context: where it is in the repository and in the image's WORKDIR. */
export interface CopiedFile {
  source: string
  target: string
}

/**
 * The files the final stage copies from the build context (not from another stage), each with its
 * place under WORKDIR, minus what `.dockerignore` keeps out of the context.
 */
export function imageFiles(instructions = readDockerfile(), root = ROOT): CopiedFile[] {
  const ignored = dockerIgnore(join(root, '.dockerignore'))
  const copied: CopiedFile[] = []
  for (const { keyword, args } of finalStage(instructions)) {
    if (keyword !== 'COPY' || /--from=/.test(args)) continue
    const words = args.split(/\s+/).filter((word) => !word.startsWith('--'))
    const target = words.pop()!
    for (const source of words) {
      if (!existsSync(join(root, source))) throw new Error(`the Dockerfile copies ${source}, which does not exist`)
      const directory = statSync(join(root, source)).isDirectory()
      for (const file of filesUnder(root, posix.normalize(source))) {
        if (ignored(file)) continue
        const inside = directory ? posix.relative(posix.normalize(source), file) : posix.basename(file)
        copied.push({ source: file, target: posix.normalize(posix.join(target, inside)) })
      }
    }
  }
  return copied
}
