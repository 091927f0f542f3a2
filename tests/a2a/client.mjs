// An A2A client of `agentfile a2a`, driven by the official JavaScript SDK
// (`@a2a-js/sdk` 1.x): its `ClientFactory` resolves the agent card from the
// base URL and picks the JSON-RPC transport the card names. Run by
// tests/e2e/a2a.rs, which starts the server, a fake model and a workspace
// first:
//
//   node client.mjs --modules DIR --url http://127.0.0.1:PORT/a2a \
//     --scenario run|stream --skill SKILL --inputs JSON
//
// DIR holds node_modules with @a2a-js/sdk (scripts/test.sh installs it under
// target/a2a-js).
//
// - run: send a message (not streaming) and wait for the task to end.
// - stream: send a streaming message; every update until the end.
//
// Prints one JSON object summarising what happened (parts as their proto3
// JSON, `{text}` or `{data}`); the Rust test asserts on it. A failing call
// prints `{"error": "..."}` instead.

import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const args = Object.fromEntries(
  process.argv
    .slice(2)
    .reduce((pairs, a, i, all) => (a.startsWith("--") ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []),
);
const root = `${args.modules}/node_modules/@a2a-js/sdk`;
const mod = (p) => import(pathToFileURL(`${root}/${p}`).href);
const { ClientFactory } = await mod("dist/client/index.js");
const { Role, TaskState } = await mod("dist/index.js");
const sdkVersion = JSON.parse(readFileSync(`${root}/package.json`, "utf8")).version;

const part = (p) => {
  switch (p.content?.$case) {
    case "text":
      return { text: p.content.value };
    case "data":
      return { data: p.content.value };
    default:
      return { other: p.content?.$case ?? null };
  }
};
const artifact = (a) => ({ name: a.name, parts: a.parts.map(part) });
const state = (s) => TaskState[s.state] ?? String(s.state);
const task = (t) => ({
  id: t.id,
  state: state(t.status),
  artifacts: t.artifacts.map(artifact),
  metadata: t.metadata ?? {},
});

function request() {
  return {
    tenant: "",
    message: {
      messageId: randomUUID(),
      contextId: "",
      taskId: "",
      role: Role.ROLE_USER,
      parts: [{ content: { $case: "data", value: JSON.parse(args.inputs ?? "{}") }, metadata: undefined, filename: "", mediaType: "" }],
      metadata: { skill: args.skill },
      extensions: [],
      referenceTaskIds: [],
    },
    configuration: undefined,
    metadata: undefined,
  };
}

async function scenario() {
  const base = args.url.replace(/\/a2a$/, "");
  const client = await new ClientFactory().createFromUrl(base);
  if (args.scenario === "run") {
    const sent = await client.sendMessage(request());
    // A `SendMessageResponse` (its payload a task or a message), or the task
    // itself, as this version of the client hands it over.
    const t = sent?.payload?.$case === "task" ? sent.payload.value : sent;
    return task(t);
  }
  if (args.scenario === "stream") {
    const updates = [];
    for await (const item of client.sendMessageStream(request())) {
      const p = item.payload ?? { $case: item.kind, value: item };
      switch (p.$case) {
        case "task":
          updates.push({ kind: "task", id: p.value.id, state: state(p.value.status) });
          break;
        case "statusUpdate":
          updates.push({
            kind: "status",
            state: state(p.value.status),
            text: (p.value.status.message?.parts ?? []).map(part).filter((x) => "text" in x).map((x) => x.text),
          });
          break;
        case "artifactUpdate":
          updates.push({ kind: "artifact", ...artifact(p.value.artifact) });
          break;
        default:
          updates.push({ kind: String(p.$case) });
      }
    }
    return { updates };
  }
  throw new Error(`unknown scenario ${args.scenario}`);
}

let out;
try {
  out = await scenario();
} catch (e) {
  out = { error: String(e?.stack ?? e) };
}
out.sdk_version = sdkVersion;
console.log(JSON.stringify(out));
