// pi's *Operations interfaces over the broker's operation routes: raw file
// bytes, stat/dirs/glob JSON, and exec streamed as NDJSON.
import type { ClientRequest } from "node:http";
import type { Socket } from "node:net";
import * as posix from "node:path/posix";
import type {
	BashOperations,
	EditOperations,
	FindOperations,
	GrepOperations,
	LsOperations,
	ReadOperations,
	WriteOperations,
} from "@earendil-works/pi-coding-agent";
import { NotExistError } from "@wsbroker/sdk";
import { BrokerClient, type BrokerTarget, type ExecExit, type FileInfo, FsError, eachLine, operationError } from "./client.js";
import { toWorkspacePath } from "./paths.js";

/** The names of pi's environment forwarded to commands unless told otherwise. */
export const DEFAULT_ENV_ALLOWLIST: readonly string[] = [
	"PI_CODING_AGENT",
	"PI_SESSION_ID",
	"PI_PROVIDER",
	"PI_MODEL",
	"PI_REASONING_LEVEL",
];

export interface BrokerOperationsOptions extends BrokerTarget {
	/**
	 * Names of variables copied from the environment pi passes to bash (its
	 * whole process.env, API keys included). Only these cross into the
	 * workspace; default DEFAULT_ENV_ALLOWLIST.
	 */
	envAllowlist?: readonly string[];
	/** Variables every command gets, e.g. {GOFLAGS: "-mod=mod"}. */
	env?: Record<string, string>;
	/** Reuse a client (and its connections); one is made otherwise. */
	client?: BrokerClient;
	/** The host platform pi resolves paths with (tests); default process.platform. */
	platform?: string;
}

/** All seven of pi's operation interfaces, bound to one workspace. */
/** pi's ReadOperations with pi >= 1.5.1's createReadStream (older pi ignores it). */
export type StreamingReadOperations = ReadOperations & {
	createReadStream(path: string, options: { signal?: AbortSignal }): AsyncIterable<Uint8Array>;
};

export interface BrokerOperations {
	read: StreamingReadOperations;
	write: WriteOperations;
	edit: EditOperations;
	bash: BashOperations;
	grep: GrepOperations;
	find: FindOperations;
	ls: LsOperations;
	/** The client the operations use. */
	client: BrokerClient;
}

// The image types pi 0.73.1 sends to a model (its file-type sniffer keeps these four).
const IMAGE_MIME = new Set(["image/jpeg", "image/png", "image/gif", "image/webp"]);

// How long a stat answered by access() serves the detectImageMimeType()
// that pi's read calls right after it on the same path (and a directory
// listing serves ls's stat of each entry).
const STAT_MEMO_MS = 2000;

// After an abort, how long the broker gets to report the killed command
// before the connection is dropped outright (which also kills the tree).
const ABORT_GRACE_MS = 10_000;

/**
 * pi's operation interfaces routed to a broker workspace. Paths are the
 * workspace's (POSIX, absolute or relative to its root); a Windows host's
 * `C:\x` forms are mapped back (see toWorkspacePath).
 */
