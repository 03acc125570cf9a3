// Every method of the SDK against a real broker on the local backend.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import {
	AbortError,
	Broker,
	ConnectionError,
	InvalidError,
	type LogEvent,
	NotExistError,
	NotFoundError,
	Workspace,
	textOf,
} from "../src/index.js";
import { type RunningBroker, cuttingProxy, droppingProxy, eventually, startBroker } from "./helpers.js";

const hasGlobalWebSocket = typeof (globalThis as { WebSocket?: unknown }).WebSocket === "function";

/** The live processes of ws whose command line starts with marker (through the broker's process list). */
async function running(ws: Workspace, marker: string): Promise<string[]> {
	return (await ws.ps()).filter((p) => p.command.startsWith(marker)).map((p) => `${p.pid} ${p.command}`);
}

function outputOf(events: LogEvent[], from = 0): string {
	let at = from;
	const parts: Uint8Array[] = [];
	for (const ev of events) {
		if (ev.type === "output") {
			assert.equal(ev.offset, at, "output neither lost nor doubled");
			parts.push(ev.data);
			at += ev.data.length;
		}
	}
	return Buffer.concat(parts).toString("utf8");
}

describe("the SDK on the local backend", () => {
	let rb: RunningBroker;
	let broker: Broker;
	let ws: Workspace;

	before(async () => {
		rb = await startBroker();
		broker = rb.broker;
		ws = await broker.create({ backend: "local" });
	});
	after(async () => {
		await rb?.stop();
	});

	test("Broker finds URL and token as the CLI does: arguments, BROKER_TOKEN, BROKER_TOKEN_FILE, the state dir", async () => {
		const viaFile = new Broker({ env: { BROKER_URL: rb.url, BROKER_TOKEN_FILE: rb.tokenFile } });
		const viaState = new Broker({ env: { BROKER_URL: rb.url, BROKER_STATE_DIR: rb.stateDir } });
		const xdg = mkdtempSync(path.join(os.tmpdir(), "wsbroker-sdk-xdg-"));
		mkdirSync(path.join(xdg, "wsbroker"));
		writeFileSync(path.join(xdg, "wsbroker", "token"), `${rb.token}\n`);
		const viaXdg = new Broker({ env: { BROKER_URL: rb.url, XDG_STATE_HOME: xdg } });
		rmSync(xdg, { recursive: true });
		const viaEnv = new Broker({ env: { BROKER_URL: rb.url, BROKER_TOKEN: rb.token, BROKER_TOKEN_FILE: "/nonexistent" } });
		try {
			for (const b of [viaFile, viaState, viaXdg, viaEnv]) assert.ok((await b.list()).some((w) => w.id === ws.id));
		} finally {
			for (const b of [viaFile, viaState, viaEnv, viaXdg]) b.close();
		}
		assert.throws(() => new Broker({ env: { BROKER_TOKEN_FILE: "/nonexistent/token" } }), /no token: .*BROKER_TOKEN_FILE.*nonexistent/);
		assert.equal(new Broker({ env: { BROKER_TOKEN: "x" } }).url, "http://127.0.0.1:8722");
		assert.throws(() => new Broker({ url: "ftp://x", token: "t" }), /not http/);
	});

	test("create, get, list, refresh, and await using deletes (keep leaves it)", async () => {
		let id: string;
		{
			await using w = await broker.create({ backend: "local", env: { GREETING: "hi" } });
			id = w.id;
			assert.match(id, /^ws_/);
			assert.equal(w.backend, "local");
			assert.ok(w.root.startsWith("/"));
			const got = await broker.get(id);
			assert.equal(got.root, w.root);
			assert.deepEqual((await got.refresh()).env, [{ name: "GREETING" }]);
			assert.ok((await broker.list()).some((x) => x.id === id));
			assert.equal((await w.run("echo $GREETING")).text, "hi\n");
		}
		await assert.rejects(broker.get(id), NotFoundError);
		let kept: string;
		{
			await using w = await broker.create({ backend: "local", keep: true });
			kept = w.id;
		}
		const k = await broker.get(kept);
		await k.delete();
		await assert.rejects(broker.get(kept), NotFoundError);
	});

	test("raw files: writeBytes, readBytes, readText, stat, exists, listdir, mkdir, realpath", async () => {
		await ws.writeBytes("dir/a.bin", new Uint8Array([0, 1, 2, 255]), { mkdirs: true });
		assert.deepEqual([...(await ws.readBytes("dir/a.bin"))], [0, 1, 2, 255]);
		await ws.writeText("dir/b.txt", "héllo\n");
		assert.equal(await ws.readText("dir/b.txt"), "héllo\n");
		const st = await ws.stat("dir/b.txt", { access: "rw" });
		assert.equal(st.type, "file");
		assert.equal(st.size, Buffer.byteLength("héllo\n"));
		assert.equal((await ws.stat("dir")).type, "dir");
		assert.equal(await ws.exists("dir/b.txt"), true);
		assert.equal(await ws.exists("dir/none"), false);
		assert.deepEqual(
			(await ws.listdir("dir")).map((e) => `${e.name}:${e.type}`),
			["a.bin:file", "b.txt:file"],
		);
		await ws.mkdir("deep/er/est");
		await ws.mkdir("deep/er/est"); // again: fine
		assert.equal((await ws.stat("deep/er/est")).type, "dir");
		await ws.run("ln -s dir/b.txt link");
		assert.equal(await ws.realpath("link"), path.posix.join(await ws.realpath("."), "dir/b.txt"));
		await assert.rejects(ws.readBytes("dir/none"), NotExistError);
	});

	test("streamed files: open reads as it arrives; writeBytes takes web and Node streams", async () => {
		const chunks = Array.from({ length: 64 }, (_, i) => Buffer.alloc(64 << 10, i));
		const web = new ReadableStream<Uint8Array>({
			pull(c) {
				const n = chunks.shift();
				if (n) c.enqueue(n);
				else c.close();
			},
		});
		await ws.writeBytes("big.bin", web);
		const st = await ws.stat("big.bin");
		assert.equal(st.size, 64 * (64 << 10));
		let total = 0;
		let first = -1;
		const stream = await ws.open("big.bin");
		for await (const c of stream) {
			if (first < 0) first = c[0];
			total += c.byteLength;
		}
		assert.equal(total, st.size);
		assert.equal(first, 0);
		async function* gen() {
			yield Buffer.from("one\n");
			yield Buffer.from("two\n");
		}
		await ws.writeBytes("gen.txt", gen());
		assert.equal(await ws.readText("gen.txt"), "one\ntwo\n");
		// Cancelling a stream early closes the connection; the workspace still answers.
		const s2 = await ws.open("big.bin");
		const r = s2.getReader();
		await r.read();
		await r.cancel();
		assert.equal((await ws.stat("big.bin")).size, st.size);
	});

	test("grep and glob run where the files are", async () => {
		await ws.writeText("src/x.go", "package x\n// TODO one\n", { mkdirs: true });
		await ws.writeText("src/y.go", "package x\n// todo two\n");
		await ws.writeText("src/z.md", "TODO three\n");
		const g = await ws.grep("TODO", { path: "src", glob: "*.go" });
		assert.deepEqual(
			g.lines.map((l) => `${l.path}:${l.line}`),
			["x.go:2"],
		);
		const gi = await ws.grep("todo", { path: "src", ignoreCase: true });
		assert.equal(gi.lines.filter((l) => l.match).length, 3);
		assert.ok((await ws.grep("TODO", { path: "src", limit: 1 })).limitReached);
		const gl = await ws.glob("*.go", { cwd: "src" });
		assert.deepEqual(gl.paths.sort(), ["x.go", "y.go"]);
		assert.ok((await ws.glob("*", { cwd: "src", limit: 1 })).limitReached);
	});

	test("pi's seven tools answer pi's results", async () => {
		const w = await ws.tools.write("tools/hello.py", "print('hi')\n");
		assert.match(textOf(w), /Successfully wrote/);
		const e = await ws.tools.edit("tools/hello.py", [{ oldText: "hi", newText: "hello" }]);
		assert.ok(!e.isError, textOf(e));
		const r = await ws.tools.read("tools/hello.py");
		assert.equal(textOf(r), "print('hello')\n");
		assert.equal(textOf(await ws.tools.read("tools/hello.py", { offset: 1, limit: 1 })).split("\n")[0], "print('hello')");
		const b = await ws.tools.bash("python3 tools/hello.py || echo no python; exit 0");
		assert.match(textOf(b), /hello|no python/);
		const bf = await ws.tools.bash("echo out; exit 3");
		assert.ok(bf.isError);
		assert.match(textOf(bf), /exited with code 3/);
		assert.match(textOf(await ws.tools.grep("hello", { path: "tools" })), /hello\.py:1: print\('hello'\)/);
		assert.match(textOf(await ws.tools.find("*.py")), /tools\/hello\.py/);
		assert.match(textOf(await ws.tools.ls("tools")), /hello\.py/);
		const miss = await ws.tools.read("tools/none.txt");
		assert.ok(miss.isError);
		await assert.rejects(ws.tools.call("nosuchtool", {}), NotFoundError);
	});

	test("run: exit code, output, env, cwd, stdin, the broker's timeout", async () => {
		const r = await ws.run("echo out; echo err >&2; exit 7");
		assert.equal(r.exitCode, 7);
		assert.equal(r.text, "out\nerr\n");
		assert.equal((await ws.run("echo $A-$B", { env: { A: "1", B: "2" } })).text, "1-2\n");
		assert.equal((await ws.run("echo $A", { env: ["A=x"] })).text, "x\n");
		await ws.mkdir("rundir");
		assert.equal((await ws.run("pwd", { cwd: "rundir" })).text.trim(), path.posix.join(await ws.realpath("."), "rundir"));
		assert.equal((await ws.run("wc -l", { stdin: "a\nb\nc\n" })).text.trim(), "3");
		async function* lines() {
			for (let i = 0; i < 1000; i++) yield Buffer.from(`${i}\n`);
		}
		assert.equal((await ws.run("tail -n1", { stdin: lines() })).text, "999\n");
		const t = await ws.run("sleep 30", { timeout: 0.5 });
		assert.equal(t.timedOut, true);
		assert.notEqual(t.exitCode, 0);
		await assert.rejects(ws.run("pwd", { cwd: "no/such/dir" }), NotExistError);
	});

	test("stream: chunks come as the command prints them", async () => {
		const s = ws.stream("for i in 1 2 3; do echo $i; sleep 0.3; done");
		const seen: Array<{ text: string; at: number }> = [];
		const t0 = Date.now();
		for await (const c of s) seen.push({ text: Buffer.from(c).toString(), at: Date.now() - t0 });
		assert.equal(seen.map((x) => x.text).join(""), "1\n2\n3\n");
		assert.ok(seen.length >= 2, "more than one chunk");
		assert.ok(seen[0].at < 500, `first chunk at ${seen[0].at} ms, before the command ended`);
		assert.equal((await s.exit).exitCode, 0);
		assert.equal((await ws.stream("exit 4").wait()).exitCode, 4);
	});

	test("cancellation: an aborted stream, a client-side timeout and a loop left early kill the remote tree", async () => {
		// Aborted by the caller, after output began; a child in the background too.
		const ac = new AbortController();
		const s = ws.stream("sleep 311 & echo started; sleep 312", { signal: ac.signal });
		await assert.rejects(
			(async () => {
				for await (const c of s) {
					if (Buffer.from(c).toString().includes("started")) {
						await eventually("both sleeps run", async () => (await running(ws, "sleep 31")).length === 2);
						ac.abort();
					}
				}
			})(),
			AbortError,
		);
		// The broker answered the exit line after killing the tree: nothing is left now.
		assert.deepEqual(await running(ws, "sleep 31"), []);

		// A client-side deadline is an abort too.
		const t0 = Date.now();
		await assert.rejects(ws.run("sleep 321", { signal: AbortSignal.timeout(500) }), AbortError);
		assert.ok(Date.now() - t0 < 5000);
		assert.deepEqual(await running(ws, "sleep 321"), []);

		// Leaving the loop early.
		for await (const c of ws.stream("echo go; sleep 331")) {
			assert.equal(Buffer.from(c).toString(), "go\n");
			break;
		}
		assert.deepEqual(await running(ws, "sleep 331"), []);

		// Aborted before any output (the request may not even be out yet).
		const ac2 = new AbortController();
		const p = ws.run("sleep 341", { signal: ac2.signal });
		await eventually("sleep 341 runs", async () => (await running(ws, "sleep 341")).length === 1);
		ac2.abort();
		await assert.rejects(p, AbortError);
		assert.deepEqual(await running(ws, "sleep 341"), []);
	});

	test("ps lists a workspace's live processes; killProcesses kills them by pid or all", async () => {
		const bg = await ws.processes.start("sleep 351");
		await eventually("sleep 351 listed", async () => (await running(ws, "sleep 351")).length === 1);
		const [pid] = (await running(ws, "sleep 351"))[0].split(" ");
		assert.equal(await ws.killProcesses([Number(pid)]), 1);
		assert.equal((await ws.processes.wait(bg.id, { timeout: 10 })).result?.exitCode, 143);
		assert.deepEqual(await running(ws, "sleep 351"), []);
		const bg2 = await ws.processes.start("sleep 352");
		await eventually("sleep 352 listed", async () => (await running(ws, "sleep 352")).length === 1);
		assert.ok((await ws.killProcesses()) >= 1);
		assert.equal((await ws.processes.wait(bg2.id, { timeout: 10 })).state, "exited");
		assert.deepEqual(await running(ws, "sleep 352"), []);
	});

	test("background processes: start, list, get, read by cursor, logs, sendStdin, closeStdin, signal, wait, kill", async () => {
		const p = await ws.processes.start("echo first; read line; echo got:$line; sleep 600", { stdin: true, tag: "reader" });
		assert.match(p.id, /^p-[0-9a-f]{16}$/);
		assert.equal(p.state, "running");
		assert.ok((await ws.processes.list()).some((x) => x.id === p.id && x.tag === "reader"));
		let r = await ws.processes.read(p.id);
		for (let i = 0; r.data.length === 0 && i < 50; i++) {
			await new Promise((res) => setTimeout(res, 100));
			r = await ws.processes.read(p.id);
		}
		assert.equal(Buffer.from(r.data).toString(), "first\n");
		assert.equal(r.cursor, 6);
		assert.equal(r.exit, undefined);
		assert.equal(await ws.processes.sendStdin(p.id, "hello\n"), 6);
		await eventually("got:hello", async () => Buffer.from((await ws.processes.read(p.id, r.cursor)).data).toString() === "got:hello\n");
		await ws.processes.signal(p.id, "SIGTERM");
		const ended = await ws.processes.wait(p.id, { timeout: 10 });
		assert.equal(ended.state, "exited");
		assert.equal(ended.result?.exitCode, 143);
		const events: LogEvent[] = [];
		for await (const ev of ws.processes.logs(p.id)) events.push(ev);
		assert.equal(outputOf(events), "first\ngot:hello\n");
		assert.equal(events.at(-1)?.type, "exit");
		const fromCursor: LogEvent[] = [];
		for await (const ev of ws.processes.logs(p.id, { cursor: 6 })) fromCursor.push(ev);
		assert.equal(outputOf(fromCursor, 6), "got:hello\n");

		const cat = await ws.processes.start({ command: "cat", stdin: true });
		await ws.processes.sendStdin(cat.id, "abc");
		await ws.processes.closeStdin(cat.id);
		const done = await ws.processes.wait(cat.id, { timeout: 10 });
		assert.equal(done.result?.exitCode, 0);
		assert.equal(Buffer.from((await ws.processes.read(cat.id)).data).toString(), "abc");
		assert.equal((await ws.processes.get(cat.id)).state, "exited");

		const long = await ws.processes.start("sleep 361 & sleep 362");
		assert.equal((await ws.processes.wait(long.id, { timeout: 0.2 })).state, "running");
		await eventually("both sleeps run", async () => (await running(ws, "sleep 36")).length === 2);
		const killed = await ws.processes.kill(long.id);
		assert.equal(killed.id, long.id);
		assert.deepEqual(await running(ws, "sleep 36"), []);
		await assert.rejects(ws.processes.get(long.id), (err: Error) => (err as { status?: number }).status === 404);
	});

	test("a followed log resumes by offset across cut connections, nothing lost or doubled", async () => {
		const proxy = await cuttingProxy(rb.url);
		const via = new Broker({ url: proxy.url, token: rb.token });
		try {
			const w = await via.get(ws.id);
			const p = await w.processes.start("for i in $(seq 1 30); do echo line-$i; sleep 0.05; done");
			const events: LogEvent[] = [];
			let cuts = 0;
			for await (const ev of w.processes.logs(p.id, { follow: true })) {
				events.push(ev);
				if (ev.type === "output" && cuts < 3 && events.length % 3 === 0) {
					cuts++;
					proxy.cutAll();
				}
			}
			assert.ok(cuts > 0);
			assert.equal(outputOf(events), Array.from({ length: 30 }, (_, i) => `line-${i + 1}\n`).join(""));
		} finally {
			via.close();
			proxy.close();
		}
	});

	test("a read is sent again once when its connection drops; a mutation never is", async () => {
		await ws.writeText("retry.txt", "still here\n");
		let proxy = await droppingProxy(rb.url, 1);
		let via = new Broker({ url: proxy.url, token: rb.token });
		try {
			const w = new Workspace(via.transport, ws.info);
			assert.equal(await w.readText("retry.txt"), "still here\n");
			assert.equal(proxy.connections(), 2, "one dropped, one retried");
		} finally {
			via.close();
			proxy.close();
		}
		proxy = await droppingProxy(rb.url, 2);
		via = new Broker({ url: proxy.url, token: rb.token });
		try {
			const w = new Workspace(via.transport, ws.info);
			await assert.rejects(w.readText("retry.txt"), (err: Error) => err instanceof ConnectionError && !err.mutation && /broke twice/.test(err.message));
			assert.equal(proxy.connections(), 2, "retried once, not more");
		} finally {
			via.close();
			proxy.close();
		}
		proxy = await droppingProxy(rb.url, 3);
		via = new Broker({ url: proxy.url, token: rb.token });
		try {
			const w = new Workspace(via.transport, ws.info);
			await assert.rejects(w.writeText("retry.txt", "changed\n"), (err: Error) => err instanceof ConnectionError && err.mutation && /may or may not/.test(err.message));
			await assert.rejects(w.processes.start("true"), ConnectionError);
			await assert.rejects(w.run("true"), ConnectionError);
			assert.equal(proxy.connections(), 3, "no mutation was sent again");
			await w.writeText("retry2.txt", "through\n");
		} finally {
			via.close();
			proxy.close();
		}
		assert.equal(await ws.readText("retry.txt"), "still here\n");
	});

	test("the environment: setEnv replaces it, secrets redacted and never answered", async () => {
		const info = await ws.setEnv([
			{ name: "PLAIN", value: "visible" },
			{ name: "SECRET", value: "s3cr3t-value", secret: true },
		]);
		assert.deepEqual(info.env, [{ name: "PLAIN" }, { name: "SECRET", secret: true }]);
		assert.equal((await ws.run("echo $PLAIN $SECRET")).text, "visible [REDACTED:SECRET]\n");
		await ws.setEnv([]);
		assert.equal((await ws.run("echo \"[$PLAIN]\"")).text, "[]\n");
	});

	test("tar in and out, streamed: uploadArchive/downloadArchive with the report, and upload/download through tar", async () => {
		const local = mkdtempSync(path.join(os.tmpdir(), "wsbroker-sdk-tar-"));
		try {
			mkdirSync(path.join(local, "in/sub"), { recursive: true });
			writeFileSync(path.join(local, "in/a.txt"), "A\n");
			writeFileSync(path.join(local, "in/sub/b.sh"), "#!/bin/sh\necho b\n", { mode: 0o755 });
			const up = await ws.upload(path.join(local, "in"), "tree");
			assert.equal(up.files, 2);
			assert.deepEqual(up.refused, []);
			assert.equal((await ws.run("tree/sub/b.sh")).text, "b\n");
			mkdirSync(path.join(local, "out"));
			const down = await ws.download("tree", path.join(local, "out"));
			assert.equal(down.files, 2);
			assert.equal(readFileSync(path.join(local, "out/a.txt"), "utf8"), "A\n");
			assert.equal(execFileSync("stat", ["-c", "%a", path.join(local, "out/sub/b.sh")], { encoding: "utf8" }).trim(), "755");
			// An entry that would land outside is refused by name; the rest lands.
			mkdirSync(path.join(local, "in2"));
			writeFileSync(path.join(local, "in2/a.txt"), "A\n");
			writeFileSync(path.join(local, "in2/x"), "X\n");
			const evil = execFileSync("tar", ["-C", path.join(local, "in2"), "-cf", "-", "--transform=s,^x$,../evil,", "a.txt", "x"]);
			const rep = await ws.uploadArchive("tree2", evil);
			assert.deepEqual(rep.refused.map((r) => r.name), ["../evil"]);
			assert.equal(rep.files, 1);
			// gzip down, through the web stream.
			const { tar, report } = await ws.downloadArchive("tree", { compression: "gzip" });
			const parts: Uint8Array[] = [];
			for await (const c of tar as unknown as AsyncIterable<Uint8Array>) parts.push(c);
			const gz = Buffer.concat(parts);
			assert.equal((await report).files, 2);
			assert.match(execFileSync("tar", ["-tzf", "-"], { input: gz, encoding: "utf8" }), /sub\/b\.sh/);
			await assert.rejects(ws.downloadArchive("no/such"), NotExistError);
		} finally {
			rmSync(local, { recursive: true, force: true });
		}
	});

	test("a terminal: size, resize, exit, with the built-in WebSocket client (and Node's when it has one)", async () => {
		for (const which of hasGlobalWebSocket ? (["builtin", "global"] as const) : (["builtin"] as const)) {
			const t = ws.pty({ command: "stty size; read x; stty size; echo got:$x; exit 5", rows: 30, cols: 100, webSocket: which });
			let out = "";
			t.onData((b) => (out += Buffer.from(b).toString()));
			await eventually(`${which}: first size`, async () => out.includes("30 100"));
			await t.resize(40, 120);
			await t.write("typed\r");
			const exit = await t.exit;
			assert.equal(exit.exitCode, 5, `${which}: ${out}`);
			assert.match(out, /40 120/);
			assert.match(out, /got:typed/);
		}
		if (!hasGlobalWebSocket) assert.throws(() => ws.pty({ command: "true", webSocket: "global" }), /no global WebSocket/);
		// Closing the session kills the command's tree.
		const t = ws.pty({ command: "echo ready; sleep 371" });
		let out = "";
		t.onData((b) => (out += Buffer.from(b).toString()));
		await eventually("ready", async () => out.includes("ready"));
		t.close();
		await assert.rejects(t.exit);
		await eventually("sleep 371 gone", async () => (await running(ws, "sleep 371")).length === 0);
		// A refused terminal says why, as the broker's error class, with either client.
		for (const which of hasGlobalWebSocket ? (["builtin", "global"] as const) : (["builtin"] as const)) {
			await assert.rejects(ws.pty({ command: "", webSocket: which }).exit, (err: Error) => err instanceof InvalidError && /empty/.test(err.message));
			await assert.rejects(ws.pty({ command: "true", rows: 5000, webSocket: which }).exit, InvalidError);
		}
	});

	test("100 concurrent calls of every kind on one Broker", async () => {
		await ws.writeText("conc.txt", "x".repeat(4096));
		const calls: Array<Promise<unknown>> = [];
		for (let i = 0; i < 100; i++) {
			switch (i % 4) {
				case 0:
					calls.push(ws.readBytes("conc.txt").then((b) => assert.equal(b.length, 4096)));
					break;
				case 1:
					calls.push(ws.run(`echo ${i}`).then((r) => assert.equal(r.text, `${i}\n`)));
					break;
				case 2:
					calls.push(ws.writeText(`conc/${i}.txt`, String(i), { mkdirs: true }));
					break;
				default:
					calls.push(ws.tools.ls(".").then((r) => assert.ok(!r.isError)));
			}
		}
		await Promise.all(calls);
		assert.equal((await ws.listdir("conc")).length, 25);
	});

	test("a 1 GiB download streams with bounded memory: open and downloadArchive", async () => {
		// Sparse: no disk used, 1 GiB read.
		// (The archive stays under the broker's 1 GiB maxArchiveBytes.)
		await ws.run("mkdir -p huge arch && truncate -s 1G huge/big && truncate -s 512M arch/a && truncate -s 256M arch/b");
		const gib = 1 << 30;
		const measure = async (stream: ReadableStream<Uint8Array>) => {
			globalThis.gc?.();
			const base = process.memoryUsage().rss;
			let peak = base;
			let total = 0;
			let n = 0;
			for await (const c of stream as unknown as AsyncIterable<Uint8Array>) {
				total += c.byteLength;
				if (++n % 256 === 0) peak = Math.max(peak, process.memoryUsage().rss);
			}
			peak = Math.max(peak, process.memoryUsage().rss);
			return { total, growthMiB: (peak - base) / (1 << 20) };
		};
		const m = await measure(await ws.open("huge/big"));
		assert.equal(m.total, gib);
		assert.ok(m.growthMiB <= 64, `open: RSS grew ${m.growthMiB.toFixed(1)} MiB`);
		const { tar, report } = await ws.downloadArchive("arch");
		const a = await measure(tar);
		assert.ok(a.total > 768 << 20);
		assert.ok(a.growthMiB <= 64, `archive: RSS grew ${a.growthMiB.toFixed(1)} MiB`);
		assert.equal((await report).files, 2);
		console.log(`# RSS growth: open 1 GiB ${m.growthMiB.toFixed(1)} MiB, tar 768 MiB ${a.growthMiB.toFixed(1)} MiB`);
	});
});
