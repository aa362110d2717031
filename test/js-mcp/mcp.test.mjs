// Black-box test of `system1 mcp` with the official TypeScript MCP client
// (@modelcontextprotocol/sdk, pinned in package.json). The client
// validates every structuredContent against the tool's outputSchema, so
// each call below is also a check of the published contract.
//
// Run by internal/mcpserver's TestTypeScriptClient, which builds the
// binary, starts fake System One endpoints and sets:
//   SYSTEM1_BIN      the binary
//   SYSTEM1_CONFIG   a configuration whose chain is the fakes
//   SYSTEM1_TOOLS    the tool names, in order (mcpserver.Tools, their one home)
//   CLAUDE_PLUGIN_DATA, HOME  private folders
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const bin = process.env.SYSTEM1_BIN;
const toolNames = (process.env.SYSTEM1_TOOLS ?? "").split(",");
const env = {
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  SYSTEM1_CONFIG: process.env.SYSTEM1_CONFIG,
  CLAUDE_PLUGIN_DATA: process.env.CLAUDE_PLUGIN_DATA,
};

let client;
let transport;

before(async () => {
  assert.ok(bin, "SYSTEM1_BIN is not set: run this through go test ./internal/mcpserver -run TestTypeScriptClient");
  assert.ok(process.env.SYSTEM1_TOOLS, "SYSTEM1_TOOLS is not set: run this through go test ./internal/mcpserver -run TestTypeScriptClient");
  transport = new StdioClientTransport({ command: bin, args: ["mcp"], env, stderr: "pipe" });
  client = new Client({ name: "system1-js-blackbox", version: "0" });
  await client.connect(transport);
  // Listing the tools makes the client cache their output schemas, which
  // callTool then validates every structuredContent against.
  await client.listTools();
});

after(async () => {
  await client?.close();
});

async function call(name, args) {
  const res = await client.callTool({ name, arguments: args });
  assert.ok(res.structuredContent, `${name} returned no structuredContent`);
  assert.deepEqual(JSON.parse(res.content[0].text), res.structuredContent, "text and structured content differ");
  return res;
}

test("initialize negotiates and lists the tools with output schemas", async () => {
  assert.equal(client.getServerVersion().name, "system1");
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), [...toolNames].sort());
  for (const t of tools) {
    assert.equal(t.outputSchema?.type, "object", `${t.name} has no object output schema`);
    const text = JSON.stringify(t.outputSchema);
    assert.ok(!/"type":\[[^\]]*"array"/.test(text), `${t.name}: an array type is a union`);
  }
});

test("decide: a decision with its probability, validated against the output schema", async () => {
  const res = await call("system1_decide", {
    question: "Which queue should this ticket go to?",
    options: ["billing", "support", "sales"],
    context: { ticket: "I was charged twice this month" },
    request_id: "js-1",
  });
  const out = res.structuredContent;
  assert.equal(res.isError ?? false, false);
  assert.equal(out.status, "decided");
  assert.equal(out.decision, "billing");
  assert.equal(out.confidence, out.probabilities.billing);
  assert.deepEqual(Object.keys(out.probabilities), ["billing", "support", "sales"]);
  assert.equal(out.request_id, "js-1");
  assert.equal(out.schema_version, "1");
  assert.equal(out.provider, "jev");
  assert.deepEqual(out.attempts.map((a) => [a.provider, a.outcome]), [
    ["local", "error"],
    ["jev", "ok"],
  ]);
});

test("decide: abstains under min_confidence with a plain rationale", async () => {
  const out = (await call("system1_decide", { question: "Ship it?", min_confidence: 0.99 })).structuredContent;
  assert.equal(out.status, "abstained");
  assert.equal(out.decision, null);
  assert.match(out.rationale, /Reason this through yourself/);
});

test("decide: an unknown field is a structured invalid_request", async () => {
  const res = await call("system1_decide", { question: "Ship it?", temperature: 0 });
  assert.equal(res.isError, true);
  assert.equal(res.structuredContent.status, "error");
  assert.equal(res.structuredContent.error.code, "invalid_request");
  assert.match(res.structuredContent.error.message, /temperature/);
  assert.equal(res.structuredContent.probabilities, undefined);
});

test("decide: paused by system1 toggle off, resumed by toggle on", async () => {
  execFileSync(bin, ["toggle", "off"], { env });
  try {
    const out = (await call("system1_decide", { question: "Ship it?" })).structuredContent;
    assert.equal(out.status, "abstained");
    assert.equal(out.decision, null);
    assert.deepEqual(out.attempts, []);
    assert.match(out.rationale, /paused/);
    const health = (await call("system1_health", {})).structuredContent;
    assert.equal(health.status, "paused");
  } finally {
    execFileSync(bin, ["toggle", "on"], { env });
  }
  const out = (await call("system1_decide", { question: "Ship it?" })).structuredContent;
  assert.equal(out.status, "decided");
});

test("health: the primary is down, the fallback up: degraded", async () => {
  const h = (await call("system1_health", {})).structuredContent;
  assert.equal(h.status, "degraded");
  assert.deepEqual(h.providers.map((p) => [p.name, p.role, p.ok]), [
    ["local", "primary", false],
    ["jev", "fallback", true],
  ]);
  assert.deepEqual(h.config_errors, []);
});

test("capabilities: chain, limits and the contract's schemas", async () => {
  const c = (await call("system1_capabilities", {})).structuredContent;
  assert.deepEqual(c.tools, toolNames);
  assert.equal(c.schema_version, "1");
  assert.equal(c.providers[1].capabilities.max_options, 255);
  assert.equal(c.request_schema.properties.question.maxLength, 8000);
  assert.deepEqual(c.response_schema.properties.status.enum, ["decided", "abstained", "error"]);
});

test("requests written just before stdin closes are all answered", async () => {
  // A second server, whose stdin this client closes right after writing
  // three requests, as a script or a test harness does.
  const t = new StdioClientTransport({ command: bin, args: ["mcp"], env, stderr: "pipe" });
  const c = new Client({ name: "system1-js-closed-stdin", version: "0" });
  await c.connect(t);
  const pending = [
    c.listTools(),
    c.callTool({ name: "system1_decide", arguments: { question: "Which queue?", options: ["billing", "support", "sales"] } }),
    c.callTool({ name: "system1_health", arguments: {} }),
  ];
  // close() ends stdin at once, then waits for the server to exit.
  const closed = t.close();
  const [list, decide, health] = await Promise.all(pending);
  await closed;
  assert.deepEqual(list.tools.map((tool) => tool.name).sort(), [...toolNames].sort());
  assert.equal(decide.structuredContent.status, "decided");
  assert.equal(decide.structuredContent.decision, "billing");
  assert.equal(health.structuredContent.status, "degraded");
});
