// An MCP session with `agentfile mcp`, driven by the official TypeScript SDK
// (`@modelcontextprotocol/client` 2.x) and its tasks extension client
// (`@modelcontextprotocol/ext-tasks`). Run by tests/e2e/mcp_typescript.rs, which
// starts a fake model and a workspace first:
//
//   node client.mjs --modules DIR --binary target/debug/agentfile --workspace WS \
//     --key-var NAME --key VALUE --scenario approval|cancel|kill
//
// DIR holds node_modules with both packages (scripts/test.sh installs them
// under target/mcp-ts). Each scenario runs over stdio (the SDK's
// StdioClientTransport spawns `agentfile mcp`) and then over Streamable HTTP
// (`agentfile mcp --http 127.0.0.1:0`, started here):
//
// - approval: `gated.agent` (a supervised goal) as a task: the approval is an
//   input request answered through the session's `onInputRequest`; then the
//   same run as a blocking `callTool`, its approval answered by the
//   `elicitation/create` handler (2026-07-28 input_required rounds).
// - cancel: `two.agent` as a task, cancelled once the Rust test says its
//   second goal is being asked (a `WAIT <text>` line on stderr, answered
//   `go` on stdin).
// - kill: `two.agent` as a task; at the same point the server is SIGKILLed,
//   started again, and a new session follows the same task id.
//
// Prints one JSON object summarising what happened; the Rust test asserts on it.

import { spawn } from "node:child_process";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const args = Object.fromEntries(
  process.argv
    .slice(2)
    .reduce((pairs, a, i, all) => (a.startsWith("--") ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []),
);
const mod = (p) => import(pathToFileURL(`${args.modules}/node_modules/@modelcontextprotocol/${p}`).href);
const sdk = await mod("client/dist/index.mjs");
const { StdioClientTransport } = await mod("client/dist/stdio.mjs");
const tasks = await mod("ext-tasks/dist/client/index.js");

const VERSION = "2026-07-28";
const CLIENT_INFO = { name: "agentfile-ts-test", version: "1" };
const CAPABILITIES = { elicitation: { form: {} } };
const env = { ...process.env, [args["key-var"]]: args.key };
const serverArgs = ["mcp", "--workspace", args.workspace, "--heartbeat-ms", "300"];

const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();

/** Ask the Rust test to say when the fake model has been asked a request
 * holding `marker` (the run is then mid-way), and wait for its answer. */
async function waitForModel(marker) {
  process.stderr.write(`WAIT ${marker}\n`);
  const { value } = await lines.next();
  if ((value ?? "").trim() !== "go") throw new Error(`no go for ${marker}`);
}

/** A raw request path on `transport` for the tasks client (the SDK's own
 * codecs reject `resultType: "task"`): string ids of its own, their replies
 * taken off the transport before the SDK sees them. */
function rawDispatch(transport) {
  const pending = new Map();
  let n = 0;
  const sdkOnMessage = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if (typeof message?.id === "string" && pending.has(message.id) && !("method" in message)) {
      const resolve = pending.get(message.id);
      pending.delete(message.id);
      resolve("error" in message ? { kind: "error", error: message.error } : { kind: "result", result: message.result });
      return;
    }
    sdkOnMessage?.(message, extra);
  };
  return async (request) => {
    const id = `raw-${++n}`;
    const reply = new Promise((resolve) => pending.set(id, resolve));
    await transport.send({ ...request, jsonrpc: "2.0", id });
    return reply;
  };
}

/** A connected client on `server` (stdio parameters or an HTTP URL), and
 * a task session on it that answers approvals and logs them to `log`. */
async function connect(server, log, onElicit) {
  const transport =
    typeof server === "string"
      ? new sdk.StreamableHTTPClientTransport(new URL(server))
      : new StdioClientTransport(server);
  const client = new sdk.Client(CLIENT_INFO, {
    capabilities: CAPABILITIES,
    versionNegotiation: { mode: { pin: VERSION } },
  });
  if (onElicit) client.setRequestHandler("elicitation/create", onElicit);
  await client.connect(transport);
  const session = tasks.createTaskSessionFromClient(client, {
    endpointId: "agentfile",
    rawDispatch: rawDispatch(transport),
    v2RequestFraming: { protocolVersion: VERSION, clientInfo: CLIENT_INFO, clientCapabilities: CAPABILITIES },
    onInputRequest: async (request, context) => {
      (log.input_requests ??= []).push({
        kind: request.kind,
        message: request.params?.message,
        task_id: context.taskId,
        delivery: context.delivery,
      });
      return { action: "accept", content: { approve: true } };
    },
  });
  const close = async () => {
    await session.close().catch(() => {});
    await client.close().catch(() => {});
  };
  return { client, transport, session, close, era: client.getProtocolEra() };
}

