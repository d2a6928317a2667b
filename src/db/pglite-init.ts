/**
 * Creates an empty PGlite cluster in the directory given as the only argument, then exits. Run by
 * `openPglite` as a short-lived child process (docs/adr/0018-embedded-lock.md covers the directory's
 * lock, which the parent holds): PGlite's initdb keeps three WebAssembly instances alive at once and
 * leaves about 400 MB behind in the process that ran it, which a server would carry for its lifetime
 * (docs/adr/0117-the-embedded-database-is-created-in-a-child-process.md).
 *
 *   bun src/db/pglite-init.ts <directory>
 */
import { PGlite } from '@electric-sql/pglite'

/**
 * Start parameters that bound initdb's peak (about 750 MB instead of 1 GB): 16 MB of shared buffers
 * for the instances initdb runs, and 1 MB WAL segments, a property of the new cluster (WAL files
 * are written in whole segments, and initdb holds them in memory before they reach the directory).
 */
const INIT_START_PARAMS = ['-c', 'shared_buffers=16MB']
const INITDB_PARAMS = ['--wal-segsize=1']

const directory = process.argv[2]
if (!directory) {
  console.error('usage: bun src/db/pglite-init.ts <directory>')
  process.exit(2)
}
try {
  const pg = await PGlite.create({ dataDir: directory, startParams: [...PGlite.defaultStartParams, ...INIT_START_PARAMS], initDbStartParams: INITDB_PARAMS })
  await pg.close()
} catch (error) {
  // PGlite's WebAssembly aborts with "Aborted()" whatever went wrong, a failed write included.
  console.error(
    `initdb failed in ${directory}: ${error instanceof Error ? error.message : String(error)} ` +
      '(PGlite does not name the cause: a failed write, on a full or read-only disk or past a file size limit, or too little memory)',
  )
  process.exit(1)
}
process.exit(0)
