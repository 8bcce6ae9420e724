# syntax=docker/dockerfile:1
# ruvllm-serve in a small image: a static binary (the kernels are Go
# assembly, chosen at run time by the CPU's features; no cgo) on distroless,
# run as a non-root user, with models in a volume at /models.
#   docker build -t ruvllm-serve .
#   docker run -p 8080:8080 -v ruvllm-models:/models ruvllm-serve
#   docker run -p 8080:8080 -v ruvllm-models:/models ruvllm-serve --model /models/x.gguf
# Without --model the server pulls its default model into /models/cache on
# first use; `ruvllm-serve pull --hf ...` fetches another ahead of time.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/ruvllm-serve ./cmd/ruvllm-serve \
    && mkdir -p /out/models/cache

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ruvllm-serve /usr/local/bin/ruvllm-serve
# The volume's mount point, owned by the image's user (65532) so that a
# new named volume starts out writable by it.
COPY --from=build --chown=65532:65532 /out/models /models
ENV RUVLLM_CACHE=/models/cache
# Serve's host and port come from the environment, not from arguments, so
# that `docker run IMAGE --model /models/x.gguf` (arguments that replace
# CMD) still listens on every interface of the container.
ENV RUVLLM_HOST=0.0.0.0 RUVLLM_PORT=8080
VOLUME ["/models"]
USER 65532:65532
EXPOSE 8080
# Loading a large model takes a while: /health answers 503 until the first
# model is served.
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \
    CMD ["/usr/local/bin/ruvllm-serve", "health", "--url", "http://127.0.0.1:8080/health"]
ENTRYPOINT ["/usr/local/bin/ruvllm-serve"]
CMD ["serve"]
