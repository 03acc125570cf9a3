// The workspace routes beyond pi's seven operations (src/workspace.ts) and
// the process tools (src/process-tools.ts), against a real broker on the
// local backend: background processes, logs by cursor across a broken
// connection, stdin, signals, the workspace's environment, tar in and out,
// and a terminal.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import { BrokerClient } from "../src/client.js";
import { processTools } from "../src/process-tools.js";
import { pi } from "../src/pi.js";
import type { AnyToolDefinition } from "../src/tools.js";
import { type LogEvent, Workspace } from "../src/workspace.js";
import { type RunningBroker, rejection, startBroker, textOf } from "./helpers.js";

/** The output bytes of a log's events, checking each starts where the last ended. */
function outputOf(events: LogEvent[], from = 0): string {
	let at = from;
	const parts: Buffer[] = [];
	for (const ev of events) {
		if (ev.type === "output") {
			assert.equal(ev.offset, at, "output neither lost nor doubled");
			parts.push(ev.data);
			at += ev.data.length;
		}
	}
	return Buffer.concat(parts).toString("utf8");
}

async function collect(it: AsyncIterable<LogEvent>): Promise<LogEvent[]> {
	const out: LogEvent[] = [];
	for await (const ev of it) out.push(ev);
	return out;
}

/** A TCP proxy in front of the broker whose connections a test can cut. */
async function cuttingProxy(target: string): Promise<{ url: string; cutAll(): void; close(): void }> {
	const u = new URL(target);
	const live = new Set<net.Socket>();
	const server = net.createServer((down) => {
		const up = net.connect(Number(u.port), u.hostname);
		live.add(down);
		live.add(up);
		down.pipe(up).pipe(down);
		const drop = () => {
			live.delete(down);
			live.delete(up);
			down.destroy();
			up.destroy();
		};
		down.on("error", drop).on("close", drop);
		up.on("error", drop).on("close", drop);
	});
	await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
	const port = (server.address() as net.AddressInfo).port;
	return {
		url: `http://127.0.0.1:${port}`,
		cutAll: () => {
			for (const s of live) s.destroy();
		},
		close: () => server.close(),
	};
}