/** Statuses seen while settling `execution`, and its outcome. */
async function settle(execution) {
  const statuses = [];
  const { outcome } = await execution.settle({
    onEvent: (e) => {
      const s = e.type === "task" ? e.task.status : e.outcome.status;
      if (statuses.at(-1) !== s) statuses.push(s);
    },
  });
  return { statuses, status: outcome.status, result: outcome.result ?? null };
}

async function approval(server) {
  const log = {};
  const c = await connect(server, log);
  const execution = await c.session.callTool("run", { path: "gated.agent" }, { task: { preference: "require" } });
  log.kind = execution.kind;
  log.task_id = execution.handle?.taskId;
  log.era = c.era;
  log.task = await settle(execution);
  await c.close();
  // The same run as a blocking call: its approval through elicitation.
  const elicitations = [];
  const client = new sdk.Client(CLIENT_INFO, {
    capabilities: CAPABILITIES,
    versionNegotiation: { mode: { pin: VERSION } },
  });
  client.setRequestHandler("elicitation/create", async (request) => {
    elicitations.push(request.params.message);
    return { action: "accept", content: { approve: true } };
  });
  await client.connect(
    typeof server === "string" ? new sdk.StreamableHTTPClientTransport(new URL(server)) : new StdioClientTransport(server),
  );
  const blocking = await client.callTool({ name: "run", arguments: { path: "gated.agent" } });
  await client.close();
  return { ...log, blocking: { is_error: blocking.isError ?? false, structured: blocking.structuredContent }, blocking_elicitations: elicitations };
}

async function cancel(server, who) {
  const log = {};
  const c = await connect(server, log);
  const execution = await c.session.callTool("run", { path: "two.agent", inputs: { who } }, { task: { preference: "require" } });
  log.kind = execution.kind;
  log.task_id = execution.handle?.taskId;
  await waitForModel(`second part for ${who}`);
  await execution.cancel();
  log.task = await settle(execution);
  log.get = (await c.session.task(log.task_id).snapshot()).status;
  await c.close();
  return log;
}

async function kill(server, who, killServer, restart) {
  const log = {};
  const c = await connect(server, log);
  const execution = await c.session.callTool("run", { path: "two.agent", inputs: { who } }, { task: { preference: "require" } });
  log.kind = execution.kind;
  log.task_id = execution.handle?.taskId;
  await waitForModel(`second part for ${who}`);
  await killServer(c);
  await execution.detach().catch(() => {});
  await c.close();
  const again = await connect(await restart(), {});
  const task = again.session.task(log.task_id);
  log.after_restart = (await task.snapshot()).status;
  const statuses = [log.after_restart];
  for (let i = 0; i < 600; i++) {
    const s = (await task.snapshot()).status;
    if (statuses.at(-1) !== s) statuses.push(s);
    if (["completed", "failed", "cancelled"].includes(s)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const outcome = await task.result();
  log.task = { statuses, status: outcome.status, result: outcome.result ?? null };
  await again.close();
  return log;
}

/** `agentfile mcp --http` on a free loopback port. */
class HttpServer {
  async start() {
    this.child = spawn(args.binary, [...serverArgs, "--http", "127.0.0.1:0"], {
      cwd: args.workspace,
      env,
      stdio: ["ignore", "ignore", "pipe"],
    });
    const err = readline.createInterface({ input: this.child.stderr });
    for await (const line of err) {
      if (line.startsWith("agentfile mcp: listening on ")) {
        // Keep draining its stderr.
        err.on("line", () => {});
        return line.slice("agentfile mcp: listening on ".length).trim();
      }
    }
    throw new Error("agentfile mcp --http did not say where it listens");
  }
  async kill() {
    const exited = new Promise((r) => this.child.once("exit", r));
    this.child.kill("SIGKILL");
    await exited;
  }
  async stop() {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) await this.kill();
  }
}

async function both(run) {
  const stdio = { command: args.binary, args: serverArgs, env, cwd: args.workspace, stderr: "inherit" };
  const out = { stdio: await run(stdio, "stdio", null) };
  const http = new HttpServer();
  try {
    out.http = await run(await http.start(), "http", http);
  } finally {
    await http.stop();
  }
  return out;
}

const scenarios = {
  approval: (server) => approval(server),
  cancel: (server, who) => cancel(server, who),
  kill: (server, who, http) =>
    kill(
      server,
      who,
      async (c) => {
        if (http) return http.kill();
        const pid = c.transport.pid;
        process.kill(pid, "SIGKILL");
        while (true) {
          try {
            process.kill(pid, 0);
          } catch {
            return;
          }
          await new Promise((r) => setTimeout(r, 20));
        }
      },
      async () => (http ? http.start() : server),
    ),
};

const summary = {
  sdk_version: (await import(pathToFileURL(`${args.modules}/node_modules/@modelcontextprotocol/client/package.json`).href, { with: { type: "json" } })).default.version,
  [args.scenario]: await both(scenarios[args.scenario]),
};
process.stdout.write(JSON.stringify(summary) + "\n");
process.exit(0);
