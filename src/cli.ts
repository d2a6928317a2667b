import { parseArgs } from 'node:util'
import { ConfigError, loadConfig } from './config'
import { createDeps } from './deps'
import { seedCatalog, syncCatalog } from './modules/ingest/seed'
import { isCatalogEmpty, wipeCatalog } from './modules/ingest/service'
import { createDemoSource, DEMO_SCALES, type DemoScale } from './modules/ingest/sources/demo'

const USAGE = `Usage: bun src/cli.ts <command> [options]

Commands:
  migrate                         apply pending database migrations
  seed [--scale S] [--fresh]      fill an empty catalog with generated demo data
                                  (S: ${DEMO_SCALES.join(' | ')}; default DEMO_SCALE).
                                  --fresh first wipes catalog, prices, history and webhooks
                                  (accounts and keys are kept)
  sync [--game slug]...           sync today's prices for every game, or the named ones

The database and other settings come from the environment (see README).`

async function main(argv: string[]) {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      scale: { type: 'string' },
      fresh: { type: 'boolean', default: false },
      game: { type: 'string', multiple: true },
      help: { type: 'boolean', short: 'h', default: false },
    },
  })
  const command = positionals[0]
  if (values.help || !command) {
    console.log(USAGE)
    return command || values.help ? 0 : 2
  }
  if (!['migrate', 'seed', 'sync'].includes(command)) {
    console.error(`Unknown command '${command}'.\n\n${USAGE}`)
    return 2
  }
  const scale = values.scale as DemoScale | undefined
  if (scale !== undefined && !DEMO_SCALES.includes(scale)) {
    console.error(`--scale must be one of: ${DEMO_SCALES.join(', ')}`)
    return 2
  }

  const config = loadConfig()
  const deps = await createDeps(config)
  try {
    await deps.database.migrate()
    if (command === 'seed') {
      const source = scale ? createDemoSource({ scale, now: () => deps.clock.now() }) : deps.source
      if (values.fresh) await wipeCatalog(deps.db)
      else if (!(await isCatalogEmpty(deps.db))) {
        console.error('The catalog already has data: use `seed --fresh` to replace it, or `sync` to update it.')
        return 1
      }
      const summary = await seedCatalog({ ...deps, source })
      return summary.failed > 0 ? 1 : 0
    }
    if (command === 'sync') {
      const summary = await syncCatalog(deps, { gameSlugs: values.game })
      return summary.failed > 0 ? 1 : 0
    }
    return 0
  } finally {
    await deps.close()
  }
}

main(process.argv.slice(2))
  .then((code) => process.exit(code))
  .catch((error) => {
    console.error(error instanceof ConfigError || error?.name === 'DataDirLockedError' || error?.name === 'AppError' ? error.message : error)
    process.exit(1)
  })
