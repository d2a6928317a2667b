# syntax=docker/dockerfile:1
# The production image: npm installs the lockfile's production tree on a Node.js LTS, and the image
# runs that tree's own Bun on a plain Debian, without Node.js or npm
# (docs/adr/0123-the-production-image-and-two-nodes-behind-a-load-balancer.md).

FROM node:24-bookworm-slim AS install
WORKDIR /app
COPY package.json package-lock.json ./
# The lockfile decides every version, Bun's included; swagger-ui-dist's install script reports to
# a third party unless told not to.
RUN SCARF_ANALYTICS=false npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM debian:bookworm-slim
# tini is PID 1: it passes SIGTERM on to Bun, which as PID 1 would ignore it until its own handler
# is installed (after migrations, the first catalog load and the first snapshot). The user's uid is
# the former image's `node` user's, so /data volumes it wrote stay writable.
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/* \
  && useradd --uid 1000 --user-group --home-dir /app --no-create-home --shell /usr/sbin/nologin tcg \
  && mkdir /data \
  && chown tcg:tcg /data
WORKDIR /app
# Owned by root: the service cannot change its own code or dependencies.
COPY --from=install /app/node_modules ./node_modules
COPY package.json package-lock.json ./
COPY drizzle ./drizzle
COPY src ./src
ENV NODE_ENV=production \
  PATH=/app/node_modules/.bin:$PATH \
  PORT=3000 \
  HOST=0.0.0.0 \
  DATA_DIR=/data \
  METRICS_HOST=0.0.0.0
# Embedded mode keeps its database here; set DATABASE_URL (and REDIS_URL) to use real services.
VOLUME /data
# 9464: the metrics' own listener, for a scraper on the container network; never publish it to the public.
EXPOSE 3000 9464
USER tcg
# Ready, not merely alive: /ready answers 200 once the catalog is loaded and the price snapshot is
# built. A first start loads the catalog before it listens (the demo: a minute; tcgcsv: minutes).
HEALTHCHECK --interval=10s --timeout=5s --start-period=300s --retries=3 \
  CMD ["bun", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/ready').then((r) => process.exit(r.status === 200 ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["bun", "src/index.ts"]
