import { appReady, createApp, refreshAppSnapshot, stopApp } from './app'
import { type Config, loadConfig } from './config'
import { createDeps } from './deps'
import { createScheduler } from './jobs/scheduler'
import { createDemoAccountIfNone, DEMO_TIER, demoBanner, keyHint } from './modules/auth/demo-account'
import { prepareCatalog } from './modules/ingest/seed'
import { catchUpAlerts, webhookAlertHook } from './modules/webhooks/alerts'
import { createDeliveryWorker } from './modules/webhooks/delivery'
import { loadSecretBox } from './modules/webhooks/secret-box'
import type { WebhookSettings } from './modules/webhooks/settings'
import { ConfigError } from './shared/errors'
import { createLogger, type Logger } from './shared/logger'
import { createMetrics } from './shared/metrics'
import { serveMetrics } from './shared/metrics-listener'
import { type StopSignals, stopSignals } from './stop-signals'

async function main() {
  const config = loadConfig()
  const logger = createLogger(config.logLevel)
  // Before anything is opened: bun as PID 1 ignores a signal nobody handles, and a start may take minutes.
  const signals = stopSignals(logger)
  await start(config, logger, signals).catch((error) => {
    // A signal's stop closes what the start was using: what fails after it is that stop, not an error.
    if (!signals.stopping) throw error
  })
}

async function start(config: Readonly<Config>, logger: Logger, signals: StopSignals) {
  // A server's metrics include the process's own (CPU, memory, event loop lag); the CLI's do not.
  const deps = await createDeps(config, { logger, metrics: createMetrics({ process: true }) })
  signals.opened(() => deps.close())
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
  await deps.database.migrate({ onWait: () => deps.logger.info('another process is applying the migrations: waiting for it to finish') })
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
  signals.opened(() => stopApp(app))
  await appReady(app) // the first price snapshot, so the node is ready when it starts listening
  if (signals.stopping) return // its stop is closing what was opened, and exits
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
  // Its own port, never the API's: the public reaches it only if an operator opens it. A node
  // serves the API without it rather than not at all; the error and the scraper's failed target say so.
  let metricsListener: ReturnType<typeof serveMetrics> | undefined
  if (config.metricsPort !== 0) {
    try {
      metricsListener = serveMetrics(deps.metrics, { hostname: config.metricsHost, port: config.metricsPort, logger: deps.logger })
      deps.logger.info({ url: `http://${config.metricsHost}:${metricsListener.port}/metrics` }, 'metrics listening')
    } catch (error) {
      deps.logger.error({ err: error }, `metrics listener not started on ${config.metricsHost}:${config.metricsPort}: the node serves without metrics`)
    }
  }
  deps.logger.info({ url }, 'listening; API docs at /docs')
  // A scheduled sync would fill the catalog the start chose to leave empty.
  if (catalog !== 'left-empty') scheduler.start()
  worker.start()

  signals.serving(async (signal) => {
    deps.logger.info({ signal }, 'shutting down')
    await scheduler.stop()
    // Its attempts in flight finish (each within its timeout); one cut short is retried by the next leader.
    await worker.stop()
    await stopApp(app)
    await metricsListener?.stop()
    await deps.close()
    process.exit(0)
  })
}

main().catch((error) => {
  if (error instanceof ConfigError || error?.name === 'DataDirLockedError') console.error(error.message)
  else console.error(error)
  process.exit(1)
})
