// Layer rules for src/ (docs/architecture.md "Modules"), checked by `npm run lint`. Paths are relative to the repository root.
// Tests (*.test.ts), test/ and bench/ may reach into any layer to set up a case, so only the cycle rule holds for them.
const TESTS = ['\\.test\\.ts$', '^test/', '^bench/']
// Files that may hold SQL: a module's repositories, its public SQL fragments, and the database layer itself.
const SQL_FILES = '(^|/)(repo|[^/]+-repo|queries)\\.ts$|^src/db/'

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Modules in a cycle load in an order that depends on who imports first; move what both need into a third file.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'shared-is-a-leaf',
      severity: 'error',
      comment: 'src/shared holds helpers every layer uses; it must not depend on the database, the modules or the jobs.',
      from: { path: '^src/shared/', pathNot: TESTS },
      to: { path: '^src/(db|modules|jobs)/' },
    },
    {
      name: 'db-below-modules',
      severity: 'error',
      comment: 'src/db is the storage layer the modules build on; it must not depend on them or on the jobs.',
      from: { path: '^src/db/', pathNot: TESTS },
      to: { path: '^src/(modules|jobs)/' },
    },
    {
      name: 'modules-below-app',
      severity: 'error',
      comment: 'Modules are composed by app.ts, index.ts and the jobs; depending on them back would invert the layering.',
      from: { path: '^src/modules/', pathNot: TESTS },
      to: { path: '^src/(jobs/|app\\.ts$|index\\.ts$|config\\.ts$|deps\\.ts$|cli\\.ts$)' },
    },
    {
      name: 'no-foreign-repo',
      severity: 'error',
      comment: "A module reads another module's tables through that module's service or its queries.ts, never through its repo.",
      from: { path: '^src/modules/([^/]+)/', pathNot: TESTS },
      to: { path: '^src/modules/.+/(repo|[^/]+-repo)\\.ts$', pathNot: '^src/modules/$1/' },
    },
    {
      name: 'sql-only-in-repos',
      severity: 'error',
      comment: 'SQL lives in repo.ts, *-repo.ts, queries.ts and src/db; elsewhere only types from the schema may be imported.',
      from: { pathNot: [SQL_FILES, ...TESTS] },
      to: { path: ['^node_modules/drizzle-orm/', '^src/db/schema(/|\\.ts$)'], dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'routes-without-storage',
      severity: 'error',
      comment: 'Route files translate HTTP to service calls; storage is reached through the service.',
      from: { path: '^src/modules/[^/]+/routes\\.ts$' },
      to: { path: ['^src/db/', '(^|/)(repo|[^/]+-repo|queries)\\.ts$'] },
    },
    {
      name: 'config-without-demo-source',
      severity: 'error',
      comment: 'Parsing the environment must not load the demo catalogue; the demo source is chosen in deps.ts.',
      from: { path: '^src/config\\.ts$' },
      to: { path: '^src/modules/ingest/sources/demo\\.ts$' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(drizzle|data)/' },
    // Type-only imports count as dependencies so the rules can see (and sql-only-in-repos can allow) them.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'], extensions: ['.ts', '.js', '.json'] },
    reporterOptions: { text: { highlightFocused: true } },
  },
}
