# One image with every binary: store_master, store_service (sidecar / store pods) and
# store-operator. Build: docker build -t ghcr.io/kvcache-store/store:2.0.0 .
# Stage 1 compiles the C++ addon (node-gyp needs python3, make, g++: all in the full node image)
# and the TypeScript; stage 2 is the slim runtime with production dependencies only.

FROM node:20-bookworm AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY native/binding.gyp native/
COPY native/src native/src
# `npm ci` runs the install script, which builds native/build/Release/*.node.
RUN npm ci
COPY . .
RUN npm run build \
 && npm prune --omit=dev \
 && rm -rf native/build/Release/obj.target native/build/Release/.deps

FROM node:20-bookworm-slim
# openssl: the operator makes the webhook's self-signed CA and certificate with it.
RUN apt-get update \
 && apt-get install -y --no-install-recommends openssl ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules node_modules
COPY --from=build /app/dist dist
COPY --from=build /app/native/build/Release native/build/Release
COPY --from=build /app/proto proto
COPY --from=build /app/crds crds
RUN chmod +x dist/master/main.js dist/sidecar/main.js dist/operator/main.js \
 && ln -s /app/dist/master/main.js /usr/local/bin/store_master \
 && ln -s /app/dist/sidecar/main.js /usr/local/bin/store_service \
 && ln -s /app/dist/operator/main.js /usr/local/bin/store-operator
# The node image's unprivileged user (uid 1000), as the rendered pods' runAsUser expects.
USER 1000
EXPOSE 50051 50052 8080 9003 9443
ENTRYPOINT []
CMD ["store-operator", "run"]
