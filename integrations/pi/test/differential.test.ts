// The same scripted tool calls through pi's built-in local tools on a
// fixture directory and, on an identical workspace, through brokerTools (pi's
// own tools over the broker's operations) and through the broker's own Go
// tools (tools/, as MCP and `POST /tools/<name>` serve them). The
// results must match modulo the root path; each known difference is listed
// here with its README entry, and the test fails when one disappears (so the
// README stays true).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import { WorkspaceRoutes } from "../src/operations.js";
import { pi } from "../src/pi.js";
import type { ToolResult } from "../src/client.js";
import type { AnyToolDefinition } from "../src/tools.js";
import { type RunningBroker, type SshTarget, brokerToolsByName, dockerUnavailable, kubeUnavailable, makePng, piLocalTools, sshUnavailable, startBroker, startSshd } from "./helpers.js";

function hasCommand(name: string): boolean {
	try {
		execFileSync("sh", ["-c", `command -v ${name}`], { stdio: "ignore" });
		return true;
	} catch {
		return false;
	}
}

// pi must not try to download rg/fd in a test.
process.env.PI_OFFLINE = "1";

const FIXTURE: Record<string, string | Buffer> = {
	"hello.txt": "hello world\n",
	"src/main.go": 'package main\n\n// TODO: flags\nfunc main() {\n\tprintln("hi")\n}\n',
	"src/util/helper.go": "package util\n\n// Helper helps.\nfunc Helper() int { return 42 } // TODO later\n",
	"src/util/helper_test.go": "package util\n\nimport \"testing\"\n\nfunc TestHelper(t *testing.T) {}\n",
	"docs/guide.md": "# Guide\n\nIt\u2019s \u201cquoted\u201d \u2014 with trailing   \nand\u00a0nbsp.\n",
	".hidden/secret.txt": "TODO hidden\n",
	".gitignore": "build/\n*.log\n",
	"build/out.txt": "TODO built\n",
	"app.log": "TODO log\n",
	"crlf.txt": "one\r\ntwo\r\nthree\r\n",
	"big.txt": Array.from({ length: 3000 }, (_, i) => `row ${i + 1}`).join("\n"),
	"wide.txt": `${"w".repeat(600)} TODO wide\n`,
	"image.png": makePng(3, 2),
	"node_modules/pkg/index.js": "// TODO vendored\n",
	"café.txt": "unicode name\n",
	"empty/.keep": "",
	// Both sides are a git repository for ripgrep and fd (which honour
	// .gitignore only inside one unless told otherwise; see fdShim).
	".git/HEAD": "ref: refs/heads/main\n",
};

type Call = { name: string; tool: string; args: Record<string, unknown> };

