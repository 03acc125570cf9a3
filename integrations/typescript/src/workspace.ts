// One workspace: files, search, commands, background processes, archives,
// terminals and pi's seven tools, over the routes of docs/api.md.
import { spawn } from "node:child_process";
import type { IncomingMessage } from "node:http";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { ExecStream, type ExecOptions, type RunResult, collect } from "./exec.js";
import { ConnectionError } from "./errors.js";
import type { Body, Transport } from "./http.js";
import { Processes } from "./processes.js";
import { type Terminal, type TerminalOptions, openTerminal } from "./terminal.js";
import { Tools } from "./tools.js";
import type { ArchiveReport, Compression, EnvVar, FileInfo, GlobResult, LiveProcess, SearchResult, WorkspaceInfo } from "./types.js";

/** What a search asks (opsapi.SearchRequest, ripgrep's semantics). */
export interface GrepOptions {
	/** File or directory searched; default the root. */
	path?: string;
	/** Only files matching this glob. */
	glob?: string;
	ignoreCase?: boolean;
	literal?: boolean;
	/** Lines of context around each match. */
	context?: number;
	limit?: number;
	signal?: AbortSignal;
}

/** What a glob asks (opsapi.GlobRequest, fd's semantics). */
export interface GlobOptions {
	/** Directory searched; default the root. */
	cwd?: string;
	ignore?: string[];
	limit?: number;
	signal?: AbortSignal;
}

/**
 * A workspace of a broker. `await using ws = await broker.create(...)`
 * deletes it when the block ends, unless it was created with `keep`.
 */
export class Workspace implements AsyncDisposable {
	/** Background processes by handle. */
	readonly processes: Processes;
	/** pi's seven tools, answering pi's results. */
	readonly tools: Tools;
	/** The path prefix of its routes. */
	readonly prefix: string;

	constructor(
		/** @internal */
		readonly transport: Transport,
		/** The description the broker answered when it was created or got. */
		public info: WorkspaceInfo,
		/** Whether disposing leaves it in place. */
		readonly keep = false,
	) {
		this.prefix = `/v1/workspaces/${encodeURIComponent(info.id)}`;
		this.processes = new Processes(transport, this.prefix);
		this.tools = new Tools(transport, this.prefix);
	}

	get id(): string {
		return this.info.id;
	}
	get root(): string {
		return this.info.root;
	}
	get backend(): string {
		return this.info.backend;
	}

	/** Asks the broker for the workspace's description again. */
	async refresh(signal?: AbortSignal): Promise<WorkspaceInfo> {
		this.info = await this.transport.json<WorkspaceInfo>({ method: "GET", path: this.prefix, signal });
		return this.info;
	}

	/** Deletes the workspace: every process of it is killed, its files are gone. */
	async delete(): Promise<void> {
		await this.transport.call({ method: "DELETE", path: this.prefix });
	}

	/** Deletes the workspace unless it was created with `keep` (`await using`). */
	async [Symbol.asyncDispose](): Promise<void> {
		if (!this.keep) await this.delete();
	}

	/** Replaces the workspace's whole environment; commands started from now on see it. */
	async setEnv(env: EnvVar[]): Promise<WorkspaceInfo> {
		this.info = await this.transport.json({ method: "PUT", path: `${this.prefix}/env`, body: JSON.stringify({ env }), contentType: "application/json" });
		return this.info;
	}

	// Files.

	/** The file's bytes (GET /files), read whole. */
	async readBytes(path: string, opts: { signal?: AbortSignal } = {}): Promise<Uint8Array> {
		return this.transport.call({ method: "GET", path: `${this.prefix}/files`, query: { path }, signal: opts.signal });
	}

	/** The file as UTF-8 text. */
	async readText(path: string, opts: { signal?: AbortSignal } = {}): Promise<string> {
		return Buffer.from(await this.readBytes(path, opts)).toString("utf8");
	}

	/**
	 * The file as a stream of its bytes, as they arrive: for files too large
	 * to hold. Cancelling the stream (or the signal) closes the connection.
	 */
	async open(path: string, opts: { signal?: AbortSignal } = {}): Promise<ReadableStream<Uint8Array>> {
		const { res } = await this.transport.request({ method: "GET", path: `${this.prefix}/files`, query: { path }, signal: opts.signal });
		return webStream(res);
	}

