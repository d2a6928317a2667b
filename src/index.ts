import { appReady, createApp, refreshAppSnapshot, stopApp } from './app'
import { loadConfig } from './config'
import { createDeps } from './deps'
import { createScheduler } from './jobs/scheduler'
import { createDemoAccountIfNone, DEMO_TIER, demoBanner, keyHint } from './modules/auth/demo-account'
import { prepareCatalog } from './modules/ingest/seed'
import { catchUpAlerts, webhookAlertHook } from './modules/webhooks/alerts'
import { createDeliveryWorker } from './modules/webhooks/delivery'
import { loadSecretBox } from './modules/webhooks/secret-box'
import type { WebhookSettings } from './modules/webhooks/settings'
import { ConfigError } from './shared/errors'

async function main() {
  const config = loadConfig()
  const deps = await createDeps(config)
  const created = deps.database.created
  if (created) {
    const peakRssMb = Math.round(created.peakRssBytes / 2 ** 20)
    deps.logger.info({ peak_rss_mb: peakRssMb, ms: Math.round(created.ms) }, `created the embedded database in a child process (its peak RSS ${peakRssMb} MB)`)
  }
  // Before anything is written: a key file that cannot be read would leave every webhook unusable.
  const secrets = await loadSecretBox(config, deps.logger).catch(async (error: Error) => {
    await deps.close()
    throw new ConfigError(`cannot start: ${error.message}`)
  })
  const webhooks: WebhookSettings = { secrets, targets: { allowPrivateTargets: config.webhookAllowPrivateTargets } }
  await deps.database.migrate()
  // A catalog of another source is refused (a ConfigError: printed without a stack), the database closed first.
  const catalog = await prepareCatalog(deps, { demoData: config.demoData }).catch(async (error: Error) => {
    await deps.close()
    throw error
  })
  // Built before the app (its /ready says whether this node leads), started after listen: tests
  // build the app in-process and must never run jobs.
  const scheduler = createScheduler(deps, {
    refreshSnapshot: () => refreshAppSnapshot(app),
    // Alerts written by a sync go out at once, not at the worker's next poll.
    alertHook: webhookAlertHook(deps, { onAlerts: () => worker.wake() }),
    // A new leader first fires the crossings a leader that died after a sync's commit left unevaluated.
    onLead: () => catchUpAlerts(deps, { onAlerts: () => worker.wake() }),
  })
  // Delivers only while this node leads, like the scheduled jobs.
  const worker = createDeliveryWorker(deps, { settings: webhooks, isLeader: scheduler.isLeader })
  const app = createApp({ ...deps, isLeader: scheduler.isLeader, webhooks })
  await appReady(app) // the first price snapshot, so the node is ready when it starts listening
  app.listen({ port: config.port, hostname: config.host })
  const url = `http://${config.host === '0.0.0.0' ? 'localhost' : config.host}:${app.server?.port}`
  // Embedded mode only: the CLI cannot reach a locked data directory while this runs. Done after
  // listen so a start that fails to bind never creates credentials nobody saw.
  if (!config.databaseUrl) {
    const demo = await createDemoAccountIfNone(deps.db)
    if (demo.created) {
      // The console, not the logger: the secrets appear once, on screen, and in no structured log.
      console.log(demoBanner(demo.created, url))
      deps.logger.info(
        { email: demo.created.email, tier: DEMO_TIER, keyPrefix: demo.created.keyPrefix },
        'created the DEMO-ONLY account and API key; the key and password were printed above, once',
      )
    } else {
      deps.logger.info(keyHint(url, demo.demoAccount))
    }
  }
  deps.logger.info({ url }, 'listening; API docs at /docs')
  // A scheduled sync would fill the catalog the start chose to leave empty.
  if (catalog !== 'left-empty') scheduler.start()
  worker.start()

  let stopping = false
  const shutdown = async (signal: string) => {
    if (stopping) return
    stopping = true
    deps.logger.info({ signal }, 'shutting down')
    await scheduler.stop()
    // Its attempts in flight finish (each within its timeout); one cut short is retried by the next leader.
    await worker.stop()
    await stopApp(app)
    await deps.close()
    process.exit(0)
  }
  process.on('SIGINT', () => void shutdown('SIGINT'))
  process.on('SIGTERM', () => void shutdown('SIGTERM'))
}

main().catch((error) => {
  if (error instanceof ConfigError || error?.name === 'DataDirLockedError') console.error(error.message)
  else console.error(error)
  process.exit(1)
})
