// POST /exec as a stream of output chunks (docs/api.md, exec). Cancelling
// (the caller's AbortSignal, or leaving the loop early) closes only the
// sending half of the connection: the broker takes that as the client
// leaving, kills the command's whole tree, and still writes its exit line,
// which is awaited (at most CANCEL_GRACE_MS, then the connection is dropped,
// which kills the tree too) so that a cancelled stream has ended only once
// the tree is gone.
import type { ClientRequest, IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import { AbortError, ERROR_CODES, errorFor } from "./errors.js";
import { type Body, type Transport, ndjson } from "./http.js";
import type { ExecExit } from "./types.js";

const CANCEL_GRACE_MS = 10_000;

/** How a command runs. */
export interface ExecOptions {
	/** Working directory, relative to the workspace root; default the root. */
	cwd?: string;
	/** Variables added to the workspace's environment: {NAME: value} or ["NAME=value"]. */
	env?: Record<string, string> | string[];
	/** The broker's deadline in seconds (fractions allowed): the tree is killed and the exit says timedOut. */
	timeout?: number;
	/** The command's stdin (bytes, text, or a stream read as it comes); default /dev/null. */
	stdin?: Body;
	/** Cancels the command: its whole tree is killed. AbortSignal.timeout(ms) makes a client-side deadline. */
	signal?: AbortSignal;
}

/** One event of an exec stream. */
export type ExecEvent = { type: "output"; data: Uint8Array } | ({ type: "exit" } & ExecExit);

export function envList(env: ExecOptions["env"]): string[] | undefined {
	if (env === undefined) return undefined;
	if (Array.isArray(env)) return env;
	return Object.entries(env).map(([k, v]) => `${k}=${v}`);
}

/**
 * A running command's output, chunk by chunk (stdout and stderr
 * interleaved as read): `for await (const chunk of stream)`. `exit` settles
 * with the exit once the loop has read it; `wait()` reads (and drops) the
 * rest and answers the exit. Output is pulled from the connection as the
 * loop asks for it, so a slow reader holds the command's output back
 * instead of buffering it.
 */
export class ExecStream implements AsyncIterable<Uint8Array> {
	/** The exit line; rejects with AbortError when cancelled, a BrokerError when refused or failed. */
	readonly exit: Promise<ExecExit>;
	private resolveExit!: (e: ExecExit) => void;
	private rejectExit!: (e: unknown) => void;
	private readonly started: Promise<{ res: IncomingMessage; req: ClientRequest }>;
	private req?: ClientRequest;
	private cancelled = false;
	private consumed = false;
	private graceTimer?: NodeJS.Timeout;
	private readonly onAbort = () => this.cancel();

	constructor(
		t: Transport,
		path: string,
		command: string,
		private readonly opts: ExecOptions = {},
	) {
		this.exit = new Promise((resolve, reject) => {
			this.resolveExit = resolve;
			this.rejectExit = reject;
		});
		this.exit.catch(() => {}); // the loop reports it too
		const env = envList(opts.env);
		const common = {
			method: "POST",
			path,
			accept: "application/x-ndjson",
			idempotent: false,
			onRequest: (r: ClientRequest) => {
				this.req = r;
				if (this.cancelled) this.halfClose();
			},
		};
		opts.signal?.addEventListener("abort", this.onAbort, { once: true });
		if (opts.stdin === undefined) {
			const body: Record<string, unknown> = { command };
			if (opts.cwd) body.cwd = opts.cwd;
			if (env) body.env = env;
			if (opts.timeout) body.timeout = opts.timeout;
			this.started = t.request({ ...common, body: JSON.stringify(body), contentType: "application/json" });
		} else {
			const query: Record<string, string | string[] | undefined> = { command, cwd: opts.cwd, env, timeout: opts.timeout ? String(opts.timeout) : undefined };
			this.started = t.request({ ...common, query, body: opts.stdin, contentType: "application/octet-stream" });
		}
		this.started.catch((err) => this.finish(err));
		if (opts.signal?.aborted) this.cancel();
	}

	/** Kills the command's tree; the loop then ends (with AbortError when the signal did it). */
	cancel(): void {
		if (this.cancelled) return;
		this.cancelled = true;
		this.halfClose();
	}

	private halfClose(): void {
		const r = this.req;
		if (!r) return;
		const end = (s: Socket) => s.end();
		if (r.socket) end(r.socket);
		else r.once("socket", end);
		this.graceTimer ??= setTimeout(() => r.destroy(), CANCEL_GRACE_MS);
	}

	private finish(err?: unknown, exit?: ExecExit): void {
		this.opts.signal?.removeEventListener("abort", this.onAbort);
		if (this.graceTimer) clearTimeout(this.graceTimer);
		if (this.cancelled) {
			// The connection is half-closed: it cannot carry another call.
			this.req?.destroy();
		}
		if (exit && !(this.cancelled && this.opts.signal?.aborted)) this.resolveExit(exit);
		else if (this.cancelled && this.opts.signal?.aborted) this.rejectExit(new AbortError("the command was cancelled; its tree was killed", { cause: this.opts.signal.reason }));
		else this.rejectExit(err ?? new Error("wsbroker: the exec stream ended without an exit line"));
	}

	async *[Symbol.asyncIterator](): AsyncGenerator<Uint8Array> {
		if (this.consumed) throw new Error("wsbroker: an exec stream can be read once");
		this.consumed = true;
		let finished = false;
		try {
			for await (const ev of this.events()) {
				if (ev.type === "output") {
					if (!this.cancelled) yield ev.data;
				} else {
					finished = true;
					const { type: _t, ...exit } = ev;
					this.finish(undefined, exit);
				}
			}
			if (!finished) {
				finished = true;
				this.finish(new Error("wsbroker: the broker closed the exec stream before the command exited"));
			}
		} catch (err) {
			if (!finished) {
				finished = true;
				this.finish(err);
			}
		} finally {
			if (!finished) {
				// The loop was left early: kill the command and wait for the broker to say it is gone.
				this.cancel();
				try {
					for await (const ev of this.events()) {
						if (ev.type === "exit") {
							const { type: _t, ...exit } = ev;
							this.finish(undefined, exit);
							finished = true;
						}
					}
				} catch {
					// the connection went with it: the tree is killed all the same
				}
				if (!finished) this.finish(new AbortError("the loop was left; the command was killed"));
			}
		}
		await this.exit; // throws AbortError, or the failure
	}

	/** Reads (and drops) the rest of the output and answers the exit. */
	async wait(): Promise<ExecExit> {
		if (!this.consumed) for await (const _ of this) void _;
		return this.exit;
	}

	private res?: IncomingMessage;
	private lines?: AsyncGenerator<string>;

	private async *events(): AsyncGenerator<ExecEvent> {
		if (!this.res) {
			this.res = (await this.started).res;
			this.lines = ndjson(this.res);
		}
		for (;;) {
			const n = await this.lines!.next();
			if (n.done) return;
			const line = n.value;
			let ev: { type: string; data?: string; code?: string; detail?: string } & ExecExit;
			try {
				ev = JSON.parse(line);
			} catch {
				throw new Error(`wsbroker: the broker sent a malformed exec line: ${line.slice(0, 200)}`);
			}
			if (ev.type === "output") yield { type: "output", data: Buffer.from(ev.data ?? "", "base64") };
			else if (ev.type === "exit") yield ev as ExecEvent;
			else if (ev.type === "error") {
				const code = ev.code ?? "internal";
				throw errorFor(code, ERROR_CODES.find((c) => c.name === code)?.status ?? 500, ev.detail ?? "");
			}
		}
	}
}

/** What run() answers: the exit, with the whole output. */
export interface RunResult extends ExecExit {
	/** stdout and stderr interleaved as read, as bytes. */
	output: Uint8Array;
	/** The output as UTF-8 text. */
	text: string;
}

/** Runs the stream to its end, keeping the output. */
export async function collect(s: ExecStream): Promise<RunResult> {
	const parts: Uint8Array[] = [];
	for await (const c of s) parts.push(c);
	const exit = await s.exit;
	const output = Buffer.concat(parts);
	return { ...exit, output, text: output.toString("utf8") };
}
