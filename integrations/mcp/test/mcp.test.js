// The broker's MCP endpoints driven by the official TypeScript SDK client
// (a client from another implementation than the Go SDK the server is
// built on): the seven tools listed with the HTTP API's definitions, all
// seven called with the HTTP tool route's results, an image read, a
// cancelled bash and one whose session ended, each leaving no process of
// its tree, and the session endpoint /v1/mcp, which creates its workspace
// on the first call and deletes it with the session.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { eventually, makePng, startBroker, textOf } from "./broker.js";

const SEVEN = ["bash", "edit", "find", "grep", "ls", "read", "write"];

let broker;

before(async () => {
	broker = await startBroker();
});

after(async () => {
	await broker?.stop();
});

const byName = (a, b) => a.name.localeCompare(b.name);

/**
 * Starts, through mcp, a bash that runs a background sleeper and waits,
 * both pids recorded in the workspace; resolves once a progress
 * notification carried its output. settled never rejects.
 */
async function startSleeper(mcp, ws, options, tag = "cancel") {
	const command = `sleep 300 & echo $! > ${tag}-sleeper.pid; echo $$ > ${tag}-shell.pid; echo started; wait`;
	const progress = [];
	const call = mcp.callTool({ name: "bash", arguments: { command } }, undefined, {
		...options,
		onprogress: (p) => progress.push(p),
		resetTimeoutOnProgress: true,
	});
	const settled = call.then(
		(result) => ({ result }),
		(err) => ({ err }),
	);
	await eventually(
		() => progress.some((p) => JSON.stringify(p).includes("started")),
		15_000,
		`a progress notification with the output ("started"); got ${JSON.stringify(progress)}`,
	);
	const pids = [];
	for (const f of [`${tag}-shell.pid`, `${tag}-sleeper.pid`]) {
		pids.push(Number((await broker.api("GET", `/v1/workspaces/${ws}/files?path=${f}`)).trim()));
	}
	assert.ok(pids.every((p) => p > 0), `pids ${pids}`);
	return { settled, pids: () => pids };
}

/** Checks, over MCP, the HTTP exec route and GET /processes, that pids are gone. */
async function assertTreeGone(ws, pids) {
	const alive = `for p in ${pids.join(" ")}; do kill -0 $p 2>/dev/null && echo "alive $p"; done; echo checked`;
	const check = await broker.mcp(`/v1/workspaces/${ws}/mcp`);
	await eventually(
		async () => {
			const r = await check.callTool({ name: "bash", arguments: { command: alive } });
			return textOf(r).trim() === "checked";
		},
		15_000,
		`processes ${pids} gone`,
	);
	const lines = (await broker.api("POST", `/v1/workspaces/${ws}/exec`, { command: alive }))
		.trim()
		.split("\n")
		.map((l) => JSON.parse(l));
	const out = lines
		.filter((l) => l.type === "output")
		.map((l) => Buffer.from(l.data, "base64").toString())
		.join("");
	assert.equal(out.trim(), "checked");
	const { processes } = await broker.api("GET", `/v1/workspaces/${ws}/processes`);
	assert.deepEqual(
		processes.filter((p) => /sleep 300/.test(p.command)),
		[],
	);
}

