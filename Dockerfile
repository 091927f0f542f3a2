# syntax=docker/dockerfile:1
# Multi-stage build: compile in the Rust image, run in a slim Debian with git
# (agents' bash tools often run git) and CA certificates (HTTPS to providers).

FROM rust:1.95-slim-bookworm AS builder
WORKDIR /src
COPY . .
# The crate registry and the build folder are cache mounts: a source edit
# rebuilds only the workspace crates it touches, not the dependencies.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin agentfile \
    && cp target/release/agentfile /usr/local/bin/agentfile

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates git \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 1000 agent \
    && mkdir -p /workspace /data && chown agent:agent /workspace /data
COPY --from=builder /usr/local/bin/agentfile /usr/local/bin/agentfile
# Sessions (and the memory tools' table, which shares their database) live in
# the /data volume, not in the workspace: they outlive a workspace that is
# mounted fresh for each job, and a tool that fills the workspace's disk cannot
# also take the session log with it. Like every AGENTFILE_* variable it wins
# over agent.toml; `docker run -e AGENTFILE_SESSION_PATH=…` moves it.
ENV AGENTFILE_SESSION_PATH=/data/sessions.db
# The workspace the agent works in, and where sessions are kept.
VOLUME ["/workspace", "/data"]
WORKDIR /workspace
USER agent
ENTRYPOINT ["agentfile"]
CMD ["--help"]
