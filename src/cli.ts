import { parseArgs } from 'node:util'
import { loadConfig } from './config'
import { createDeps } from './deps'
import { formatJobStatuses, jobStatuses } from './jobs/report'
import { MANUAL_SYNC_JOB } from './jobs/runs'
import { runSyncJob } from './jobs/sync-job'
import { createAccount, requireAccount, setTier } from './modules/auth/accounts'
import { publishAuthEvent } from './modules/auth/key-directory'
import { createKey } from './modules/auth/keys'
import { isTier, TIERS, type Tier } from './modules/auth/tiers'
import { claimCatalog } from './modules/ingest/catalog-source'
import { seedCatalog, syncCatalog } from './modules/ingest/seed'
import { isCatalogEmpty, wipeCatalog } from './modules/ingest/service'
import { createDemoSource } from './modules/ingest/sources/demo'
import { DEMO_SCALES, type DemoScale } from './modules/ingest/sources/demo-scales'
import { publishSnapshotChanged } from './modules/snapshot/store'
import { webhookAlertHook } from './modules/webhooks/alerts'
import { ConfigError } from './shared/errors'

const USAGE = `Usage: bun src/cli.ts <command> [options]

Commands:
  migrate                         apply pending database migrations
  seed [--scale S] [--fresh]      fill an empty catalog from MARKETPLACE_SOURCE (default the
                                  demo source: generated data of size S: ${DEMO_SCALES.join(' | ')};
                                  default DEMO_SCALE). --fresh first wipes catalog, prices,
                                  history and webhooks (accounts and keys are kept): the way to
                                  switch a filled catalog to another source
  sync [--game slug]...           sync today's prices for every game, or the named ones, now
                                  (recorded as a manual-sync run; nodes rebuild their snapshot
                                  and the changed prices go to alert evaluation). Refused on a
                                  catalog another source filled
  jobs                            list the scheduled jobs: schedule, next run (UTC and
                                  America/New_York) and last outcome
  account:create --email E --password P [--tier T]
                                  create an account (T: ${TIERS.join(' | ')}; default free)
  account:set-tier --email E --tier T
                                  change an account's tier (takes effect on every node)
  key:create --email E [--name N] create an API key for the account; the raw key is the
                                  last line printed (it is shown only once)

The database and other settings come from the environment (see docs/operations.md).`

const COMMANDS = ['migrate', 'seed', 'sync', 'jobs', 'account:create', 'account:set-tier', 'key:create']
const REQUIRED: Record<string, ('email' | 'password' | 'tier')[]> = {
  'account:create': ['email', 'password'],
  'account:set-tier': ['email', 'tier'],
  'key:create': ['email'],
}

async function main(argv: string[]) {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      scale: { type: 'string' },
      fresh: { type: 'boolean', default: false },
      game: { type: 'string', multiple: true },
      email: { type: 'string' },
      password: { type: 'string' },
      tier: { type: 'string' },
      name: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  })
  const command = positionals[0]
  if (values.help || !command) {
    console.log(USAGE)
    return command || values.help ? 0 : 2
  }
  if (!COMMANDS.includes(command)) {
    console.error(`Unknown command '${command}'.\n\n${USAGE}`)
    return 2
  }
  const tier = values.tier
  if (tier !== undefined && !isTier(tier)) {
    console.error(`--tier must be one of: ${TIERS.join(', ')}`)
    return 2
  }
  const missing = (REQUIRED[command] ?? []).filter((option) => values[option] === undefined)
  if (missing.length > 0) {
    console.error(`${command} needs ${missing.map((option) => `--${option}`).join(' and ')}.\n\n${USAGE}`)
    return 2
  }
  const scale = values.scale as DemoScale | undefined
  if (scale !== undefined && !DEMO_SCALES.includes(scale)) {
    console.error(`--scale must be one of: ${DEMO_SCALES.join(', ')}`)
    return 2
  }

  const config = loadConfig()
  if (scale !== undefined && config.marketplaceSource !== 'demo') {
    console.error(`--scale sizes the demo catalog, but MARKETPLACE_SOURCE is ${config.marketplaceSource}: drop --scale, or seed with MARKETPLACE_SOURCE=demo`)
    return 2
  }
  const deps = await createDeps(config, {}, { statementTimeout: false })
  try {
    await deps.database.migrate()
    if (command === 'seed') {
      const source = scale ? createDemoSource({ scale, now: () => deps.clock.now() }) : deps.source
      if (values.fresh) await wipeCatalog(deps.db)
      else if (!(await isCatalogEmpty(deps.db))) {
        // A catalog of another source is refused naming both; one of this source only needs a sync.
        await claimCatalog(deps.db, source.name, deps.clock.now())
        console.error('The catalog already has data: use `seed --fresh` to replace it, or `sync` to update it.')
        return 1
      }
      const summary = await seedCatalog({ ...deps, source })
      await publishSnapshotChanged(deps.redis, deps.logger)
      return summary.failed > 0 ? 1 : 0
    }
    if (command === 'sync') {
      const { summary } = await runSyncJob(
        // Alerts go to the outbox; the leading server's delivery worker sends them at its next poll.
        { ...deps, alertHook: webhookAlertHook(deps) },
        { job: MANUAL_SYNC_JOB, scheduledFor: deps.clock.now(), gameSlugs: values.game, sync: syncCatalog },
      )
      return summary.failed > 0 ? 1 : 0
    }
    if (command === 'jobs') {
      console.log(formatJobStatuses(await jobStatuses(deps.db, deps.clock.now())))
    }
    if (command === 'account:create') {
      const account = await createAccount(deps.db, { email: values.email!, password: values.password!, tier: tier as Tier | undefined })
      console.log(`account ${account.id} created: ${account.email} (${account.tier})`)
    }
    if (command === 'account:set-tier') {
      const account = await setTier(deps.db, values.email!, tier as Tier)
      await publishAuthEvent(deps.redis, { kind: 'account', accountId: account.id }, deps.logger)
      console.log(`account ${account.id} (${account.email}) is now on ${account.tier}`)
    }
    if (command === 'key:create') {
      const account = await requireAccount(deps.db, values.email!)
      const key = await createKey(deps.db, account, values.name ?? 'cli')
      console.log(`key ${key.publicId} (${key.keyPrefix}…) created for ${account.email}; it is shown only once:`)
      console.log(key.key)
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