	/**
	 * Replaces the file atomically with data: bytes, text, or a stream (web
	 * or Node, or any async iterable of bytes), sent as it is read.
	 * `mkdirs` creates missing parents.
	 */
	async writeBytes(path: string, data: Body, opts: { mkdirs?: boolean; signal?: AbortSignal } = {}): Promise<void> {
		await this.transport.call({
			method: "PUT",
			path: `${this.prefix}/files`,
			query: { path, mkdirs: opts.mkdirs ? "1" : undefined },
			body: data,
			contentType: "application/octet-stream",
			signal: opts.signal,
		});
	}

	/** Alias of writeBytes for text. */
	writeText(path: string, text: string, opts: { mkdirs?: boolean; signal?: AbortSignal } = {}): Promise<void> {
		return this.writeBytes(path, text, opts);
	}

	/** A path's description (symbolic links followed); with access, the access is checked first. */
	stat(path: string, opts: { access?: "r" | "w" | "rw"; signal?: AbortSignal } = {}): Promise<FileInfo> {
		return this.transport.json({ method: "GET", path: `${this.prefix}/stat`, query: { path, access: opts.access }, signal: opts.signal });
	}

	/** Whether the path exists (a NotExistError is false; any other error is thrown). */
	async exists(path: string): Promise<boolean> {
		try {
			await this.stat(path);
			return true;
		} catch (err) {
			if ((err as { code?: string }).code === "not_exist") return false;
			throw err;
		}
	}

	/** A directory's entries, sorted by name. */
	async listdir(path = ".", opts: { signal?: AbortSignal } = {}): Promise<FileInfo[]> {
		const r = await this.transport.json<{ entries: FileInfo[] }>({ method: "GET", path: `${this.prefix}/dirs`, query: { path }, signal: opts.signal });
		return r.entries;
	}

	/** mkdir -p. */
	async mkdir(path: string): Promise<void> {
		await this.transport.call({ method: "POST", path: `${this.prefix}/dirs`, query: { path }, idempotent: true });
	}

	/** The path with every symbolic link resolved. */
	async realpath(path: string): Promise<string> {
		return (await this.transport.json<{ path: string }>({ method: "GET", path: `${this.prefix}/realpath`, query: { path } })).path;
	}

	/** Searches file contents where they are (ripgrep's semantics). */
	grep(pattern: string, opts: GrepOptions = {}): Promise<SearchResult> {
		const { signal, ...rest } = opts;
		return this.transport.json({
			method: "POST",
			path: `${this.prefix}/search`,
			body: JSON.stringify({ pattern, path: ".", ...rest }),
			contentType: "application/json",
			signal,
			idempotent: true,
		});
	}

	/** Paths matching a glob (fd's semantics: .gitignore respected, hidden files included). */
	glob(pattern: string, opts: GlobOptions = {}): Promise<GlobResult> {
		const { signal, cwd, ...rest } = opts;
		return this.transport.json({
			method: "POST",
			path: `${this.prefix}/glob`,
			body: JSON.stringify({ pattern, cwd: cwd ?? ".", ...rest }),
			contentType: "application/json",
			signal,
			idempotent: true,
		});
	}

	// Commands.

	/**
	 * Runs `bash -c command` and answers its exit with the whole output. A
	 * timeout (the broker's, seconds) is an answer with timedOut, not an
	 * error; an aborted signal kills the tree and rejects with AbortError.
	 * For large output use stream().
	 */
	run(command: string, opts: ExecOptions = {}): Promise<RunResult> {
		return collect(this.stream(command, opts));
	}

	/**
	 * Runs `bash -c command`, its output as it comes: `for await (const chunk
	 * of ws.stream(cmd))`, then `await stream.exit`. Leaving the loop early or
	 * aborting the signal kills the command's whole tree.
	 */
	stream(command: string, opts: ExecOptions = {}): ExecStream {
		return new ExecStream(this.transport, `${this.prefix}/exec`, command, opts);
	}

	/** The workspace's live processes (backends that list them: local). */
	async ps(): Promise<LiveProcess[]> {
		const r = await this.transport.json<{ processes?: LiveProcess[] }>({ method: "GET", path: `${this.prefix}/processes` });
		return r.processes ?? [];
	}

	/** Kills the given processes, or every process of the workspace; answers how many. */
	async killProcesses(pids?: number[]): Promise<number> {
		const r = await this.transport.json<{ killed: number }>({
			method: "DELETE",
			path: `${this.prefix}/processes`,
			query: { pid: pids?.map(String) },
		});
		return r.killed;
	}

	/** Runs a command on a pseudo-terminal (a WebSocket; see terminal.ts for Node 20). */
	pty(opts: TerminalOptions): Terminal {
		const u = this.transport.url(`${this.prefix}/exec/tty`, {
			command: opts.command,
			cwd: opts.cwd,
			env: opts.env,
			timeout: opts.timeout ? String(opts.timeout) : undefined,
			rows: String(opts.rows ?? 24),
			cols: String(opts.cols ?? 80),
		});
		return openTerminal(u, this.transport.token, opts.webSocket);
	}