export function brokerOperations(opts: BrokerOperationsOptions): BrokerOperations {
	const client = opts.client ?? new BrokerClient(opts.url, opts.token);
	const ws = new WorkspaceRoutes(client, opts.workspace);
	const wp = (p: string) => toWorkspacePath(p, opts.platform);
	const allow = new Set(opts.envAllowlist ?? DEFAULT_ENV_ALLOWLIST);

	let memo: { path: string; info: FileInfo; at: number } | undefined;
	const access = async (p: string, mode: "r" | "rw") => {
		const path = wp(p);
		const info = await ws.stat(path, mode, "access", p);
		memo = { path, info, at: Date.now() };
	};
	const readFile = (p: string) => ws.readFile(wp(p), p);
	const writeFile = (p: string, content: string) => ws.writeFile(wp(p), Buffer.from(content, "utf8"), p);
	const exists = async (p: string) => {
		try {
			await ws.stat(wp(p), undefined, "stat", p);
			return true;
		} catch (err) {
			// existsSync is false for any fs error; a broker that cannot be
			// reached must not look like a missing path.
			if (err instanceof FsError && err.code) return false;
			throw err;
		}
	};

	// createReadStream is pi >= 1.5.1's: read then streams a text file and
	// keeps only the lines it shows, instead of fetching the file whole.
	// Older pi ignores the extra member.
	const read: StreamingReadOperations = {
		readFile,
		createReadStream: (p, { signal }) => ws.readStream(wp(p), p, signal),
		access: (p) => access(p, "r"),
		async detectImageMimeType(p) {
			const path = wp(p);
			let info: FileInfo;
			if (memo && memo.path === path && Date.now() - memo.at < STAT_MEMO_MS) {
				info = memo.info;
				memo = undefined;
			} else {
				try {
					info = await ws.stat(path, undefined, "stat", p);
				} catch {
					return null; // readFile reports it
				}
			}
			return info.mime && IMAGE_MIME.has(info.mime) ? info.mime : null;
		},
	};

	const bash: BashOperations = {
		exec(command, cwd, { onData, signal, timeout, env }) {
			const vars: string[] = [];
			for (const [k, v] of Object.entries(env ?? {})) {
				if (allow.has(k) && v !== undefined) vars.push(`${k}=${v}`);
			}
			for (const [k, v] of Object.entries(opts.env ?? {})) vars.push(`${k}=${v}`);
			return ws.exec({ command, cwd: wp(cwd), rawCwd: cwd, env: vars, timeout, signal, onData });
		},
	};

	// ls asks for the stat of every entry readdir returned: answer those from
	// the listing (symbolic links already followed) instead of one request each.
	// Entries are used once and only while fresh: the listing is a snapshot.
	const listed = new Map<string, { info: FileInfo; at: number }>();
	const ls: LsOperations = {
		exists,
		async stat(p) {
			const path = wp(p);
			const hit = listed.get(path);
			listed.delete(path);
			const info = hit && Date.now() - hit.at < STAT_MEMO_MS ? hit.info : await ws.stat(path, undefined, "stat", p);
			if (info.type === "symlink") {
				// A link that cannot be followed: statSync throws for it.
				throw operationError(404, "not_exist", "dangling symbolic link", "stat", p);
			}
			const dir = info.type === "dir";
			return { isDirectory: () => dir };
		},
		async readdir(p) {
			const dir = wp(p);
			const entries = await ws.readdir(dir, p);
			listed.clear();
			const at = Date.now();
			for (const e of entries) listed.set(posix.join(dir, e.name), { info: e, at });
			return entries.map((e) => e.name);
		},
	};

	return {
		client,
		read,
		write: {
			writeFile,
			mkdir: (dir) => ws.mkdir(wp(dir), dir),
		},
		edit: { readFile, writeFile, access: (p) => access(p, "rw") },
		bash,
		grep: {
			async isDirectory(p) {
				return (await ws.stat(wp(p), undefined, "stat", p)).type === "dir";
			},
			async readFile(p) {
				return (await readFile(p)).toString("utf8");
			},
		},
		find: {
			exists,
			async glob(pattern, cwd, { ignore, limit }) {
				const dir = wp(cwd);
				const res = await ws.glob({ pattern, cwd: dir, ignore, limit });
				return res.paths.map((rel) => (dir.endsWith("/") ? dir + rel : `${dir}/${rel}`));
			},
		},
		ls,
	};
}

interface ExecCall {
	command: string;
	cwd: string;
	rawCwd: string;
	env: string[];
	timeout?: number;
	signal?: AbortSignal;
	onData: (data: Buffer) => void;
}

/** The operation routes of one workspace. */
export class WorkspaceRoutes {
	private readonly prefix: string;
	constructor(
		readonly client: BrokerClient,
		readonly id: string,
	) {
		this.prefix = `/v1/workspaces/${encodeURIComponent(id)}`;
	}

	readFile(path: string, shown: string = path): Promise<Buffer> {
		return this.client.call({ method: "GET", path: `${this.prefix}/files`, query: { path }, syscall: "open", errPath: shown });
	}

	/**
	 * The file's bytes as they arrive (GET /files streams them). Leaving the
	 * loop early, or the signal, closes the connection, so the broker stops
	 * reading the file.
	 */
	async *readStream(path: string, shown: string = path, signal?: AbortSignal): AsyncGenerator<Uint8Array> {
		const { res, req } = await this.client.request({ method: "GET", path: `${this.prefix}/files`, query: { path }, syscall: "open", errPath: shown, signal });
		try {
			for await (const chunk of res) yield chunk as Buffer;
			if (!res.complete) throw new Error("broker connection closed mid-answer");
		} finally {
			if (!res.complete) req.destroy();
		}
	}

	async writeFile(path: string, body: Buffer | NodeJS.ReadableStream, shown: string = path, mkdirs = false): Promise<void> {
		const query: Record<string, string> = { path };
		if (mkdirs) query.mkdirs = "1";
		await this.client.call({
			method: "PUT",
			path: `${this.prefix}/files`,
			query,
			body: body as Buffer,
			contentType: "application/octet-stream",
			syscall: "open",
			errPath: shown,
		});
	}

	async mkdir(path: string, shown: string = path): Promise<void> {
		await this.client.call({ method: "POST", path: `${this.prefix}/dirs`, query: { path }, syscall: "mkdir", errPath: shown });
	}

