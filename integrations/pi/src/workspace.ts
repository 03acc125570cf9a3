// The workspace routes beyond pi's seven operations (docs/api.md): background
// processes with handles and logs by cursor, the workspace's environment,
// whole trees in and out as tar, and terminals. The Go client's
// counterparts have the same names.
import type { IncomingMessage } from "node:http";
import { Readable } from "node:stream";
import { BrokerClient, type EnvVar, type ExecExit, type WorkspaceInfo, eachLine } from "./client.js";

/** What starts a background process (wire.StartProcessRequest). */
export interface StartProcessRequest {
	command: string;
	/** Relative to the workspace root. */
	cwd?: string;
	/** `NAME=value` entries; they win over the workspace's environment. */
	env?: string[];
	/** Seconds; 0 or absent: none. */
	timeout?: number;
	/** A label shown in listings. */
	tag?: string;
	/** Keep stdin open for writeStdin; otherwise it is /dev/null. */
	stdin?: boolean;
}

/** A background process (wire.BackgroundProcess). */
export interface BackgroundProcess {
	id: string;
	tag?: string;
	command: string;
	cwd?: string;
	state: "running" | "exited" | "failed";
	startedAt: string;
	endedAt?: string;
	/** How an exited process ended: exitCode is 128+N for signal N. */
	result?: ExecExit;
	/** Why a failed process could not run. */
	error?: string;
	/** Whether its stdin is open for writing. */
	stdin: boolean;
	/** What its log holds: bytes [first, written) of its output. */
	output: { first: number; written: number };
	/** What a running process's tree uses now, where the backend can measure it. */
	usage?: { cpuNs: number; memoryBytes: number };
}

/** One event of a process's log (wire.LogLine, data decoded). */
export type LogEvent =
	/** Output bytes starting at offset. */
	| { type: "output"; offset: number; data: Buffer }
	/** The log no longer holds bytes [offset, next): it wrapped. */
	| { type: "dropped"; offset: number; next: number }
	/** The process ended; offset is where its output ends. */
	| { type: "exit"; offset: number; result: ExecExit }
	/** It could not run, or its backend was lost. */
	| { type: "error"; offset: number; code: string; detail: string }
	/** Without follow: it still runs, and offset is where to resume. */
	| { type: "end"; offset: number };

/** A tar's report (wire.ArchiveReport). */
export interface ArchiveReport {
	files: number;
	dirs: number;
	links: number;
	bytes: number;
	/** The entries that did not land (or were left out), each with why. */
	refused: Array<{ name: string; reason: string }>;
}

export type Compression = "auto" | "none" | "gzip" | "zstd";

/** The signals a background process accepts. */
export type SignalName = "SIGHUP" | "SIGINT" | "SIGQUIT" | "SIGKILL" | "SIGUSR1" | "SIGUSR2" | "SIGTERM";

// How long a following reader waits before asking again after its
// connection broke, and how many times in a row it tries.
const RESUME_DELAY_MS = 500;
const RESUME_TRIES = 5;

/** One workspace's routes: `new Workspace(client, "ws_...")`. */
export class Workspace {
	private readonly prefix: string;
	constructor(
		readonly client: BrokerClient,
		readonly id: string,
	) {
		this.prefix = `/v1/workspaces/${encodeURIComponent(id)}`;
	}

	/** Replaces the workspace's whole environment; commands started from now on see it. */
	setEnv(env: EnvVar[]): Promise<WorkspaceInfo> {
		return this.client.json({ method: "PUT", path: `${this.prefix}/env`, body: JSON.stringify({ env }), contentType: "application/json" });
	}

	/** Starts a command in the background and answers its handle at once. */
	startProcess(req: StartProcessRequest): Promise<BackgroundProcess> {
		return this.client.json({ method: "POST", path: `${this.prefix}/processes`, body: JSON.stringify(req), contentType: "application/json" });
	}

	/** The workspace's background processes, running and ended. */
	async backgroundProcesses(): Promise<BackgroundProcess[]> {
		const r = await this.client.json<{ background?: BackgroundProcess[] }>({ method: "GET", path: `${this.prefix}/processes` });
		return r.background ?? [];
	}

