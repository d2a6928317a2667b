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
HEALTHCHECK --interval=15s --timeout=3s CMD node -e "fetch('http://127.0.0.1:3000/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
CMD ["node_modules/.bin/bun", "src/index.ts"]
