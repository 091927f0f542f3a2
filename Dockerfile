# syntax=docker/dockerfile:1
# Multi-stage build: compile in the Rust image, run in a slim Debian with git
# (agents' bash tools often run git) and CA certificates (HTTPS to providers).

FROM rust:1.95-slim-bookworm AS builder
WORKDIR /src
# Build dependencies first so source edits do not rebuild them.
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src/bin benches && echo 'fn main() {}' > src/main.rs \
    && echo 'fn main() {}' > src/bin/fake-provider.rs && touch src/lib.rs \
    && echo 'fn main() {}' > benches/parse.rs \
    && cargo build --release --locked --bin agentfile || true
COPY . .
RUN touch src/main.rs src/lib.rs && cargo build --release --locked --bin agentfile

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates git \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 1000 agent
COPY --from=builder /src/target/release/agentfile /usr/local/bin/agentfile
# The workspace the agent works in, and where sessions are kept.
VOLUME ["/workspace", "/data"]
WORKDIR /workspace
USER agent
ENTRYPOINT ["agentfile"]
CMD ["--help"]
