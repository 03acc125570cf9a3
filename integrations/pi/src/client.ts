// pi's client of the broker: the SDK's transport (@wsbroker/sdk, which holds
// the generic client: wire types, errors, workspaces, processes, terminals),
// plus what only pi's tools need: errors in the shape of Node's fs errors,
// named by the syscall and path pi's local tools would name.
import { type BrokerError, type RequestOptions as SdkRequestOptions, Transport, type WorkspaceInfo, readAll } from "@wsbroker/sdk";
import type { EnvVar } from "@wsbroker/sdk";
import type { Readable } from "node:stream";

export type { EnvVar, ExecExit, FileInfo, ToolContent, ToolResult, WorkspaceInfo } from "@wsbroker/sdk";
export { readAll };

/** Where a workspace lives: the broker, its bearer token and the workspace id. */
export interface BrokerTarget {
	/** Broker base URL, e.g. http://127.0.0.1:8722 */
	url: string;
	/** Bearer token (the file `broker serve` writes). */
	token: string;
	/** Workspace id (ws_...). */
	workspace: string;
}

// Node's errno names for the broker's problem codes, so pi's tools see the
// same error shapes (err.code, message) as with their local fs calls.
const errnoOf: Record<string, { code: string; text: string; withPath: boolean }> = {
	not_exist: { code: "ENOENT", text: "no such file or directory", withPath: true },
	permission: { code: "EACCES", text: "permission denied", withPath: true },
	is_dir: { code: "EISDIR", text: "illegal operation on a directory", withPath: false },
	not_dir: { code: "ENOTDIR", text: "not a directory", withPath: true },
	exists: { code: "EEXIST", text: "file already exists", withPath: true },
};

/**
 * A broker error in the shape of Node's fs errors, for pi's tools: `code` is
 * the errno name (ENOENT...) when the problem maps to one, and the message
 * Node's (`ENOENT: no such file or directory, open '/w/a.txt'`).
 */
export class FsError extends Error {
	/**
	 * Node-style errno name (ENOENT...), present only when the problem maps
	 * to one: pi's edit reports `Error code: <code>` whenever `code` is in.
	 */
	declare readonly code?: string;
	constructor(
		message: string,
		readonly status: number,
		/** The broker's problem code (not_exist, permission, ...). */
		readonly problem: string,
		readonly detail: string,
	) {
		super(message);
		this.name = "FsError";
		const code = errnoOf[problem]?.code;
		if (code) (this as { code?: string }).code = code;
	}
}

/**
 * The error for a failed operation: for filesystem problems a message in
 * Node's format (`ENOENT: no such file or directory, open '/w/a.txt'`),
 * otherwise the broker's detail.
 */
export function operationError(status: number, problem: string, detail: string, syscall?: string, path?: string): FsError {
	const e = errnoOf[problem];
	let msg = detail || `broker answered ${status} ${problem}`;
	if (e && syscall) {
		// fs.readFile names "open" for a missing file but "read" for a directory.
		const sc = problem === "is_dir" && syscall === "open" ? "read" : syscall;
		msg = `${e.code}: ${e.text}, ${sc}`;
		if (e.withPath && path !== undefined) msg += ` '${path}'`;
	}
	return new FsError(msg, status, problem, detail);
}

export interface RequestOptions extends SdkRequestOptions {
	/** The syscall and path named in a Node-style error message. */
	syscall?: string;
	errPath?: string;
}

/** The SDK's transport, whose errors carry Node's shapes when a syscall is named. */
export class BrokerClient extends Transport {
	constructor(url: string, token: string) {
		super(url, token);
	}

	/** The broker's base URL, ending in a slash. */
	get baseURL(): URL {
		return new URL(this.base.href);
	}

	override request(o: RequestOptions) {
		const { syscall, errPath } = o;
		if (!syscall) return super.request(o);
		return super.request({ ...o, mapError: (e: BrokerError) => operationError(e.status, e.code, e.detail, syscall, errPath) });
	}

	override call(o: RequestOptions): Promise<Buffer> {
		return super.call(o);
	}

	override json<T>(o: RequestOptions): Promise<T> {
		return super.json<T>(o);
	}

	/** Creates a workspace; env is the environment every command of it sees. */
	createWorkspace(backend?: string, options?: unknown, env?: EnvVar[]): Promise<WorkspaceInfo> {
		const body: Record<string, unknown> = {};
		if (backend) body.backend = backend;
		if (options !== undefined) body.options = options;
		if (env && env.length > 0) body.env = env;
		return this.json({ method: "POST", path: "/v1/workspaces", body: JSON.stringify(body), contentType: "application/json" });
	}

	getWorkspace(id: string): Promise<WorkspaceInfo> {
		return this.json({ method: "GET", path: `/v1/workspaces/${encodeURIComponent(id)}` });
	}

	async deleteWorkspace(id: string): Promise<void> {
		await this.call({ method: "DELETE", path: `/v1/workspaces/${encodeURIComponent(id)}` });
	}
}

/** Splits a byte stream into lines, calling onLine for each complete one. */
export function eachLine(stream: Readable, onLine: (line: string) => void): Promise<void> {
	return new Promise((resolve, reject) => {
		let pending = "";
		stream.setEncoding("utf8");
		stream.on("data", (chunk: string) => {
			pending += chunk;
			let i: number;
			while ((i = pending.indexOf("\n")) >= 0) {
				const line = pending.slice(0, i);
				pending = pending.slice(i + 1);
				if (line.trim() !== "") onLine(line);
			}
		});
		stream.on("end", () => {
			if (pending.trim() !== "") onLine(pending);
			resolve();
		});
		stream.on("error", reject);
		stream.on("close", () => resolve());
	});
}
