// Background processes by handle (docs/api.md, "Background processes"):
// started at once, their output in a log on the broker read by byte offset,
// each killed with its whole tree when removed or its workspace deleted.
import type { ClientRequest, IncomingMessage } from "node:http";
import { type Body, type Transport, ndjson } from "./http.js";
import type { BackgroundProcess, ExecExit, LogEvent, SignalName, StartProcessRequest } from "./types.js";

// How long a following reader waits before asking again after its
// connection broke, and how many times in a row it tries.
const RESUME_DELAY_MS = 500;
const RESUME_TRIES = 5;

/** What a read of a process's log answers: its output from a cursor to where it stands now. */
export interface LogRead {
	/** The output bytes from the cursor asked (or from the oldest the log still holds). */
	data: Uint8Array;
	/** Where the next read starts. */
	cursor: number;
	/** Bytes the log no longer held (it wrapped) between the cursor asked and data. */
	dropped: number;
	/** How it ended, once it has: its exit, or the error that stopped it. */
	exit?: ExecExit;
	error?: { code: string; detail: string };
}

/** A workspace's background processes: `ws.processes.start("npm run dev")`. */
export class Processes {
	constructor(
		private readonly t: Transport,
		private readonly prefix: string,
	) {}

	/** Starts a command in the background and answers its handle at once. */
	start(command: string | StartProcessRequest, opts: Omit<StartProcessRequest, "command"> = {}): Promise<BackgroundProcess> {
		const req = typeof command === "string" ? { ...opts, command } : command;
		return this.t.json({ method: "POST", path: `${this.prefix}/processes`, body: JSON.stringify(req), contentType: "application/json" });
	}

	/** The workspace's background processes, running and ended. */
	async list(): Promise<BackgroundProcess[]> {
		const r = await this.t.json<{ background?: BackgroundProcess[] }>({ method: "GET", path: `${this.prefix}/processes` });
		return r.background ?? [];
	}

	/** One process as it stands. */
	get(id: string): Promise<BackgroundProcess> {
		return this.t.json({ method: "GET", path: this.path(id) });
	}

	/**
	 * The process once it has ended, or after timeout seconds (the broker's
	 * default 30, at most 600) still running: a wait that times out is an
	 * answer, not an error.
	 */
	wait(id: string, opts: { timeout?: number; signal?: AbortSignal } = {}): Promise<BackgroundProcess> {
		return this.t.json({ method: "GET", path: `${this.path(id)}/wait`, query: { timeout: opts.timeout === undefined ? undefined : String(opts.timeout) }, signal: opts.signal });
	}

	/** Sends a signal to every process of its tree. */
	async signal(id: string, sig: SignalName): Promise<void> {
		await this.t.call({ method: "POST", path: `${this.path(id)}/signal`, body: JSON.stringify({ signal: sig }), contentType: "application/json" });
	}

	/** Kills its tree if it still runs, forgets it, deletes its log, and answers it as it ended. */
	kill(id: string): Promise<BackgroundProcess> {
		return this.t.json({ method: "DELETE", path: this.path(id) });
	}

	/** Writes to the stdin of a process started with `stdin: true`; answers the bytes taken. `close` closes it after. */
	async sendStdin(id: string, data: Body, opts: { close?: boolean; signal?: AbortSignal } = {}): Promise<number> {
		const r = await this.t.json<{ written: number }>({
			method: "POST",
			path: `${this.path(id)}/stdin`,
			query: { close: opts.close ? "true" : undefined },
			body: data,
			contentType: "application/octet-stream",
			signal: opts.signal,
		});
		return r.written;
	}

	/** Closes its stdin (EOF). */
	async closeStdin(id: string): Promise<void> {
		await this.t.call({ method: "DELETE", path: `${this.path(id)}/stdin` });
	}

	/**
	 * Its output from cursor (a byte offset, default 0) to what it has
	 * written so far, and how it ended if it has: call again with the
	 * answered cursor for what came since.
	 */
	async read(id: string, cursor = 0, signal?: AbortSignal): Promise<LogRead> {
		const parts: Uint8Array[] = [];
		const out: LogRead = { data: new Uint8Array(), cursor, dropped: 0 };
		for await (const ev of this.logs(id, { cursor, signal })) {
			if (ev.type === "output") parts.push(ev.data);
			else if (ev.type === "dropped") out.dropped += ev.next - ev.offset;
			else if (ev.type === "exit") out.exit = ev.result;
			else if (ev.type === "error") out.error = { code: ev.code, detail: ev.detail };
			out.cursor = ev.type === "output" ? ev.offset + ev.data.length : ev.type === "dropped" ? ev.next : ev.offset;
		}
		out.data = Buffer.concat(parts);
		return out;
	}

	/**
	 * The process's log from byte `cursor` (default 0) as events. With
	 * `follow` it goes on until the process ends, and a broken connection is
	 * resumed from the offset after the last byte received, so nothing is
	 * lost or seen twice. Leaving the loop early closes the connection.
	 */
	async *logs(id: string, opts: { cursor?: number; follow?: boolean; signal?: AbortSignal } = {}): AsyncGenerator<LogEvent> {
		let offset = opts.cursor ?? 0;
		let failures = 0;
		for (;;) {
			let last: LogEvent | undefined;
			try {
				for await (const ev of this.logsOnce(id, offset, opts.follow ?? false, opts.signal)) {
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
			if (!opts.follow) throw new Error(`wsbroker: the log of ${id} ended before its last line`);
			if (++failures > RESUME_TRIES) throw new Error(`wsbroker: the log of ${id} keeps breaking off at offset ${offset}`);
			await new Promise((r) => setTimeout(r, RESUME_DELAY_MS));
		}
	}

	private async *logsOnce(id: string, offset: number, follow: boolean, signal?: AbortSignal): AsyncGenerator<LogEvent> {
		const query = { offset: String(offset), follow: follow ? "true" : undefined };
		let ans: { res: IncomingMessage; req: ClientRequest };
		ans = await this.t.request({ method: "GET", path: `${this.path(id)}/logs`, query, accept: "application/x-ndjson", signal, ownConnection: follow });
		try {
			for await (const line of ndjson(ans.res)) yield logEvent(line);
		} finally {
			if (!ans.res.complete) ans.req.destroy();
		}
	}

	private path(id: string): string {
		return `${this.prefix}/processes/${encodeURIComponent(id)}`;
	}
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