	process(proc: string): Promise<BackgroundProcess> {
		return this.client.json({ method: "GET", path: this.procPath(proc) });
	}

	/**
	 * The process once it has ended, or after timeoutSec (the broker's
	 * default 30, at most 600) still running: a wait that times out is an
	 * answer, not an error.
	 */
	waitProcess(proc: string, timeoutSec?: number, signal?: AbortSignal): Promise<BackgroundProcess> {
		const query: Record<string, string> = {};
		if (timeoutSec !== undefined) query.timeout = String(timeoutSec);
		return this.client.json({ method: "GET", path: `${this.procPath(proc)}/wait`, query, signal });
	}

	/** Sends a signal to every process of its tree. */
	async signalProcess(proc: string, sig: SignalName): Promise<void> {
		await this.client.call({ method: "POST", path: `${this.procPath(proc)}/signal`, body: JSON.stringify({ signal: sig }), contentType: "application/json" });
	}

	/** Kills its tree if it still runs, forgets it, deletes its log, and answers it as it ended. */
	removeProcess(proc: string): Promise<BackgroundProcess> {
		return this.client.json({ method: "DELETE", path: this.procPath(proc) });
	}

	/** Writes to the stdin of a process started with `stdin: true`; answers the bytes taken. */
	async writeStdin(proc: string, data: Buffer | string | Readable, opts: { close?: boolean; signal?: AbortSignal } = {}): Promise<number> {
		const r = await this.client.json<{ written: number }>({
			method: "POST",
			path: `${this.procPath(proc)}/stdin`,
			query: opts.close ? { close: "true" } : undefined,
			body: data,
			contentType: "application/octet-stream",
			signal: opts.signal,
		});
		return r.written;
	}

	async closeStdin(proc: string): Promise<void> {
		await this.client.call({ method: "DELETE", path: `${this.procPath(proc)}/stdin` });
	}

	/**
	 * The process's log from byte `offset` (default 0) as events. With
	 * `follow` it goes on until the process ends, and a broken connection
	 * is resumed from the offset after the last byte received, so nothing
	 * is lost or seen twice. Leaving the loop early closes the connection.
	 */
	async *logs(proc: string, opts: { offset?: number; follow?: boolean; signal?: AbortSignal } = {}): AsyncGenerator<LogEvent> {
		let offset = opts.offset ?? 0;
		let failures = 0;
		for (;;) {
			let last: LogEvent | undefined;
			try {
				for await (const ev of this.logsOnce(proc, offset, opts.follow ?? false, opts.signal)) {
					last = ev;
					failures = 0;
					offset = ev.type === "output" ? ev.offset + ev.data.length : ev.type === "dropped" ? ev.next : ev.offset;
					yield ev;
				}
			} catch (err) {
				if (!opts.follow || opts.signal?.aborted || ++failures > RESUME_TRIES || (err as { status?: number }).status !== undefined) throw err;
				await new Promise((r) => setTimeout(r, RESUME_DELAY_MS));
				continue;
			}
			if (last && (last.type === "exit" || last.type === "error" || last.type === "end")) return;
			// The stream ended without its last line: the connection broke.
			if (!opts.follow) throw new Error(`the log of ${proc} ended before its last line`);
			if (++failures > RESUME_TRIES) throw new Error(`the log of ${proc} keeps breaking off at offset ${offset}`);
			await new Promise((r) => setTimeout(r, RESUME_DELAY_MS));
		}
	}

	private async *logsOnce(proc: string, offset: number, follow: boolean, signal?: AbortSignal): AsyncGenerator<LogEvent> {
		const query: Record<string, string> = { offset: String(offset) };
		if (follow) query.follow = "true";
		const { res, req } = await this.client.request({ method: "GET", path: `${this.procPath(proc)}/logs`, query, accept: "application/x-ndjson", signal, ownConnection: follow });
		try {
			for await (const line of ndjson(res)) yield logEvent(line);
		} finally {
			if (!res.complete) req.destroy();
		}
	}