// The script: every tool, successes and failures, notices, limits.
const SCRIPT: Call[] = [
	{ name: "read small", tool: "read", args: { path: "hello.txt" } },
	{ name: "read truncated", tool: "read", args: { path: "big.txt" } },
	{ name: "read offset", tool: "read", args: { path: "big.txt", offset: 2995 } },
	{ name: "read limit", tool: "read", args: { path: "big.txt", offset: 10, limit: 5 } },
	{ name: "read beyond", tool: "read", args: { path: "hello.txt", offset: 50 } },
	{ name: "read missing", tool: "read", args: { path: "missing.txt" } },
	{ name: "read dir", tool: "read", args: { path: "src" } },
	{ name: "read image", tool: "read", args: { path: "image.png" } },
	{ name: "read unicode", tool: "read", args: { path: "café.txt" } },
	{ name: "write new", tool: "write", args: { path: "new/dir/file.txt", content: "fresh €\n" } },
	{ name: "read written", tool: "read", args: { path: "new/dir/file.txt" } },
	{ name: "write over", tool: "write", args: { path: "hello.txt", content: "hello world\nsecond line\n" } },
	{ name: "edit exact", tool: "edit", args: { path: "hello.txt", edits: [{ oldText: "second", newText: "2nd" }] } },
	{
		name: "edit fuzzy",
		tool: "edit",
		args: { path: "docs/guide.md", edits: [{ oldText: "It's \"quoted\" - with trailing\nand nbsp.", newText: "Plain." }] },
	},
	{ name: "read fuzzy result", tool: "read", args: { path: "docs/guide.md" } },
	{ name: "edit crlf", tool: "edit", args: { path: "crlf.txt", edits: [{ oldText: "two\n", newText: "TWO\n" }] } },
	{ name: "bash crlf kept", tool: "bash", args: { command: "od -c crlf.txt | head -3" } },
	{ name: "edit multi", tool: "edit", args: { path: "src/main.go", edits: [{ oldText: "package main", newText: "package app" }, { oldText: "hi", newText: "ho" }] } },
	{ name: "edit not found", tool: "edit", args: { path: "hello.txt", edits: [{ oldText: "absent", newText: "x" }] } },
	{ name: "edit duplicate", tool: "edit", args: { path: "big.txt", edits: [{ oldText: "row 1", newText: "x" }] } },
	{ name: "edit missing file", tool: "edit", args: { path: "nope.txt", edits: [{ oldText: "a", newText: "b" }] } },
	{ name: "edit overlap", tool: "edit", args: { path: "hello.txt", edits: [{ oldText: "hello world", newText: "a" }, { oldText: "world", newText: "b" }] } },
	{ name: "bash echo", tool: "bash", args: { command: "echo hello; echo oops >&2" } },
	{ name: "bash pwd", tool: "bash", args: { command: "pwd" } },
	{ name: "bash cat", tool: "bash", args: { command: "cat hello.txt new/dir/file.txt" } },
	{ name: "bash exit", tool: "bash", args: { command: "echo failing; exit 2" } },
	{ name: "bash no output", tool: "bash", args: { command: "true" } },
	{ name: "bash timeout", tool: "bash", args: { command: "echo waiting; sleep 20", timeout: 1 } },
	{ name: "bash signal", tool: "bash", args: { command: "kill -TERM $$" } },
	{ name: "grep basic", tool: "grep", args: { pattern: "TODO" } },
	{ name: "grep glob", tool: "grep", args: { pattern: "todo", glob: "*.go", ignoreCase: true } },
	{ name: "grep literal", tool: "grep", args: { pattern: "return 42 }", literal: true } },
	{ name: "grep context", tool: "grep", args: { pattern: "TODO: flags", path: "src", context: 1 } },
	{ name: "grep limit", tool: "grep", args: { pattern: "row 1", path: "big.txt", limit: 3 } },
	{ name: "grep long line", tool: "grep", args: { pattern: "TODO wide" } },
	{ name: "grep none", tool: "grep", args: { pattern: "no-such-text-anywhere" } },
	{ name: "grep bad regex", tool: "grep", args: { pattern: "(" } },
	{ name: "grep missing path", tool: "grep", args: { pattern: "x", path: "nowhere" } },
	{ name: "find go", tool: "find", args: { pattern: "*.go" } },
	{ name: "find path glob", tool: "find", args: { pattern: "src/**/*_test.go" } },
	{ name: "find ignored", tool: "find", args: { pattern: "*.log" } },
	{ name: "find hidden", tool: "find", args: { pattern: "secret.txt" } },
	{ name: "find limit", tool: "find", args: { pattern: "main.go", limit: 1 } },
	{ name: "find none", tool: "find", args: { pattern: "*.rs" } },
	{ name: "find missing path", tool: "find", args: { pattern: "*", path: "nowhere" } },
	{ name: "ls root", tool: "ls", args: {} },
	{ name: "ls sub", tool: "ls", args: { path: "src" } },
	{ name: "ls limit", tool: "ls", args: { path: ".", limit: 3 } },
	{ name: "ls empty", tool: "ls", args: { path: "new/dir" } },
	{ name: "ls missing", tool: "ls", args: { path: "nowhere" } },
	{ name: "ls file", tool: "ls", args: { path: "hello.txt" } },
	// Last: the broker side keeps the full output in the workspace.
	{ name: "bash truncated", tool: "bash", args: { command: "seq 3000" } },
	// A non-zero exit after truncated output: pi 1.x returns an error result
	// with its details; pi 0.85 throws (no details). The broker follows 1.x.
	{ name: "bash truncated exit", tool: "bash", args: { command: "seq 3000; exit 3" } },
	{ name: "ls after full output", tool: "ls", args: {} },
];

// Tools whose output order is the walk's (ripgrep and fd walk in parallel):
// their result lines are compared as sets.
const UNORDERED = new Set(["grep", "find"]);

type Known = Record<string, { reason: string; versions?: string[] }>;

/**
 * Known differences of brokerTools (pi's own tools over brokerOperations,
 * grep and find from the broker) from pi's built-in tools: step name -> the
 * README entry that explains it, and the pi versions that show it (all when
 * absent). The test asserts these still differ, so the list cannot go stale.
 */
const KNOWN: Known = {
	// pi up to 0.85.x reports a signal-killed command as success (exitCode
	// null, pi issue #9577); the broker reports 128+N like a shell and pi 1.x.
	"bash signal": { reason: "signal exit codes", versions: ["0.73.1", "0.85.0"] },
	// The broker's find follows pi 1.x: the limit notice only when more
	// results exist (up to 0.85: whenever `limit` results were found).
	"find limit": { reason: "find limit notice", versions: ["0.73.1", "0.85.0"] },
	// pi's fd path passes fd's own error text through; the broker says
	// `Path not found: <path>` as pi's custom-glob branch does.
	"find missing path": { reason: "find on a missing path" },
	// The broker side keeps bash's full output inside the workspace.
	"ls after full output": { reason: "bash full output in the workspace" },
};