describe("/v1/workspaces/{id}/mcp", () => {
	let ws;
	let mcp;

	before(async () => {
		ws = await broker.createWorkspace("local");
		mcp = await broker.mcp(`/v1/workspaces/${ws.id}/mcp`);
	});

	test("lists the seven tools with GET /v1/tools' names, descriptions and schemas", async () => {
		const { tools } = await mcp.listTools();
		const { tools: http } = await broker.api("GET", "/v1/tools");
		assert.deepEqual(tools.map((t) => t.name).sort(), SEVEN);
		const got = tools.map((t) => ({ name: t.name, description: t.description, schema: t.inputSchema })).sort(byName);
		const want = http.map((t) => ({ name: t.name, description: t.description, schema: t.parameters })).sort(byName);
		assert.deepEqual(got, want);
	});

	test("calls all seven tools, with the HTTP tool route's results", async () => {
		const call = async (name, args) => {
			const r = await mcp.callTool({ name, arguments: args });
			assert.equal(r.isError ?? false, false, `${name}: ${textOf(r)}`);
			return r;
		};
		let r = await call("write", { path: "src/hello.txt", content: "hello world\nsecond line\n" });
		assert.equal(textOf(r), "Successfully wrote to src/hello.txt");
		r = await call("edit", { path: "src/hello.txt", edits: [{ oldText: "world", newText: "there" }] });
		assert.match(textOf(r), /Successfully replaced/);

		// The read-only calls must answer exactly as the HTTP route does.
		const same = [
			["read", { path: "src/hello.txt" }],
			["bash", { command: "cat src/hello.txt; echo to-stderr >&2" }],
			["grep", { pattern: "there" }],
			["find", { pattern: "**/*.txt" }],
			["ls", { path: "src" }],
		];
		for (const [name, args] of same) {
			const got = await call(name, args);
			const want = await broker.httpTool(ws.id, name, args);
			assert.deepEqual(got.content, want.content, `${name} ${JSON.stringify(args)}`);
		}
		r = await call("read", { path: "src/hello.txt" });
		assert.equal(textOf(r), "hello there\nsecond line\n");
		r = await call("grep", { pattern: "there" });
		assert.match(textOf(r), /hello\.txt:1: hello there/);
		r = await call("find", { pattern: "*.txt" });
		assert.match(textOf(r), /src\/hello\.txt/);
	});

	test("a tool error is an isError result with the HTTP route's text", async () => {
		const args = { path: "no/such/file.txt" };
		const got = await mcp.callTool({ name: "read", arguments: args });
		const want = await broker.httpTool(ws.id, "read", args);
		assert.equal(got.isError, true);
		assert.equal(want.isError, true);
		assert.deepEqual(got.content, want.content);
		const bad = await mcp.callTool({ name: "bash", arguments: { command: "exit 3" } });
		assert.equal(bad.isError, true);
		assert.match(textOf(bad), /exited with code 3/);
	});

	test("read returns an image as image content", async () => {
		const png = makePng(4, 3);
		await broker.api("PUT", `/v1/workspaces/${ws.id}/files?path=x.png`, png);
		const got = await mcp.callTool({ name: "read", arguments: { path: "x.png" } });
		assert.equal(got.isError ?? false, false, textOf(got));
		const image = got.content.find((c) => c.type === "image");
		assert.ok(image, `no image content: ${JSON.stringify(got.content)}`);
		assert.equal(image.mimeType, "image/png");
		assert.deepEqual(Buffer.from(image.data, "base64"), png);
		const want = await broker.httpTool(ws.id, "read", { path: "x.png" });
		assert.deepEqual(got.content, want.content);
	});

	test("bash sends progress, and a cancelled bash leaves no process of its tree", async () => {
		const abort = new AbortController();
		const run = await startSleeper(mcp, ws.id, { signal: abort.signal });
		abort.abort();
		const { err, result } = await run.settled;
		assert.ok(err, `the aborted call resolved: ${JSON.stringify(result)}`);
		await assertTreeGone(ws.id, run.pids());
	});

	test("ending the session (DELETE) kills a running bash's tree", async () => {
		const other = await broker.mcp(`/v1/workspaces/${ws.id}/mcp`);
		const run = await startSleeper(other, ws.id, {}, "session");
		await other.transport.terminateSession();
		await assertTreeGone(ws.id, run.pids());
	});

	test("no token, no session", async () => {
		await assert.rejects(broker.mcp(`/v1/workspaces/${ws.id}/mcp`, null));
		await assert.rejects(broker.mcp(`/v1/workspaces/${ws.id}/mcp`, "not-the-token"));
	});
});

describe("/v1/mcp", () => {
	test("one workspace per session, created on the first tool call, and the workspace tools", async () => {
		const before = (await broker.api("GET", "/v1/workspaces")).workspaces.map((w) => w.id);
		const mcp = await broker.mcp("/v1/mcp?backend=local");
		const { tools } = await mcp.listTools();
		const names = tools.map((t) => t.name);
		for (const n of SEVEN) assert.ok(names.includes(n), `tool ${n} missing from ${names}`);
		const extra = names.filter((n) => !SEVEN.includes(n));
		assert.ok(extra.length >= 3, `no workspace tools (list, create, delete) beside the seven: ${names}`);

		let r = await mcp.callTool({ name: "write", arguments: { path: "a.txt", content: "session file\n" } });
		assert.equal(r.isError ?? false, false, textOf(r));
		const afterIds = (await broker.api("GET", "/v1/workspaces")).workspaces.map((w) => w.id);
		const created = afterIds.filter((id) => !before.includes(id));
		assert.equal(created.length, 1, `workspaces created by the first call: ${created}`);
		for (const [name, args, want] of [
			["read", { path: "a.txt" }, /session file/],
			["edit", { path: "a.txt", edits: [{ oldText: "session", newText: "edited" }] }, /Successfully replaced/],
			["bash", { command: "cat a.txt" }, /edited file/],
			["grep", { pattern: "edited" }, /a\.txt:1: edited file/],
			["find", { pattern: "*.txt" }, /a\.txt/],
			["ls", {}, /a\.txt/],
		]) {
			r = await mcp.callTool({ name, arguments: args });
			assert.equal(r.isError ?? false, false, `${name}: ${textOf(r)}`);
			assert.match(textOf(r), want, name);
		}
		// The file is in the workspace the session made, seen over HTTP.
		const body = await broker.api("GET", `/v1/workspaces/${created[0]}/files?path=a.txt`);
		assert.equal(body, "edited file\n");

		const list = extra.find((n) => /list/.test(n));
		assert.ok(list, `no tool to list workspaces among ${extra}`);
		r = await mcp.callTool({ name: list, arguments: {} });
		assert.equal(r.isError ?? false, false, textOf(r));
		assert.match(JSON.stringify(r), new RegExp(created[0]));

		// By default the session's workspace ends with the session.
		await mcp.transport.terminateSession();
		await eventually(
			async () => !(await broker.api("GET", "/v1/workspaces")).workspaces.some((w) => w.id === created[0]),
			15_000,
			`workspace ${created[0]} deleted with its session`,
		);
	});
});
