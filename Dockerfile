# Beacon: build with the dev toolchain, run on a slim image as a non-root user.
FROM node:20-bookworm AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY actors ./actors
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    BEACON_HOST=0.0.0.0 \
    BEACON_PORT=8080 \
    BEACON_DATA_DIR=/data
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8080
# node is PID 1's child-free process here: it receives SIGTERM directly and shuts down gracefully
# (stop accepting, finish in-flight writes, flush and close LMDB).
STOPSIGNAL SIGTERM
CMD ["node", "dist/src/main.js"]
