// The process tools (src/process-tools.ts) against a real broker on the
// local backend. The Workspace they use is the SDK's (@wsbroker/sdk), whose
// own tests (integrations/typescript/test) cover processes, logs, stdin,
// signals, the environment, tar and terminals.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Workspace } from "@wsbroker/sdk";
import { processTools } from "../src/process-tools.js";
import { pi } from "../src/pi.js";
import type { AnyToolDefinition } from "../src/tools.js";
import { type RunningBroker, startBroker, textOf } from "./helpers.js";

describe("the process tools", () => {
	let broker: RunningBroker;
	let tools: Record<string, AnyToolDefinition>;

	before(async () => {
		broker = await startBroker();
		const w = new Workspace(broker.client, await broker.workspace("local"));
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