/**
 * Known differences of the broker's own tools (tools/, what MCP clients and
 * `POST /tools/<name>` get) from pi's built-in tools. They follow the newest
 * pi (docs/pi-contract.md), so most entries are older pi's behaviour.
 */
const { "ls after full output": _inTree, ...SHARED_KNOWN } = KNOWN;
const SERVER_KNOWN: Known = {
	// (the broker's own bash keeps its full output out of the workspace's
	// tree, as pi does: ls after it is the same)
	...SHARED_KNOWN,
	// pi 0.73.1 counts the trailing newline's empty line (`1002-3001 of
	// 3001`); the spill file's path differs on every version and is
	// normalized away.
	"bash truncated": { reason: "bash full output lines", versions: ["0.73.1"] },
	// pi up to 0.85 throws on a non-zero exit, so its error has no details;
	// the broker returns pi 1.x's error result with the truncation details.
	"bash truncated exit": { reason: "non-zero exit keeps details", versions: ["0.73.1", "0.85.0"] },
	// pi 0.73.1 still said `Successfully wrote <n> bytes to <path>`.
	"write new": { reason: "write's text", versions: ["0.73.1"] },
	"write over": { reason: "write's text", versions: ["0.73.1"] },
	// edit's details.patch is pi >= 0.75.5; a fuzzy match rewrote the whole
	// normalized file before 0.79.9 (the diff shows the normalized lines).
	"edit exact": { reason: "edit's patch", versions: ["0.73.1"] },
	"edit fuzzy": { reason: "edit's patch, fuzzy edits keep untouched lines", versions: ["0.73.1"] },
	"edit crlf": { reason: "edit's patch", versions: ["0.73.1"] },
	"edit multi": { reason: "edit's patch", versions: ["0.73.1"] },
};

interface Outcome {
	isError: boolean;
	text: string;
	images: string[];
	details?: string;
}

async function run(tool: AnyToolDefinition, args: Record<string, unknown>): Promise<Outcome> {
	try {
		const r = await tool.execute("diff", args, undefined, undefined, undefined as never);
		return {
			// pi 1.x returns some failures (a non-zero exit) as error results.
			isError: (r as { isError?: boolean }).isError === true,
			text: r.content.flatMap((c) => (c.type === "text" ? [c.text] : [])).join("\n"),
			images: r.content.flatMap((c) => (c.type === "image" ? [c.mimeType] : [])),
			details: r.details === undefined ? undefined : JSON.stringify(r.details),
		};
	} catch (err) {
		return { isError: true, text: (err as Error).message, images: [] };
	}
}

/**
 * Replaces the root with <ROOT> and spill file paths with <FULL>; sorts the
 * result lines (not the notice) of unordered tools.
 */