describe("workspace routes: processes, env, archives, terminals (local backend)", () => {
	let broker: RunningBroker;
	let ws: Workspace;

	before(async () => {
		broker = await startBroker();
		ws = new Workspace(broker.client, (await broker.workspace("local")).id);
	});
	after(async () => {
		await broker?.stop();
	});

	const untilOutput = async (id: string, want: string) => {
		for (let i = 0; i < 200; i++) {
			if (outputOf(await collect(ws.logs(id))).includes(want)) return;
			await new Promise((r) => setTimeout(r, 50));
		}
		assert.fail(`${id} never printed ${want}`);
	};

	test("a background server answers a second command, and is killed with its tree", async () => {
		// The server's loop runs in a background child of its shell, which
		// appends to beat while it lives.
		const server = await ws.startProcess({
			command: "echo ready; while :; do if [ -f ping ]; then echo pong > pong; rm ping; fi; date +%s%N >> beat; sleep 0.05; done & wait",
			tag: "server",
		});
		assert.match(server.id, /^p-[0-9a-f]{16}$/);
		assert.equal(server.state, "running");
		assert.equal(server.tag, "server");
		await untilOutput(server.id, "ready");
		const client = await ws.startProcess({ command: "touch ping; for i in $(seq 100); do [ -f pong ] && cat pong && exit 0; sleep 0.05; done; exit 1" });
		const done = await ws.waitProcess(client.id, 30);
		assert.equal(done.state, "exited");
		assert.equal(done.result?.exitCode, 0);
		assert.equal(outputOf(await collect(ws.logs(client.id))), "pong\n");

		const listed = await ws.backgroundProcesses();
		assert.deepEqual(listed.map((p) => p.id).sort(), [server.id, client.id].sort());

		const ended = await ws.removeProcess(server.id);
		assert.equal(ended.state, "exited");
		// Its background child went with it: beat stops growing.
		const beats = async () => (await broker.client.call({ method: "GET", path: `/v1/workspaces/${ws.id}/files`, query: { path: "beat" } })).length;
		const before = await beats();
		await new Promise((r) => setTimeout(r, 500));
		assert.equal(await beats(), before, "the server's child still runs after its removal");
		const err = await rejection(() => ws.process(server.id));
		assert.equal((err as { status?: number }).status, 404);
	});

	test("a followed log resumes by offset after its connection is cut, nothing lost or doubled", async () => {
		const proxy = await cuttingProxy(broker.url);
		const viaProxy = new Workspace(new BrokerClient(proxy.url, broker.token), ws.id);
		try {
			const p = await ws.startProcess({ command: "for i in $(seq 1 400); do echo line $i; sleep 0.005; done" });
			const events: LogEvent[] = [];
			let cuts = 0;
			for await (const ev of viaProxy.logs(p.id, { follow: true })) {
				events.push(ev);
				// Cut every connection a few times while output flows.
				if (ev.type === "output" && cuts < 3 && events.length % 5 === 0) {
					cuts++;
					proxy.cutAll();
				}
			}
			assert.ok(cuts > 0, "the connection was cut");
			const last = events[events.length - 1];
			assert.equal(last.type, "exit");
			const want = Array.from({ length: 400 }, (_, i) => `line ${i + 1}\n`).join("");
			assert.equal(outputOf(events), want);
			// And from a cursor of the caller's own.
			const from = Buffer.byteLength("line 1\nline 2\n");
			assert.equal(outputOf(await collect(ws.logs(p.id, { offset: from })), from), want.slice(from));
		} finally {
			viaProxy.client.close();
			proxy.close();
		}
	});

	test("stdin reaches the process, and close ends its input", async () => {
		const p = await ws.startProcess({ command: 'while read l; do echo "got $l"; done; echo eof', stdin: true });
		assert.equal(p.stdin, true);
		assert.equal(await ws.writeStdin(p.id, "a\n"), 2);
		assert.equal(await ws.writeStdin(p.id, "b\n", { close: true }), 2);
		const done = await ws.waitProcess(p.id, 30);
		assert.equal(done.result?.exitCode, 0);
		assert.equal(outputOf(await collect(ws.logs(p.id))), "got a\ngot b\neof\n");
		const err = await rejection(() => ws.writeStdin(p.id, "late\n"));
		assert.equal((err as { status?: number }).status, 400);
	});

	test("a signal reaches the process's tree", async () => {
		const p = await ws.startProcess({ command: "trap 'echo bye; exit 3' INT; echo ready; while :; do sleep 0.1; done" });
		await untilOutput(p.id, "ready");
		await ws.signalProcess(p.id, "SIGINT");
		const done = await ws.waitProcess(p.id, 30);
		assert.equal(done.result?.exitCode, 3);
		assert.equal(outputOf(await collect(ws.logs(p.id))), "ready\nbye\n");
	});

	test("the workspace's environment reaches commands, its secrets redacted and never answered", async () => {
		const info = await ws.setEnv([
			{ name: "MODE", value: "dev" },
			{ name: "API_TOKEN", value: "tok-4f9a1c2e7b", secret: true },
		]);
		assert.deepEqual(info.env, [{ name: "MODE" }, { name: "API_TOKEN", secret: true }]);
		assert.ok(!JSON.stringify(info).includes("tok-4f9a1c2e7b"));
		const p = await ws.startProcess({ command: 'echo "$MODE $API_TOKEN"' });
		await ws.waitProcess(p.id, 30);
		assert.equal(outputOf(await collect(ws.logs(p.id))), "dev [REDACTED:API_TOKEN]\n");
		await ws.setEnv([]);
	});

	test("a tar goes in and comes out whole; entries that would land outside are refused by name", async () => {
		const src = mkdtempSync(path.join(os.tmpdir(), "wsbroker-pi-tar-"));
		try {
			mkdirSync(path.join(src, "tree", "sub"), { recursive: true });
			writeFileSync(path.join(src, "tree", "a.txt"), "alpha\n");
			writeFileSync(path.join(src, "tree", "sub", "b.txt"), "beta\n");
			writeFileSync(path.join(src, "evil"), "outside\n");
			// GNU tar keeps a ../ name with -P: the entry a hostile archive would carry.
			const good = execFileSync("tar", ["-C", path.join(src, "tree"), "-czf", "-", "."]);
			const bad = execFileSync("tar", ["-C", src, "-cf", "-", "-P", "--transform=s,^evil,../evil,", "evil"], { stdio: ["ignore", "pipe", "ignore"] });

			const up = await ws.uploadArchive("repo", good);
			assert.equal(up.files, 2);
			assert.deepEqual(up.refused, []);
			const refused = await ws.uploadArchive("repo", bad, "none");
			assert.equal(refused.files, 0);
			assert.equal(refused.refused.length, 1);
			assert.equal(refused.refused[0].name, "../evil");
			const stray = await rejection(() => broker.client.call({ method: "GET", path: `/v1/workspaces/${ws.id}/files`, query: { path: "evil" } }));
			assert.equal((stray as { status?: number }).status, 404);

			const { tar, report } = await ws.downloadArchive("repo", "gzip");
			const chunks: Buffer[] = [];
			for await (const c of tar) chunks.push(c as Buffer);
			const r = await report;
			assert.equal(r.files, 2);
			const back = path.join(src, "back");
			mkdirSync(back);
			execFileSync("tar", ["-C", back, "-xzf", "-"], { input: Buffer.concat(chunks) });
			assert.equal(readFileSync(path.join(back, "a.txt"), "utf8"), "alpha\n");
			assert.equal(readFileSync(path.join(back, "sub", "b.txt"), "utf8"), "beta\n");
		} finally {
			rmSync(src, { recursive: true, force: true });
		}
	});

	// Node's own WebSocket client (Node 22+) sends the Authorization
	// header; Node 20 has none. `make test-pi` runs this file again under
	// Node 22 (pi 0.85.0 and 1.6.0), where it must not skip.
	const noWebSocket = (globalThis as { WebSocket?: unknown }).WebSocket
		? undefined
		: `Node ${process.versions.node} has no WebSocket client; the Node 22 runs of make test-pi cover terminals`;
	test("a terminal runs a command with its size, resizes, and reports the exit", { skip: noWebSocket }, async () => {
		const term = await ws.openTerminal({ command: "stty size; read l; stty size; echo got:$l; exit 4", rows: 30, cols: 100 });
		let seen = "";
		const saw = (want: string) =>
			new Promise<void>((resolve, reject) => {
				const t = setTimeout(() => reject(new Error(`the terminal never showed ${JSON.stringify(want)}; it showed ${JSON.stringify(seen)}`)), 20_000);
				const check = () => {
					if (seen.includes(want)) {
						clearTimeout(t);
						resolve();
					}
				};
				term.onData(check);
				check();
			});
		term.onData((b) => (seen += b.toString("utf8")));
		await saw("30 100");
		await term.resize(50, 132);
		await term.write("hello\r");
		const exit = await term.exit;
		assert.equal(exit.exitCode, 4);
		assert.match(seen, /50 132/);
		assert.match(seen, /got:hello/);
	});
	test("without a WebSocket client a terminal says what it needs", { skip: noWebSocket ? undefined : "this Node has a WebSocket client" }, async () => {
		const err = await rejection(() => ws.openTerminal({ command: "true" }));
		assert.match(err.message, /terminals need Node 22 or later/);
	});
});

