# Runs the API with Bun from the npm package, as on any machine with only Node.js and npm.
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund && npm cache clean --force
COPY . .
ENV NODE_ENV=production PORT=3000 HOST=0.0.0.0 DATA_DIR=/data
# Embedded mode keeps its database here; set DATABASE_URL (and REDIS_URL) to use real services.
RUN mkdir -p /data && chown node:node /data
VOLUME /data
EXPOSE 3000
USER node
# The first start seeds the demo catalog before it listens (up to about a minute): not unhealthy meanwhile.
HEALTHCHECK --interval=15s --timeout=3s --start-period=120s CMD node -e "fetch('http://127.0.0.1:'+process.env.PORT+'/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
CMD ["node_modules/.bin/bun", "src/index.ts"]
