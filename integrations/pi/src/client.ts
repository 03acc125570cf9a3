// HTTP client for the broker's workspace routes (docs/api.md). node:http is
// used rather than fetch because exec cancellation needs a TCP half-close:
// the broker then kills the command's tree and still sends the real exit
// line, so "aborted" is only reported once the tree is gone.
import * as http from "node:http";
import * as https from "node:https";
import { Readable } from "node:stream";

/** Where a workspace lives: the broker, its bearer token and the workspace id. */
export interface BrokerTarget {
	/** Broker base URL, e.g. http://127.0.0.1:8722 */
	url: string;
	/** Bearer token (the file `broker serve` writes). */
	token: string;
	/** Workspace id (ws_...). */
	workspace: string;
}

/** A workspace as the broker describes it (wire.WorkspaceInfo). */
export interface WorkspaceInfo {
	id: string;
	backend: string;
	root: string;
	createdAt: string;
	/** Why the workspace's sandbox vanished behind the broker's back; absent while it is there. */
	gone?: string;
	/** What confines the workspace's commands on this host; absent when the backend does not say. */
	confinement?: Confinement;
	/** How calls reach the workspace (docker and ssh); absent for a backend without an in-box agent. */
	transport?: Transport;
	/** The workspace's own filesystem, whose size the kernel holds; absent for a workspace without one. */
	disk?: Disk;
	/** The names of the workspace's environment variables (values are never answered). */
	env?: EnvName[];
}

/** A variable of a workspace's environment as the broker shows it (wire.EnvName). */
export interface EnvName {
	name: string;
	/** Its value is redacted from every output. */
	secret?: boolean;
}

/** A variable of a workspace's environment as it is set (wire.EnvVar). */
export interface EnvVar {
	name: string;
	value: string;
	/** Redact its value from every output. */
	secret?: boolean;
}

/** A workspace's own filesystem (wire.Disk). */
export interface Disk {
	/** Bytes in use: files and the filesystem's own structures. */
	usedBytes: number;
	/** The filesystem's size: writing past it is ENOSPC inside the workspace. */
	limitBytes: number;
}

/** Whether a workspace's calls go through the in-box agent (wire.Transport). */
export interface Transport {
	/** True: through the in-box agent; false: through the backend's fallback. */
	agent: boolean;
	/** Why the fallback is in use, or that the agent starts at the first call. */
	detail?: string;
}

/** A workspace's effective confinement, layer by layer (wire.Confinement). */
export interface Confinement {
	sandboxed: boolean;
	user: boolean;
	uid?: number;
	noNewPrivs: boolean;
	privateTmp: boolean;
	network: "none" | "host";
	/** The Landlock ABI in force, 0 for none. */
	landlockABI: number;
	seccomp: boolean;
	pidNamespace: boolean;
	cgroup: boolean;
}

/** opsapi.FileInfo on the wire, with GET /stat's mime (wire.StatResponse). */
export interface FileInfo {
	name: string;
	type: "file" | "dir" | "symlink" | "other";
	size: number;
	mode: number;
	mtime: string;
	symlink?: boolean;
	mime?: string;
}

/** The exit line of an exec stream (opsapi.ExecResult). */
export interface ExecExit {
	exitCode: number;
	signal?: string;
	timedOut?: boolean;
	canceled?: boolean;
	oomKilled?: boolean;
	memoryLimit?: number;
	killed?: number;
	durationNs?: number;
}

/** One block of a tool result (wire.Content). */
export type ToolContent = { type: "text"; text: string } | { type: "image"; data: string; mimeType: string };

/** A tool result as the broker's tool routes return it (wire.ToolResult). */
export interface ToolResult {
	content: ToolContent[];
	details?: unknown;
	isError?: boolean;
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

/** An error answered by the broker (an RFC 9457 problem document). */
export class BrokerError extends Error {
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
		this.name = "BrokerError";
		const code = errnoOf[problem]?.code;
		if (code) (this as { code?: string }).code = code;
	}
}

/**
 * The error for a failed operation: for filesystem problems a message in
 * Node's format (`ENOENT: no such file or directory, open '/w/a.txt'`),
 * otherwise the broker's detail.
 */
export function operationError(status: number, problem: string, detail: string, syscall?: string, path?: string): BrokerError {
	const e = errnoOf[problem];
	let msg = detail || `broker answered ${status} ${problem}`;
	if (e && syscall) {
		// fs.readFile names "open" for a missing file but "read" for a directory.
		const sc = problem === "is_dir" && syscall === "open" ? "read" : syscall;
		msg = `${e.code}: ${e.text}, ${sc}`;
		if (e.withPath && path !== undefined) msg += ` '${path}'`;
	}
	return new BrokerError(msg, status, problem, detail);
}

