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

FROM debian:bookworm-slim AS runtime
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

# `docker build --target daemon -t agentfile-daemon .`: the same image whose
# default command is the daemon (workflows under /workspace, sessions and
# fire records in /data). `docker run IMAGE daemon` does the same with the
# default image. SIGTERM (what `docker stop` sends) stops taking fires, leaves
# runs resumable and exits 143; the grace period must cover that (5 s).
# Webhooks listen only where agent.toml's `[daemon] webhooks` says (use
# "0.0.0.0:8787" in a container); 8787 is the documented port.
FROM runtime AS daemon
EXPOSE 8787
STOPSIGNAL SIGTERM
CMD ["daemon", "--workspace", "/workspace"]

# The default target (the last stage): `agentfile --help`, as before.
FROM runtime
