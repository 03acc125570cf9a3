// pi's seven tools run by the broker (POST /tools/{name}): results are pi's
// ({content, details, isError}), with pi's truncation, notices and texts. A
// tool's failure is a result with isError, as the model sees it; only a
// call the broker refuses (an unknown workspace, a bad body) throws.
import type { Transport } from "./http.js";
import type { ToolResult } from "./types.js";

/** One edit of the edit tool: oldText must match once. */
export interface Edit {
	oldText: string;
	newText: string;
}

/** `ws.tools.read("a.txt")`, `ws.tools.bash("make test", {timeout: 60})`, ... */
export class Tools {
	constructor(
		private readonly t: Transport,
		private readonly prefix: string,
	) {}

	/** Any tool by name with its arguments (the broker's GET /v1/tools lists them). */
	call(name: string, params: unknown, opts: { signal?: AbortSignal } = {}): Promise<ToolResult> {
		return this.t.json({
			method: "POST",
			path: `${this.prefix}/tools/${encodeURIComponent(name)}`,
			body: JSON.stringify(params ?? {}),
			contentType: "application/json",
			signal: opts.signal,
			// read, grep, find and ls change nothing: safe to send again.
			idempotent: name === "read" || name === "grep" || name === "find" || name === "ls",
		});
	}

	read(path: string, opts: { offset?: number; limit?: number; signal?: AbortSignal } = {}): Promise<ToolResult> {
		const { signal, ...rest } = opts;
		return this.call("read", { path, ...rest }, { signal });
	}

	write(path: string, content: string, opts: { signal?: AbortSignal } = {}): Promise<ToolResult> {
		return this.call("write", { path, content }, opts);
	}

	edit(path: string, edits: Edit[], opts: { signal?: AbortSignal } = {}): Promise<ToolResult> {
		return this.call("edit", { path, edits }, opts);
	}

	/** Aborting the signal kills the command's tree. */
	bash(command: string, opts: { timeout?: number; signal?: AbortSignal } = {}): Promise<ToolResult> {
		const { signal, ...rest } = opts;
		return this.call("bash", { command, ...rest }, { signal });
	}

	grep(pattern: string, opts: { path?: string; glob?: string; ignoreCase?: boolean; literal?: boolean; context?: number; limit?: number; signal?: AbortSignal } = {}): Promise<ToolResult> {
		const { signal, ...rest } = opts;
		return this.call("grep", { pattern, ...rest }, { signal });
	}

	find(pattern: string, opts: { path?: string; limit?: number; signal?: AbortSignal } = {}): Promise<ToolResult> {
		const { signal, ...rest } = opts;
		return this.call("find", { pattern, ...rest }, { signal });
	}

	ls(path?: string, opts: { limit?: number; signal?: AbortSignal } = {}): Promise<ToolResult> {
		const { signal, ...rest } = opts;
		return this.call("ls", { ...(path === undefined ? {} : { path }), ...rest }, { signal });
	}
}

/** The text blocks of a tool result, joined by newlines. */
export function textOf(r: ToolResult): string {
	return r.content
		.filter((c) => c.type === "text")
		.map((c) => (c as { text: string }).text)
		.join("\n");
}