interface RequestOptions {
	method: string;
	/** Path after /v1/workspaces/{id}, or an absolute /v1/... path when raw is set. */
	path: string;
	query?: Record<string, string>;
	body?: Buffer | string | Readable;
	contentType?: string;
	accept?: string;
	signal?: AbortSignal;
	/** The syscall and path named in a Node-style error message. */
	syscall?: string;
	errPath?: string;
	/** Use a fresh connection (exec: it is half-closed on cancel). */
	ownConnection?: boolean;
	/** Called with the request as soon as it exists (before any answer). */
	onRequest?: (req: http.ClientRequest) => void;
}

/** Low-level access to one broker. */
export class BrokerClient {
	private readonly base: URL;
	private readonly agent: http.Agent;
	private readonly mod: typeof http | typeof https;

	constructor(
		url: string,
		private readonly token: string,
	) {
		this.base = new URL(url.endsWith("/") ? url : `${url}/`);
		this.mod = this.base.protocol === "https:" ? https : http;
		this.agent = new this.mod.Agent({ keepAlive: true, maxSockets: 16 });
	}

	/** Closes idle keep-alive connections (lets a test process exit). */
	close(): void {
		this.agent.destroy();
	}

	/** The broker's base URL, ending in a slash. */
	get baseURL(): URL {
		return new URL(this.base.href);
	}

	/** The bearer token (for a connection this client does not make, a WebSocket). */
	get bearer(): string {
		return this.token;
	}

	/**
	 * Sends a request and returns the response once its headers arrived;
	 * non-2xx answers become BrokerErrors.
	 */
	async request(o: RequestOptions): Promise<{ res: http.IncomingMessage; req: http.ClientRequest }> {
		const u = new URL(o.path.replace(/^\//, ""), this.base);
		for (const [k, v] of Object.entries(o.query ?? {})) u.searchParams.set(k, v);
		const headers: Record<string, string> = { Authorization: `Bearer ${this.token}` };
		if (o.contentType) headers["Content-Type"] = o.contentType;
		if (o.accept) headers.Accept = o.accept;
		if (typeof o.body === "string" || Buffer.isBuffer(o.body)) {
			headers["Content-Length"] = String(Buffer.byteLength(o.body));
		}
		if (o.signal?.aborted) throw abortError();
		return new Promise((resolve, reject) => {
			const req = this.mod.request(u, {
				method: o.method,
				headers,
				agent: o.ownConnection ? false : this.agent,
				signal: o.signal,
			});
			o.onRequest?.(req);
			req.on("error", (err) => reject(o.signal?.aborted ? abortError() : err));
			req.on("response", (res) => {
				const status = res.statusCode ?? 0;
				if (status >= 200 && status < 300) {
					resolve({ res, req });
					return;
				}
				readAll(res).then(
					(buf) => reject(problemError(status, buf, o.syscall, o.errPath)),
					(err) => reject(err),
				);
			});
			if (o.body instanceof Readable) {
				o.body.on("error", (err) => req.destroy(err));
				o.body.pipe(req);
			} else {
				req.end(o.body);
			}
		});
	}

	/** A request whose whole answer body is read. */
	async call(o: RequestOptions): Promise<Buffer> {
		const { res } = await this.request(o);
		try {
			return await readAll(res);
		} catch (err) {
			throw o.signal?.aborted ? abortError() : err;
		}
	}

	async json<T>(o: RequestOptions): Promise<T> {
		return JSON.parse((await this.call(o)).toString("utf8")) as T;
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

function abortError(): Error {
	return new Error("Operation aborted");
}

function problemError(status: number, body: Buffer, syscall?: string, path?: string): BrokerError {
	let problem = "internal";
	let detail = body.toString("utf8").trim();
	try {
		const p = JSON.parse(detail) as { code?: string; detail?: string };
		problem = p.code ?? problem;
		detail = p.detail ?? detail;
	} catch {
		// not a problem document (a proxy's page...): keep the text
	}
	return operationError(status, problem, detail, syscall, path);
}

export function readAll(stream: Readable): Promise<Buffer> {
	return new Promise((resolve, reject) => {
		const chunks: Buffer[] = [];
		stream.on("data", (c: Buffer) => chunks.push(c));
		stream.on("end", () => resolve(Buffer.concat(chunks)));
		stream.on("error", reject);
		stream.on("aborted", () => reject(new Error("broker connection closed mid-answer")));
	});
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