	// Archives.

	/**
	 * Lands a tar (plain, gzip or zstd) in the directory dir, entry by entry,
	 * streamed as it is read; refused entries are in the report, the rest
	 * lands.
	 */
	uploadArchive(dir: string, tar: Body, opts: { compression?: Compression; signal?: AbortSignal } = {}): Promise<ArchiveReport> {
		return this.transport.json({
			method: "PUT",
			path: `${this.prefix}/archive`,
			query: { path: dir, compression: opts.compression ?? "auto" },
			body: tar,
			contentType: "application/octet-stream",
			signal: opts.signal,
		});
	}

	/**
	 * The directory dir as a tar stream, read as it is consumed. `report`
	 * settles once the tar is whole (from the answer's trailer); a tar cut
	 * short errors the stream and rejects `report`, so a cut archive is never
	 * taken for a whole one.
	 */
	async downloadArchive(
		dir: string,
		opts: { compression?: Exclude<Compression, "auto">; signal?: AbortSignal } = {},
	): Promise<{ tar: ReadableStream<Uint8Array>; report: Promise<ArchiveReport> }> {
		const { res } = await this.transport.request({ method: "GET", path: `${this.prefix}/archive`, query: { path: dir, compression: opts.compression ?? "none" }, signal: opts.signal });
		const cut = () => new ConnectionError(`wsbroker: the archive of ${dir} was cut short`, false);
		const report = new Promise<ArchiveReport>((resolve, reject) => {
			res.on("end", () => {
				const t = res.trailers["wsbroker-archive-report"];
				if (!res.complete || !t) reject(cut());
				else resolve(JSON.parse(t) as ArchiveReport);
			});
			res.on("error", reject);
			res.on("close", () => {
				if (!res.complete) reject(cut());
			});
		});
		report.catch(() => {}); // a caller reading only the tar must not crash on it
		return { tar: webStream(res), report };
	}

	/** Copies the local directory localDir into dir, through the system's tar, streamed. */
	async upload(localDir: string, dir: string): Promise<ArchiveReport> {
		const tar = spawn("tar", ["-C", localDir, "-cf", "-", "."], { stdio: ["ignore", "pipe", "pipe"] });
		const failed = tarExit(tar, "tar -c");
		const report = this.uploadArchive(dir, tar.stdout, { compression: "none" });
		await Promise.all([report, failed]);
		return report;
	}

	/** Copies dir out into the local directory localDir (which must exist), through the system's tar, streamed. */
	async download(dir: string, localDir: string): Promise<ArchiveReport> {
		const { tar, report } = await this.downloadArchive(dir);
		const x = spawn("tar", ["-C", localDir, "-xf", "-"], { stdio: ["pipe", "ignore", "pipe"] });
		const failed = tarExit(x, "tar -x");
		await pipeline(Readable.fromWeb(tar as import("node:stream/web").ReadableStream<Uint8Array>), x.stdin);
		await failed;
		return report;
	}
}

function tarExit(p: ReturnType<typeof spawn>, what: string): Promise<void> {
	let err = "";
	p.stderr?.on("data", (c: Buffer) => (err += c.toString()));
	return new Promise((resolve, reject) => {
		p.on("error", reject);
		p.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`wsbroker: ${what} exited with ${code}: ${err.trim()}`))));
	});
}

/**
 * An answer as a web ReadableStream that pulls from the connection only as
 * it is read (so memory stays at a chunk or two whatever the size), and
 * closes the connection when cancelled.
 */
export function webStream(res: IncomingMessage): ReadableStream<Uint8Array> {
	const it = res[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
	return new ReadableStream<Uint8Array>(
		{
			async pull(ctrl) {
				try {
					const n = await it.next();
					if (n.done) {
						if (!res.complete) ctrl.error(new ConnectionError("wsbroker: the broker's answer was cut short", false));
						else ctrl.close();
					} else ctrl.enqueue(new Uint8Array(n.value.buffer, n.value.byteOffset, n.value.byteLength));
				} catch (err) {
					const code = (err as { code?: string }).code;
					const cut = code === "ECONNRESET" || (err as Error).message === "aborted";
					ctrl.error(cut ? new ConnectionError("wsbroker: the broker's answer was cut short", false, { cause: err }) : err);
				}
			},
			async cancel() {
				res.destroy();
				await it.return?.();
			},
		},
		{ highWaterMark: 0 },
	);
}