	/**
	 * Lands a tar (plain, gzip or zstd) in the directory `dir` of the
	 * workspace, entry by entry; refused entries are in the report, the
	 * rest lands.
	 */
	uploadArchive(dir: string, tar: Buffer | Readable, compression: Compression = "auto"): Promise<ArchiveReport> {
		return this.client.json({
			method: "PUT",
			path: `${this.prefix}/archive`,
			query: { path: dir, compression },
			body: tar,
			contentType: "application/octet-stream",
		});
	}

	/**
	 * The directory `dir` as a tar stream. `report` settles once the tar is
	 * whole (from the answer's trailer); a tar cut short errors the stream
	 * and rejects `report`, so a cut archive is never taken for a whole one.
	 */
	async downloadArchive(dir: string, compression: Exclude<Compression, "auto"> = "none", signal?: AbortSignal): Promise<{ tar: Readable; report: Promise<ArchiveReport> }> {
		const { res } = await this.client.request({ method: "GET", path: `${this.prefix}/archive`, query: { path: dir, compression }, signal });
		const report = new Promise<ArchiveReport>((resolve, reject) => {
			res.on("end", () => {
				const t = res.trailers["wsbroker-archive-report"];
				if (!res.complete || !t) {
					reject(new Error(`the archive of ${dir} was cut short`));
					return;
				}
				resolve(JSON.parse(t) as ArchiveReport);
			});
			// Node ends a cut answer with an error ("aborted"), which also
			// reaches whoever reads the tar.
			res.on("error", reject);
			res.on("close", () => {
				if (!res.complete) reject(new Error(`the archive of ${dir} was cut short`));
			});
		});
		report.catch(() => {}); // a caller reading only the tar must not crash on it
		return { tar: res, report };
	}

