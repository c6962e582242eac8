# Beacon: build with the dev toolchain, run on a slim image as a non-root user. Node 24 on Debian 13:
# the uWebSockets.js binary for Node 24 needs glibc 2.38 or newer (docs/operations.md).
FROM node:24-trixie AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY actors ./actors
# The build also bundles the panel (src/panel, with its own tsconfig) into dist/web with esbuild, a dev
# dependency: it runs before the prune, and the runtime image serves dist/web as built.
RUN npm run build && npm prune --omit=dev

FROM node:24-trixie-slim
ENV NODE_ENV=production \
    BEACON_HOST=0.0.0.0 \
    BEACON_PORT=8080 \
    BEACON_DATA_DIR=/data
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# `beacon` on the PATH: docker exec <container> beacon admin-key, beacon backup --out /data/backup-1, …
RUN mkdir -p /data && chown node:node /data && ln -s /app/dist/src/cli.js /usr/local/bin/beacon
USER node
VOLUME ["/data"]
EXPOSE 8080
# node is PID 1's child-free process here: it receives SIGTERM directly and shuts down gracefully
# (stop accepting, finish in-flight writes, flush and close LMDB).
STOPSIGNAL SIGTERM
# Ready: LMDB open, NATS connected when configured, not draining (GET /readyz). The slim image has no
# curl: node's fetch does it.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.BEACON_PORT||8080)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "dist/src/main.js"]