	stat(path: string, access: "r" | "rw" | undefined, syscall: string, shown: string = path): Promise<FileInfo> {
		const query: Record<string, string> = { path };
		if (access) query.access = access;
		return this.client.json({ method: "GET", path: `${this.prefix}/stat`, query, syscall, errPath: shown });
	}

	async readdir(path: string, shown: string = path): Promise<FileInfo[]> {
		const r = await this.client.json<{ entries: FileInfo[] }>({
			method: "GET",
			path: `${this.prefix}/dirs`,
			query: { path },
			syscall: "scandir",
			errPath: shown,
		});
		return r.entries;
	}

	glob(req: { pattern: string; cwd: string; ignore?: string[]; limit?: number }): Promise<{ paths: string[]; limitReached?: boolean; hidden?: number }> {
		return this.client.json({
			method: "POST",
			path: `${this.prefix}/glob`,
			body: JSON.stringify(req),
			contentType: "application/json",
		});
	}

	/**
	 * Runs a command and follows pi's BashOperations protocol: output goes to
	 * onData (never after settling); an abort rejects with `aborted` once the
	 * broker reports the tree killed; the broker's timeout rejects with
	 * `timeout:<seconds>`; any exit resolves with its code (128+N for signal N).
	 */
	exec(c: ExecCall): Promise<{ exitCode: number | null }> {
		return new Promise((resolve, reject) => {
			let settled = false;
			const settle = (fn: () => void) => {
				if (settled) return;
				settled = true;
				c.signal?.removeEventListener("abort", onAbort);
				if (graceTimer) clearTimeout(graceTimer);
				fn();
			};
			let graceTimer: NodeJS.Timeout | undefined;
			let req: ClientRequest | undefined;
			let abortRequested = false;
			// Cancel by closing only our sending half: the broker kills the
			// tree and still sends its exit line (docs/api.md). The answer's
			// headers come with the first line, so this may happen before any.
			const cancel = () => {
				if (!req) return;
				const r = req;
				const halfClose = (s: Socket) => s.end();
				if (r.socket) halfClose(r.socket);
				else r.once("socket", halfClose);
				graceTimer ??= setTimeout(() => r.destroy(), ABORT_GRACE_MS);
			};
			const onAbort = () => {
				abortRequested = true;
				cancel();
			};
			if (c.signal?.aborted) {
				reject(new Error("aborted"));
				return;
			}
			c.signal?.addEventListener("abort", onAbort, { once: true });

			const body: Record<string, unknown> = { command: c.command, cwd: c.cwd, env: c.env };
			if (c.timeout !== undefined && c.timeout > 0) body.timeout = c.timeout;
			this.client
				.request({
					method: "POST",
					path: `${this.prefix}/exec`,
					body: JSON.stringify(body),
					contentType: "application/json",
					accept: "application/x-ndjson",
					ownConnection: true,
					onRequest: (r) => {
						req = r;
						if (abortRequested) cancel();
					},
				})
				.then(
					({ res }) => {
						let exit: ExecExit | undefined;
						let failure: Error | undefined;
						eachLine(res, (line) => {
							let ev: { type: string; data?: string; code?: string; detail?: string } & ExecExit;
							try {
								ev = JSON.parse(line);
							} catch {
								failure ??= new Error(`broker sent a malformed exec line: ${line.slice(0, 200)}`);
								return;
							}
							if (ev.type === "output" && ev.data && !settled && !failure) {
								try {
									c.onData(Buffer.from(ev.data, "base64"));
								} catch (err) {
									// A throwing callback must not escape from a stream
									// listener (it would crash pi): stop the command instead.
									failure = err as Error;
									cancel();
								}
							} else if (ev.type === "exit") exit = ev;
							else if (ev.type === "error") failure ??= new Error(ev.detail || `exec failed: ${ev.code}`);
						}).then(
							() => {
								if (abortRequested) settle(() => reject(new Error("aborted")));
								else if (failure) settle(() => reject(failure));
								else if (!exit) settle(() => reject(new Error("the broker closed the exec stream before the command exited")));
								else if (exit.timedOut) settle(() => reject(new Error(`timeout:${c.timeout}`)));
								else if (exit.canceled) settle(() => reject(new Error("the broker canceled the command (workspace deleted or broker shutting down)")));
								else {
									const code = exit.exitCode;
									settle(() => resolve({ exitCode: code }));
								}
							},
							(err: Error) => settle(() => reject(abortRequested ? new Error("aborted") : err)),
						);
					},
					(err: unknown) => {
						if (err instanceof NotExistError) {
							// pi's local message for a missing cwd.
							err = new Error(`Working directory does not exist: ${c.rawCwd}\nCannot execute bash commands.`);
						}
						settle(() => reject(abortRequested ? new Error("aborted") : err));
					},
				);
		});
	}
}
