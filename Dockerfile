# licensor's container image: one static binary on distroless, as a non-root
# user, on a read-only root filesystem. docs/operations.md, "Running it in
# containers", says how to run it; compose.yaml runs the whole stack.
#
#   docker build -t licensor .
#   docker run --read-only --tmpfs /tmp -v licensor-data:/data -p 8080:8080 \
#     -e APP_KEY=base64:... -e APP_URL=https://licensor.example \
#     -e VENDOR_DRIVER=http -e VENDOR_URL=... -e VENDOR_TOKEN=... licensor
#
# The image runs with APP_ENV=production, which refuses to start without
# APP_KEY (base64:<32 random bytes>) and APP_URL (the public base URL, the
# tokens' issuer): generate the key once, keep it in a secret store, and
# give every replica the same of both. tests/deploy_test.go checks this
# file against config and the command list.

# The build stage: the same static build CI makes (.ci/run). Go 1.26.10 and
# later carry the standard-library fixes go.mod's toolchain line asks for.
FROM golang:1.26.11 AS build
WORKDIR /src
# The modules first, so that a change to the code does not fetch them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    GOTOOLCHAIN=local go mod download
COPY . .
# The image has no .git (.dockerignore), so the build cannot record the
# version: pass it, and `licensor version` in the image (and the vendor
# driver's User-Agent) says it instead of "devel":
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse HEAD) -t licensor .
ARG VERSION=
ARG COMMIT=
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    GOTOOLCHAIN=local CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/licensor-api/licensor/app/console.stampedVersion=${VERSION} -X github.com/licensor-api/licensor/app/console.stampedCommit=${COMMIT}" -o /licensor .
# The storage directory, owned by the runtime user: a named volume mounted on
# /data starts as a copy of it, owner and mode included.
RUN mkdir -p /out/data && chown 65532:65532 /out/data && chmod 0700 /out/data

# The runtime: no shell, no package manager, CA certificates for an https
# vendor, and the nonroot user (65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /licensor /licensor
COPY --from=build --chown=65532:65532 --chmod=0700 /out/data /data
# Listen on every interface inside the container; keep the SQLite file and a
# generated key (APP_ENV=local only) on the volume, since the root filesystem
# may be read-only. With DB_CONNECTION=mysql nothing is written there.
ENV APP_ENV=production \
    APP_ADDR=0.0.0.0:8080 \
    APP_STORAGE=/data
VOLUME ["/data"]
USER 65532:65532
EXPOSE 8080
# The binary is its own probe (no shell or curl here): GET /readyz on
# APP_ADDR, exit 0 on 2xx. Services that are not serve (migrate, vendor-sim)
# turn it off.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD ["/licensor", "healthcheck"]
ENTRYPOINT ["/licensor"]
CMD ["serve"]