	/**
	 * Runs a command on a pseudo-terminal (GET /exec/tty, a WebSocket). It
	 * needs a WebSocket that can send the Authorization header: Node's own
	 * (Node 22 and later).
	 */
	async openTerminal(opts: TerminalOptions): Promise<Terminal> {
		const WS = (globalThis as unknown as { WebSocket?: WebSocketConstructor }).WebSocket;
		if (!WS) throw new Error(`wsbroker: terminals need Node 22 or later (a WebSocket client); this is Node ${process.versions.node}`);
		const u = new URL(`${this.prefix}/exec/tty`.replace(/^\//, ""), this.client.baseURL);
		u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
		u.searchParams.set("command", opts.command);
		if (opts.cwd) u.searchParams.set("cwd", opts.cwd);
		for (const e of opts.env ?? []) u.searchParams.append("env", e);
		if (opts.timeout) u.searchParams.set("timeout", String(opts.timeout));
		u.searchParams.set("rows", String(opts.rows ?? 24));
		u.searchParams.set("cols", String(opts.cols ?? 80));
		// Node's WebSocket (undici) takes headers in its init object.
		const sock = new WS(u.toString(), { headers: { Authorization: `Bearer ${this.client.bearer}` } });
		sock.binaryType = "arraybuffer";
		return new Terminal(sock);
	}

	private procPath(proc: string): string {
		return `${this.prefix}/processes/${encodeURIComponent(proc)}`;
	}
}

/** A terminal session's command and size. */
export interface TerminalOptions {
	command: string;
	cwd?: string;
	env?: string[];
	timeout?: number;
	rows?: number;
	cols?: number;
}

interface WebSocketLike {
	binaryType: string;
	readyState: number;
	send(data: string | Uint8Array): void;
	close(code?: number, reason?: string): void;
	addEventListener(type: string, fn: (ev: { data?: unknown; code?: number; reason?: string; message?: string }) => void): void;
}
type WebSocketConstructor = new (url: string, init: { headers: Record<string, string> }) => WebSocketLike;

/**
 * A terminal session: `write` types at it, `onData` gets what it displays,
 * `exit` settles with the command's exit (or rejects with its error). A
 * session that closes before its exit line killed the command's tree.
 */
export class Terminal {
	/** Settles when the command ends. */
	readonly exit: Promise<ExecExit>;
	private readonly listeners: Array<(b: Buffer) => void> = [];
	private readonly opened: Promise<void>;

	constructor(private readonly sock: WebSocketLike) {
		this.opened = new Promise((resolve, reject) => {
			sock.addEventListener("open", () => resolve());
			sock.addEventListener("error", (ev) => reject(new Error(`wsbroker: terminal: ${ev.message ?? "the connection failed"}`)));
		});
		this.opened.catch(() => {});
		this.exit = new Promise((resolve, reject) => {
			let ended = false;
			sock.addEventListener("message", (ev) => {
				if (typeof ev.data !== "string") {
					const b = Buffer.from(ev.data as ArrayBuffer);
					for (const fn of this.listeners) fn(b);
					return;
				}
				const line = JSON.parse(ev.data) as { type: string; code?: string; detail?: string } & ExecExit;
				ended = true;
				if (line.type === "exit") {
					const { type: _t, ...exit } = line;
					resolve(exit);
				} else reject(new Error(`wsbroker: terminal: ${line.detail ?? line.code ?? "failed"}`));
			});
			sock.addEventListener("close", (ev) => {
				if (!ended) reject(new Error(`wsbroker: terminal closed before the command ended (${ev.code ?? ""} ${ev.reason ?? ""})`.trim()));
			});
			sock.addEventListener("error", (ev) => {
				if (!ended) reject(new Error(`wsbroker: terminal: ${ev.message ?? "the connection failed"}`));
			});
		});
		this.exit.catch(() => {});
	}

	/** Calls fn with each chunk the terminal displays (stdout and stderr alike). */
	onData(fn: (b: Buffer) => void): void {
		this.listeners.push(fn);
	}

	/** Types at the terminal: a "\x03" is a Ctrl-C, SIGINT to its foreground group. */
	async write(data: string | Uint8Array): Promise<void> {
		await this.opened;
		this.sock.send(typeof data === "string" ? Buffer.from(data) : data);
	}

	/** Resizes the terminal (its foreground group gets SIGWINCH). */
	async resize(rows: number, cols: number): Promise<void> {
		await this.opened;
		this.sock.send(JSON.stringify({ type: "resize", rows, cols }));
	}

	/** Ends the session; the broker kills the command's whole tree. */
	close(): void {
		this.sock.close(1000, "closed by the client");
	}
}

async function* ndjson(res: IncomingMessage): AsyncGenerator<string> {
	const lines: string[] = [];
	let wake: (() => void) | undefined;
	let done = false;
	let failure: unknown;
	eachLine(res, (l) => {
		lines.push(l);
		wake?.();
	}).then(
		() => {
			done = true;
			wake?.();
		},
		(err) => {
			failure = err;
			done = true;
			wake?.();
		},
	);
	for (;;) {
		while (lines.length > 0) yield lines.shift() as string;
		if (done) break;
		await new Promise<void>((r) => (wake = r));
		wake = undefined;
	}
	if (failure) throw failure;
	if (!res.complete) throw new Error("broker connection closed mid-answer");
}

function logEvent(line: string): LogEvent {
	const l = JSON.parse(line) as { type: string; offset: number; data?: string; next?: number; result?: ExecExit; code?: string; detail?: string };
	switch (l.type) {
		case "output":
			return { type: "output", offset: l.offset, data: Buffer.from(l.data ?? "", "base64") };
		case "dropped":
			return { type: "dropped", offset: l.offset, next: l.next ?? l.offset };
		case "exit":
			return { type: "exit", offset: l.offset, result: l.result ?? { exitCode: -1 } };
		case "error":
			return { type: "error", offset: l.offset, code: l.code ?? "internal", detail: l.detail ?? "" };
		case "end":
			return { type: "end", offset: l.offset };
		default:
			throw new Error(`wsbroker: unknown log line type ${JSON.stringify(l.type)}`);
	}
}