function normalize(o: Outcome, root: string, tool: string): Outcome {
	const norm = (t: string) =>
		t
			.split(root)
			.join("<ROOT>")
			.replace(/[^\s"]*pi-bash-[0-9a-f]{16}\.log/g, "<FULL>")
			.replace(/\/wsbroker-output\/bash-[0-9a-f]{16}\.log/g, "<FULL>");
	let text = norm(o.text);
	const details = o.details === undefined ? undefined : norm(o.details);
	if (UNORDERED.has(tool) && !o.isError) {
		const [body, ...notice] = text.split("\n\n[");
		text = [body.split("\n").sort().join("\n"), ...notice].join("\n\n[");
	}
	return { ...o, text, details };
}

/**
 * pi runs `fd --no-require-git`, a flag Debian's fd 8.6 (fdfind) lacks. The
 * shim drops it; the fixture is a git repository, so .gitignore applies the
 * same way.
 */
function fdShim(dir: string): void {
	const fd = path.join(dir, "fd");
	writeFileSync(fd, '#!/bin/sh\nfor a; do shift; [ "$a" = --no-require-git ] || set -- "$@" "$a"; done\nexec fdfind "$@"\n', { mode: 0o755 });
	process.env.PATH = `${dir}${path.delimiter}${process.env.PATH}`;
}

/** The broker's own seven tools (tools/ in Go), called over HTTP. */
function serverTools(ws: WorkspaceRoutes): Record<string, AnyToolDefinition> {
	const names = ["read", "write", "edit", "bash", "grep", "find", "ls"];
	return Object.fromEntries(
		names.map((name) => [
			name,
			{
				name,
				// The wire result as it is (callTool throws on isError, as
				// pi 0.85's tools did, which would drop an error's details).
				execute: async (_id: string, params: unknown, signal?: AbortSignal) => {
					const r = await ws.client.json<ToolResult>({
						method: "POST",
						path: `/v1/workspaces/${encodeURIComponent(ws.id)}/tools/${encodeURIComponent(name)}`,
						body: JSON.stringify(params ?? {}),
						contentType: "application/json",
						signal,
					});
					if (r.isError && r.details == null) throw new Error(r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n"));
					return { content: r.content, details: r.details ?? undefined, isError: r.isError };
				},
			},
		]),
	) as unknown as Record<string, AnyToolDefinition>;
}

type Side = "brokerTools" | "server";

for (const [backend, side] of [
	["local", "brokerTools"],
	["docker", "brokerTools"],
	["ssh", "brokerTools"],
	["local", "server"],
	["docker", "server"],
	["ssh", "server"],
	["kubernetes", "brokerTools"],
	["kubernetes", "server"],
] as const) {
	const skip =
		backend === "docker" ? dockerUnavailable() : backend === "ssh" ? sshUnavailable() : backend === "kubernetes" ? kubeUnavailable() : undefined;
	const what = side === "server" ? "the broker's own tools" : "brokerTools";
	describe(`differential: pi ${pi.VERSION}'s built-in tools vs ${what} (${backend} backend)`, { skip }, () => {
		let broker: RunningBroker;
		let sshd: SshTarget | undefined;
		let fixture: string;
		let shimDir: string;
		let root: string;
		let local: Record<string, AnyToolDefinition>;
		let remote: Record<string, AnyToolDefinition>;

		before(async () => {
			fixture = mkdtempSync(path.join(os.tmpdir(), "wsbroker-pi-fixture-"));
			shimDir = mkdtempSync(path.join(os.tmpdir(), "wsbroker-pi-shim-"));
			if (!hasCommand("fd") && hasCommand("fdfind")) fdShim(shimDir);
			if (backend === "ssh") sshd = await startSshd();
			broker = await startBroker({
				docker: backend === "docker",
				ssh: sshd,
				kubeconfig: backend === "kubernetes" ? process.env.WSB_KUBECONFIG : undefined,
			});
			const ws = await broker.workspace(backend, backend === "ssh" ? { host: "vm" } : undefined);
			root = ws.root;
			for (const [rel, data] of Object.entries(FIXTURE)) {
				mkdirSync(path.dirname(path.join(fixture, rel)), { recursive: true });
				writeFileSync(path.join(fixture, rel), data);
				await broker.client.call({
					method: "PUT",
					path: `/v1/workspaces/${ws.id}/files`,
					query: { path: rel, mkdirs: "1" },
					body: Buffer.from(data),
				});
			}
			local = piLocalTools(fixture);
			remote = (side as Side) === "server" ? serverTools(new WorkspaceRoutes(broker.client, ws.id)) : brokerToolsByName(broker, ws).tools;
		});
		after(async () => {
			await broker?.stop();
			sshd?.stop();
			rmSync(fixture, { recursive: true, force: true });
			rmSync(shimDir, { recursive: true, force: true });
		});

		// One sequence, in order: later steps see earlier writes and edits.
		test("the script gives the same results", async () => {
			const known: Record<string, string> = Object.fromEntries(
				Object.entries(side === "server" ? SERVER_KNOWN : KNOWN)
					.filter(([, k]) => !k.versions || k.versions.includes(pi.VERSION))
					.map(([name, k]) => [name, k.reason]),
			);
			const unexpected: string[] = [];
			const stale: string[] = [];
			for (const call of SCRIPT) {
				const raw = await run(local[call.tool], call.args);
				// pi's built-in bash leaves its full-output file in the host's temp dir.
				for (const f of raw.text.match(/\S*pi-bash-[0-9a-f]{16}\.log/g) ?? []) rmSync(f, { force: true });
				const a = normalize(raw, fixture, call.tool);
				const b = normalize(await run(remote[call.tool], call.args), root, call.tool);
				let same = false;
				try {
					assert.deepEqual(b, a);
					same = true;
				} catch (err) {
					if (!(call.name in known)) unexpected.push(`${call.name}:\n${(err as Error).message}`);
				}
				if (same && call.name in known) stale.push(call.name);
				if (process.env.DIFF_REPORT && !same) {
					console.log(`--- ${call.name} (${known[call.name] ?? "UNEXPECTED"})\nlocal:  ${JSON.stringify(a)}\nbroker: ${JSON.stringify(b)}`);
				}
			}
			assert.deepEqual(unexpected, [], unexpected.join("\n\n"));
			assert.deepEqual(stale, [], `now equal, drop from KNOWN and the README: ${stale.join(", ")}`);
		});
	});
}
