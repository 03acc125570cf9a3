// The SDK on the docker backend (through the in-box agent): the docs' first
// example, files, commands, cancellation, processes, a terminal and tar.
// Skipped with the reason without an engine and the image; under CI=true
// that is a failure.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { AbortError, NotExistError, type Workspace, textOf } from "../src/index.js";
import { type RunningBroker, dockerUnavailable, eventually, startBroker } from "./helpers.js";

const skip = dockerUnavailable();

describe("the SDK on the docker backend", { skip }, () => {
	let rb: RunningBroker;
	let ws: Workspace;
	before(async () => {
		rb = await startBroker({ docker: true });
		ws = await rb.broker.create({ backend: "docker" });
	});
	after(async () => {
		await rb?.stop();
	});

	test("the five-minute start: create, write, run, read the output, delete", async () => {
		let id: string;
		{
			await using w = await rb.broker.create({ backend: "docker" });
			id = w.id;
			assert.equal(w.root, "/workspace");
			await w.writeText("hello.sh", 'echo "hello from $(hostname)" > out.txt\n');
			const r = await w.run("bash hello.sh && cat out.txt");
			assert.equal(r.exitCode, 0);
			assert.match(r.text, /^hello from /);
			assert.match(await w.readText("out.txt"), /^hello from /);
		}
		assert.ok(!(await rb.broker.list()).some((w) => w.id === id), "deleted at the end of the block");
	});

	test("files, search, tools", async () => {
		await ws.writeBytes("d/a.txt", "alpha\nbeta\n", { mkdirs: true });
		assert.equal((await ws.stat("/workspace/d/a.txt")).size, 11);
		assert.deepEqual((await ws.listdir("d")).map((e) => e.name), ["a.txt"]);
		assert.deepEqual((await ws.grep("beta")).lines.map((l) => `${l.path}:${l.line}`), ["d/a.txt:2"]);
		assert.deepEqual((await ws.glob("*.txt")).paths, ["d/a.txt"]);
		assert.equal(textOf(await ws.tools.read("d/a.txt")), "alpha\nbeta\n");
		await assert.rejects(ws.readBytes("/nonexistent"), NotExistError);
	});

	test("an aborted stream kills the command's tree in the container", async () => {
		const ac = new AbortController();
		const s = ws.stream("sleep 401 & echo $! > /tmp/bg.pid; echo $$ > /tmp/fg.pid; echo started; sleep 402", { signal: ac.signal });
		await assert.rejects(
			(async () => {
				for await (const c of s) if (Buffer.from(c).toString().includes("started")) ac.abort();
			})(),
			AbortError,
		);
		// The broker answered only once the tree was gone.
		const r = await ws.run("kill -0 $(cat /tmp/bg.pid) 2>/dev/null && echo alive; pgrep -f 'sleep 40[12]' || echo none");
		assert.equal(r.text, "none\n");
	});

	test("a background process and its log, a terminal, and a tar round trip", async () => {
		const p = await ws.processes.start("echo up; cat", { stdin: true });
		await ws.processes.sendStdin(p.id, "echoed\n", { close: true });
		assert.equal((await ws.processes.wait(p.id, { timeout: 10 })).result?.exitCode, 0);
		assert.equal(Buffer.from((await ws.processes.read(p.id)).data).toString(), "up\nechoed\n");

		const t = ws.pty({ command: "stty size; exit 3", rows: 33, cols: 99 });
		let out = "";
		t.onData((b) => (out += Buffer.from(b).toString()));
		assert.equal((await t.exit).exitCode, 3);
		assert.match(out, /33 99/);

		const { tar, report } = await ws.downloadArchive("d");
		const rep = await ws.uploadArchive("copy", tar as unknown as ReadableStream<Uint8Array>);
		assert.equal(rep.files, 1);
		assert.equal((await report).files, 1);
		await eventually("copy lands", async () => (await ws.readText("copy/a.txt")) === "alpha\nbeta\n");
	});
});