describe("the process tools", () => {
	let broker: RunningBroker;
	let tools: Record<string, AnyToolDefinition>;

	before(async () => {
		broker = await startBroker();
		const w = new Workspace(broker.client, (await broker.workspace("local")).id);
		tools = Object.fromEntries(processTools(w, pi).map((t) => [t.name, t]));
	});
	after(async () => {
		await broker?.stop();
	});

	// biome-ignore lint: each tool's params differ.
	const call = async (name: string, params: any) => {
		// biome-ignore lint: the context is not used by these tools.
		const r = await tools[name].execute("call-1", params, undefined, undefined, undefined as any);
		return { text: textOf(r), details: r.details as { process?: { id: string; state: string } } };
	};

	test("start, read new output, write to stdin, list and kill", async () => {
		assert.deepEqual(Object.keys(tools), ["process_start", "process_output", "process_write", "process_kill", "process_list"]);
		const started = await call("process_start", { command: 'echo hello; while read l; do echo "echo $l"; done', stdin: true, tag: "repl", wait: 0.5 });
		const id = started.details.process?.id ?? "";
		assert.match(id, /^p-/);
		assert.equal(started.text, `hello\n[${id} [repl] running; 6 bytes of output so far; process_output for more]`);

		// Nothing new since the last read.
		const idle = await call("process_output", { id });
		assert.equal(idle.text, `[${id} [repl] running; 6 bytes of output so far; process_output for more]`);

		const wrote = await call("process_write", { id, input: "one\n" });
		assert.equal(wrote.text, `Wrote 4 bytes to ${id}.`);
		// The answer that has the new output starts with it (under load the
		// first polls may come before the shell echoed: nothing new yet).
		let more = "";
		for (let i = 0; i < 100 && !more.includes("echo one"); i++) {
			if (i > 0) await new Promise((r) => setTimeout(r, 50));
			more = (await call("process_output", { id })).text;
		}
		assert.match(more, /^echo one\n/);

		const listed = await call("process_list", {});
		assert.match(listed.text, new RegExp(`^${id}  running  \\[repl\\]  echo hello`));

		await call("process_write", { id, input: "two\n" });
		await new Promise((r) => setTimeout(r, 300));
		const killed = await call("process_kill", { id });
		assert.match(killed.text, /^echo two\n\[p-[0-9a-f]{16} \[repl\] .*; removed\]$/);
		assert.equal((await call("process_list", {})).text, "No background processes.");
	});

	test("a command that ends at once reports its exit code; a wait reports the end", async () => {
		const quick = await call("process_start", { command: "echo bad >&2; exit 7", wait: 5 });
		assert.equal(quick.text, `bad\n[${quick.details.process?.id} exited with code 7]`);
		const slow = await call("process_start", { command: "sleep 0.5; echo late", wait: 0 });
		const id = slow.details.process?.id ?? "";
		const waited = await call("process_output", { id, wait: 10 });
		assert.equal(waited.text, `late\n[${id} exited with code 0]`);
		const sig = await call("process_start", { command: "sleep 30", wait: 0 });
		const sid = sig.details.process?.id ?? "";
		assert.equal((await call("process_kill", { id: sid, signal: "SIGTERM" })).text, `Sent SIGTERM to ${sid}.`);
		const after = await call("process_output", { id: sid, wait: 10 });
		assert.equal(after.text, `[${sid} killed by SIGTERM (exit code 143)]`);
	});
});
