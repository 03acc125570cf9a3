// pi 0.99+ has its own MCP client: `pi mcp add` pointed at the broker's
// workspace MCP endpoint is the extension-free way in. This runs pi's real
// CLI (non-interactive: add, then list, which connects and lists the tools).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { pi } from "../src/pi.js";
import { type RunningBroker, startBroker } from "./helpers.js";

const run = promisify(execFile);

/** pi's CLI when this pi has `pi mcp` (0.99+), else why not. */
function piCli(): { cli?: string; skip?: string } {
	const [major, minor] = pi.VERSION.split(".").map(Number);
	if (major < 1 && minor < 99) return { skip: `pi ${pi.VERSION} has no MCP client (0.99+)` };
	const main = fileURLToPath(import.meta.resolve("@earendil-works/pi-coding-agent"));
	return { cli: path.join(path.dirname(main), "cli.js") };
}

const { cli, skip } = piCli();

describe(`pi ${pi.VERSION}'s own MCP client against the broker (pi mcp add)`, { skip }, () => {
	let broker: RunningBroker;
	let home: string;
	let url: string;

	before(async () => {
		broker = await startBroker();
		const ws = await broker.workspace("local");
		url = `${broker.url}/v1/workspaces/${ws.id}/mcp`;
		home = mkdtempSync(path.join(os.tmpdir(), "wsbroker-pi-mcp-"));
	});
	after(async () => {
		await broker?.stop();
		rmSync(home, { recursive: true, force: true });
	});

	// pi's config and credentials stay in the test's own folder.
	const pimcp = (args: string[], token: string) =>
		run(process.execPath, [cli!, "mcp", ...args], {
			cwd: home,
			env: { ...process.env, HOME: home, PI_CODING_AGENT_DIR: path.join(home, "agent"), BROKER_TOKEN: token },
			timeout: 120_000,
		});

	test("add, then list: connected, the broker's seven tools", async () => {
		await pimcp(["add", "wsbroker", "--url", url, "--bearer-token-env-var", "BROKER_TOKEN"], broker.token);
		const cfg = JSON.parse(readFileSync(path.join(home, "agent", "mcp.json"), "utf8"));
		assert.deepEqual(cfg.mcpServers.wsbroker, { url, headers: { Authorization: "Bearer ${BROKER_TOKEN}" } });
		const { stdout } = await pimcp(["list", "--json"], broker.token);
		const server = JSON.parse(stdout).servers.find((s: { name: string }) => s.name === "wsbroker");
		assert.equal(server?.state, "connected", stdout);
		assert.deepEqual([...server.tools].sort(), ["bash", "edit", "find", "grep", "ls", "read", "write"]);
	});

	test("a wrong token: list fails, no tools", async () => {
		const err = (await pimcp(["list", "--json"], "not-the-token").then(
			() => undefined,
			(e: unknown) => e,
		)) as { code?: number; stdout?: string } | undefined;
		assert.ok(err, "pi mcp list succeeded with a wrong token");
		assert.equal(err.code, 1);
		const server = JSON.parse(err.stdout ?? "{}").servers?.find((s: { name: string }) => s.name === "wsbroker");
		assert.notEqual(server?.state, "connected", err.stdout);
	});
});
