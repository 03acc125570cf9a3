// Tools that give the model handles on long-running commands (a dev server,
// a test watcher, a REPL) in the workspace: pi's bash runs one command per
// call and waits for it, so these start a background process, read its
// output by cursor, write to its stdin, and stop it (docs/api.md,
// "Background processes"). Their output is cut as pi cuts bash's.
import type { Pi } from "./host.js";
import type { ExecExit } from "./client.js";
import type { AnyToolDefinition } from "./tools.js";
import type { BackgroundProcess, SignalName, Workspace } from "@wsbroker/sdk";

/** The names of the process tools, in the order they are registered. */
export const PROCESS_TOOL_NAMES = ["process_start", "process_output", "process_write", "process_kill", "process_list"] as const;

// How long process_start waits for early output (or an early exit) by
// default, and the most any wait may take.
const START_WAIT_S = 1;
const MAX_WAIT_S = 600;

const SIGNALS: SignalName[] = ["SIGINT", "SIGTERM", "SIGKILL", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"];

interface ToolResultOf {
	content: Array<{ type: "text"; text: string }>;
	details: { process?: BackgroundProcess; processes?: BackgroundProcess[]; offset?: number };
}

/**
 * The process tools over one workspace. `ws` may be a function, for a
 * workspace known only later (the extension connects at session start).
 * pi is the running pi's module: its output cutting and size format.
 */
export function processTools(ws: Workspace | (() => Workspace), pi: Pi): AnyToolDefinition[] {
	const { truncateTail, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, formatSize } = pi;
	const get = typeof ws === "function" ? ws : () => ws;
	// Where the model's last read of each process ended, so process_output
	// answers what is new without the model keeping offsets.
	const cursors = new Map<string, number>();

	const readNew = async (w: Workspace, id: string, offset?: number, signal?: AbortSignal): Promise<{ text: string; next: number; skipped: number }> => {
		const from = offset ?? cursors.get(id) ?? 0;
		const chunks: Uint8Array[] = [];
		let next = from;
		let skipped = 0;
		for await (const ev of w.processes.logs(id, { cursor: from, signal })) {
			if (ev.type === "output") {
				chunks.push(ev.data);
				next = ev.offset + ev.data.length;
			} else if (ev.type === "dropped") {
				skipped += ev.next - ev.offset;
				next = ev.next;
			} else next = ev.offset;
		}
		cursors.set(id, next);
		return { text: Buffer.concat(chunks).toString("utf8"), next, skipped };
	};

	const report = async (w: Workspace, p: BackgroundProcess, signal?: AbortSignal, offset?: number): Promise<ToolResultOf> => {
		const out = await readNew(w, p.id, offset, signal);
		const cut = truncateTail(out.text, { maxLines: DEFAULT_MAX_LINES, maxBytes: DEFAULT_MAX_BYTES });
		const parts: string[] = [];
		if (out.skipped > 0) parts.push(`[${formatSize(out.skipped)} of earlier output no longer kept]`);
		if (cut.truncated) parts.push(`[showing the last ${cut.outputLines} of ${cut.totalLines} lines]`);
		if (cut.content !== "") parts.push(cut.content.replace(/\n$/, ""));
		parts.push(statusLine(p, out.next));
		return { content: [{ type: "text", text: parts.join("\n") }], details: { process: p, offset: out.next } };
	};

	const start: AnyToolDefinition = {
		name: "process_start",
		label: "process_start",
		description:
			"Start a long-running command in the background in the workspace (a dev server, a watcher, a REPL) and return its id at once, with what it printed in its first seconds. " +
			"Use bash for commands that finish; use this for ones that keep running. Read more output with process_output, type at it with process_write (start it with stdin: true), stop it with process_kill.",
		promptSnippet: "Start a long-running command in the background and get a handle on it",
		parameters: {
			type: "object",
			properties: {
				command: { type: "string", description: "The command, run with sh -c in the workspace" },
				cwd: { type: "string", description: "Directory relative to the workspace root (default: the root)" },
				tag: { type: "string", description: "A short label shown in process_list" },
				timeout: { type: "number", description: "Kill it after this many seconds (default: never)" },
				stdin: { type: "boolean", description: "Keep its stdin open for process_write" },
				wait: { type: "number", description: `Seconds to wait for early output or an early exit (default ${START_WAIT_S})` },
			},
			required: ["command"],
			additionalProperties: false,
		},
		async execute(_id, params: { command: string; cwd?: string; tag?: string; timeout?: number; stdin?: boolean; wait?: number }, signal) {
			const w = get();
			const p = await w.processes.start({ command: params.command, cwd: params.cwd, tag: params.tag, timeout: params.timeout, stdin: params.stdin });
			const now = await w.processes.wait(p.id, { timeout: clampWait(params.wait ?? START_WAIT_S), signal });
			return report(w, now, signal, 0);
		},
	};

	const output: AnyToolDefinition = {
		name: "process_output",
		label: "process_output",
		description:
			"Read a background process's output: what it printed since the last read (or from byte offset `offset`), and whether it still runs. " +
			`With wait, first wait up to that many seconds for it to end. Output is cut to the last ${DEFAULT_MAX_LINES} lines or ${formatSize(DEFAULT_MAX_BYTES)}.`,
		parameters: {
			type: "object",
			properties: {
				id: { type: "string", description: "The process id (p-...)" },
				wait: { type: "number", description: "Seconds to wait for it to end first (default 0)" },
				offset: { type: "number", description: "Read from this byte offset instead of where the last read ended" },
			},
			required: ["id"],
			additionalProperties: false,
		},
		async execute(_id, params: { id: string; wait?: number; offset?: number }, signal) {
			const w = get();
			const p = params.wait ? await w.processes.wait(params.id, { timeout: clampWait(params.wait), signal }) : await w.processes.get(params.id);
			return report(w, p, signal, params.offset);
		},
	};

	const write: AnyToolDefinition = {
		name: "process_write",
		label: "process_write",
		description: "Write text to the stdin of a background process started with stdin: true (add \\n to end a line); close: true closes its stdin after the text.",
		parameters: {
			type: "object",
			properties: {
				id: { type: "string", description: "The process id (p-...)" },
				input: { type: "string", description: "The text to write" },
				close: { type: "boolean", description: "Close stdin after writing" },
			},
			required: ["id", "input"],
			additionalProperties: false,
		},
		async execute(_id, params: { id: string; input: string; close?: boolean }, signal) {
			const n = await get().processes.sendStdin(params.id, params.input, { close: params.close, signal });
			const text = `Wrote ${n} bytes to ${params.id}${params.close ? " and closed its stdin" : ""}.`;
			return { content: [{ type: "text", text }], details: {} };
		},
	};

	const kill: AnyToolDefinition = {
		name: "process_kill",
		label: "process_kill",
		description:
			"Stop a background process: without signal, kill its whole process tree and forget it (its unread output is returned first); " +
			`with signal (${SIGNALS.join(", ")}), only send that signal to its tree.`,
		parameters: {
			type: "object",
			properties: {
				id: { type: "string", description: "The process id (p-...)" },
				signal: { type: "string", enum: SIGNALS, description: "Send this signal instead of killing it" },
			},
			required: ["id"],
			additionalProperties: false,
		},
		async execute(_id, params: { id: string; signal?: SignalName }, signal) {
			const w = get();
			if (params.signal) {
				await w.processes.signal(params.id, params.signal);
				return { content: [{ type: "text", text: `Sent ${params.signal} to ${params.id}.` }], details: {} };
			}
			// Its unread output first: removing it deletes its log.
			const last = await report(w, await w.processes.get(params.id), signal);
			const ended = await w.processes.kill(params.id);
			cursors.delete(params.id);
			const text = last.content[0].text.replace(/[^\n]*$/, statusLine(ended, last.details.offset ?? 0, true));
			return { content: [{ type: "text", text }], details: { process: ended } };
		},
	};

	const list: AnyToolDefinition = {
		name: "process_list",
		label: "process_list",
		description: "List the workspace's background processes: id, state, tag and command.",
		parameters: { type: "object", properties: {}, additionalProperties: false },
		async execute() {
			const ps = await get().processes.list();
			const lines = ps.map((p) => `${p.id}  ${stateOf(p.state, p.result, p.error)}${p.tag ? `  [${p.tag}]` : ""}  ${p.command}`);
			return { content: [{ type: "text", text: lines.length > 0 ? lines.join("\n") : "No background processes." }], details: { processes: ps } };
		},
	};

	return [start, output, write, kill, list];
}

function clampWait(s: number): number {
	return Math.min(Math.max(s, 0), MAX_WAIT_S);
}

function stateOf(state: BackgroundProcess["state"], result?: ExecExit, error?: string): string {
	if (state === "running") return "running";
	if (state === "failed") return `failed: ${error ?? "unknown error"}`;
	if (!result) return "exited";
	if (result.timedOut) return `timed out (exit code ${result.exitCode})`;
	if (result.signal) return `killed by ${result.signal} (exit code ${result.exitCode})`;
	return `exited with code ${result.exitCode}`;
}

function statusLine(p: BackgroundProcess, next: number, removed = false): string {
	const what = `${p.id}${p.tag ? ` [${p.tag}]` : ""}`;
	if (removed) return `[${what} ${p.state === "running" ? "killed" : stateOf(p.state, p.result, p.error)}; removed]`;
	if (p.state === "running") return `[${what} running; ${next} bytes of output so far; process_output for more]`;
	return `[${what} ${stateOf(p.state, p.result, p.error)}]`;
}
