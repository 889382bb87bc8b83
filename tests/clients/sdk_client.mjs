// Drive the server with the TypeScript SDK client (npm @modelcontextprotocol/sdk 1.32.2),
// which speaks the handshake era only (it offers 2025-11-25), and check what it gets back.
//
// usage: node sdk_client.mjs PLAN -- SERVER_COMMAND [ARG...]
// ci/test.sh copies this file next to the node_modules it installed, so the
// import below resolves to the pinned package. Exit 0 when every check held.

import { readFileSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
if (sep !== 1 || argv.length < 3) {
  console.error("usage: node sdk_client.mjs PLAN -- SERVER_COMMAND [ARG...]");
  process.exit(2);
}
const plan = JSON.parse(readFileSync(argv[0], "utf8"));
const cmd = argv.slice(sep + 1);

let passes = 0;
const failures = [];
function expect(cond, what) {
  if (cond) {
    passes += 1;
  } else {
    failures.push(what);
    console.log(`  FAIL ${what}`);
  }
}

async function main() {
  console.log("typescript sdk 1.32.2, era legacy");
  const transport = new StdioClientTransport({ command: cmd[0], args: cmd.slice(1), stderr: "inherit" });
  const client = new Client({ name: "reachweaver-mcp-ci", version: "1" });
  await client.connect(transport);
  try {
    const info = client.getServerVersion();
    expect(info && typeof info.name === "string" && info.name.length > 0, "serverInfo names the server");
    const caps = client.getServerCapabilities();
    expect(caps && caps.tools !== undefined, "the server offers tools");

    const listing = await client.listTools();
    const names = new Set(listing.tools.map((t) => t.name));
    console.log(`  tools/list: ${names.size} tools`);
    for (const n of plan.expect_tools) expect(names.has(n), `tool ${n} is listed`);
    for (const n of plan.forbid_tools) expect(!names.has(n), `tool ${n} is withheld`);
    for (const t of listing.tools) {
      expect(t.inputSchema && t.inputSchema.type === "object", `${t.name}: inputSchema is an object schema`);
      expect(t.annotations && t.annotations.readOnlyHint === true, `${t.name}: readOnlyHint true`);
    }

    for (const call of plan.calls) {
      const label = `${call.label} (${call.tool})`;
      const r = await client.callTool({ name: call.tool, arguments: call.arguments });
      expect(Boolean(r.isError) === call.is_error, `${label}: isError ${call.is_error} (got ${r.isError})`);
      expect(Array.isArray(r.content) && r.content.length === 1 && r.content[0].type === "text", `${label}: one text item`);
      let env;
      try {
        env = JSON.parse(r.content[0].text);
      } catch {
        expect(false, `${label}: the text item is JSON`);
        continue;
      }
      const keys = Object.keys(env).sort().join(",");
      expect(keys === "exit_code,output", `${label}: envelope {exit_code, output} (got ${keys})`);
      const want = Array.isArray(call.exit_code) ? call.exit_code : [call.exit_code];
      expect(want.includes(env.exit_code), `${label}: exit_code in ${want} (got ${env.exit_code})`);
      if (call.error_code !== undefined) {
        const got = env.output && env.output.error && env.output.error.code;
        expect(got === call.error_code, `${label}: error code ${call.error_code} (got ${got})`);
      }
      // The SDK negotiated 2025-11-25, where the envelope is also structuredContent.
      expect(isDeepStrictEqual(r.structuredContent, env), `${label}: structuredContent equals the text envelope`);
      console.log(`  tools/call ${call.tool}: isError=${r.isError} exit_code=${env.exit_code}`);
    }
  } finally {
    await client.close();
  }
}

try {
  await main();
} catch (e) {
  expect(false, `the session completed (${e && e.message ? e.message : e})`);
}
console.log(`  ${passes} checks held, ${failures.length} failed`);
process.exit(failures.length === 0 && passes > 0 ? 0 : 1);
