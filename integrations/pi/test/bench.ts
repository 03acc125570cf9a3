// `npm run bench`: the cost of one tool call through the broker (brokerTools
// on a local-backend workspace over loopback HTTP) next to pi's built-in
// local tools on a host directory. Prints the median and p90 of N calls per
// tool. Not a test: nothing is asserted.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { AnyToolDefinition } from "../src/tools.js";
import { brokerToolsByName, piLocalTools, startBroker } from "./helpers.js";

const N = Number(process.env.BENCH_N ?? 50);
const backend = process.env.BENCH_BACKEND ?? "local";

const files: Record<string, string> = {
	"a.txt": Array.from({ length: 200 }, (_, i) => `line ${i} TODO`).join("\n"),
	"src/x.go": "package x\n// TODO\n",
	"src/y.go": "package y\n",
};

const calls: Array<[string, string, Record<string, unknown>]> = [
	["read", "read", { path: "a.txt" }],
	["write", "write", { path: "w.txt", content: "hello\n" }],
	["edit", "edit", {}], // alternates between two real edits, below
	["bash true", "bash", { command: "true" }],
	["grep", "grep", { pattern: "TODO" }],
	["find", "find", { pattern: "*.go" }],
	["ls", "ls", {}],
];

/** Milliseconds one call takes (errors count too: they are results). */
async function timeOnce(tool: AnyToolDefinition, args: Record<string, unknown>): Promise<number> {
	const t0 = process.hrtime.bigint();
	await tool.execute("b", args, undefined, undefined, undefined as never).catch(() => {});
	return Number(process.hrtime.bigint() - t0) / 1e6;
}

const q = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor(p * xs.length))].toFixed(2);

const broker = await startBroker({ docker: backend === "docker" });
const dir = mkdtempSync(path.join(os.tmpdir(), "wsbroker-pi-bench-"));
try {
	const ws = await broker.workspace(backend);
	for (const [rel, text] of Object.entries(files)) {
		mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
		writeFileSync(path.join(dir, rel), text);
		await broker.client.call({ method: "PUT", path: `/v1/workspaces/${ws.id}/files`, query: { path: rel, mkdirs: "1" }, body: Buffer.from(text) });
	}
	const local = piLocalTools(dir);
	const t = brokerToolsByName(broker, ws);
	const remote = t.tools;
	console.log(`${N} calls each; milliseconds; broker: ${backend} backend over loopback HTTP`);
	console.log("tool       | pi local p50 | p90    | broker p50 | p90");
	for (const [label, name, args] of calls) {
		// edit must change something: alternate between two texts.
		const a = name === "edit" ? { path: "a.txt", edits: [{ oldText: "line 1 TODO", newText: "line 1 DONE" }] } : args;
		const b = name === "edit" ? { path: "a.txt", edits: [{ oldText: "line 1 DONE", newText: "line 1 TODO" }] } : args;
		const run = async (tool: AnyToolDefinition) => {
			const xs: number[] = [];
			for (let i = 0; i < N; i++) xs.push(await timeOnce(tool, i % 2 === 0 ? a : b));
			return xs.sort((x, y) => x - y);
		};
		const l = await run(local[name]);
		const r = await run(remote[name]);
		console.log(`${label.padEnd(10)} | ${q(l, 0.5).padStart(12)} | ${q(l, 0.9).padStart(6)} | ${q(r, 0.5).padStart(10)} | ${q(r, 0.9).padStart(6)}`);
	}
	t.close();
} finally {
	await broker.stop();
	rmSync(dir, { recursive: true, force: true });
}
