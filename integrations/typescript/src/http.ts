// The HTTP transport to one broker. It is node:http rather than fetch for
// three things fetch cannot do: close only the sending half of a connection
// (an exec cancelled that way still gets the broker's exit line, written
// after the command's tree is killed: docs/api.md, exec), read trailers (a
// tar download's report comes in one, and a tar without it was cut short),
// and keep the per-call cost low (undici's fetch adds a few tenths of a
// millisecond per call). What callers see is web-standard: AbortSignal,
// Uint8Array, ReadableStream and async iterables.
import * as http from "node:http";
import * as https from "node:https";
import { Readable } from "node:stream";
import { AbortError, type BrokerError, ConnectionError, TooManyRequestsError, errorFor } from "./errors.js";

/** What a request body may be: bytes, text, or a stream of bytes (web or Node). */
export type Body = Uint8Array | string | Readable | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

export interface RequestOptions {
	method: string;
	/** An absolute /v1/... path. */
	path: string;
	query?: Record<string, string | string[] | undefined>;
	body?: Body;
	contentType?: string;
	accept?: string;
	signal?: AbortSignal;
	/** Use a connection of its own (exec and followed logs: such a connection is half-closed or cut on cancel). */
	ownConnection?: boolean;
	/** Called with the request as soon as it exists (before any answer). */
	onRequest?: (req: http.ClientRequest) => void;
	/** Turns the broker's error into the caller's (pi's tools want Node's errno shapes). */
	mapError?: (err: BrokerError) => Error;
	/**
	 * Whether the call may be sent again when the connection drops before a
	 * whole answer: default true for GET, false for everything else. A
	 * streamed body is never sent twice.
	 */
	idempotent?: boolean;
}

/** An answer whose headers arrived (2xx only: others are thrown). */
export interface Answer {
	res: http.IncomingMessage;
	req: http.ClientRequest;
}

// Node's messages for a connection that broke (the keep-alive race: the
// broker closed an idle connection as the request went out on it).
const DROPPED = new Set(["ECONNRESET", "EPIPE", "ECONNABORTED", "UND_ERR_SOCKET"]);

function droppedConnection(err: unknown): boolean {
	const e = err as { code?: string; message?: string };
	return (e.code !== undefined && DROPPED.has(e.code)) || e.message === "socket hang up" || e.message === "broker connection closed mid-answer";
}

/** Low-level access to one broker: requests with the bearer token, problem documents as errors. */
export class Transport {
	readonly base: URL;
	private readonly agent: http.Agent;
	private readonly mod: typeof http | typeof https;

	constructor(
		url: string,
		readonly token: string,
		opts: { maxSockets?: number } = {},
	) {
		this.base = new URL(url.endsWith("/") ? url : `${url}/`);
		if (this.base.protocol !== "http:" && this.base.protocol !== "https:") {
			throw new TypeError(`wsbroker: broker URL ${JSON.stringify(url)} is not http:// or https://`);
		}
		this.mod = this.base.protocol === "https:" ? https : http;
		this.agent = new this.mod.Agent({ keepAlive: true, maxSockets: opts.maxSockets ?? 64 });
	}

	/** Closes idle keep-alive connections (lets a process exit at once). */
	close(): void {
		this.agent.destroy();
	}

	/** The URL of a broker path with a query. */
	url(path: string, query?: RequestOptions["query"]): URL {
		const u = new URL(path.replace(/^\//, ""), this.base);
		for (const [k, v] of Object.entries(query ?? {})) {
			if (v === undefined) continue;
			if (Array.isArray(v)) for (const x of v) u.searchParams.append(k, x);
			else u.searchParams.set(k, v);
		}
		return u;
	}

	/**
	 * Sends a request and returns once the answer's headers arrived; non-2xx
	 * answers become BrokerErrors. A dropped connection is retried once for
	 * an idempotent call with a replayable body, and is a ConnectionError
	 * otherwise.
	 */
	async request(o: RequestOptions): Promise<Answer> {
		const idem = (o.idempotent ?? (o.method === "GET" || o.method === "HEAD")) && !isStream(o.body);
		try {
			return await this.once(o);
		} catch (err) {
			if (!droppedConnection(err) || o.signal?.aborted) throw err;
			if (!idem) throw connectionError(o, err, true);
		}
		try {
			return await this.once(o);
		} catch (err) {
			if (droppedConnection(err) && !o.signal?.aborted) throw connectionError(o, err, false);
			throw err;
		}
	}

	private once(o: RequestOptions): Promise<Answer> {
		const headers: Record<string, string> = { Authorization: `Bearer ${this.token}` };
		if (o.contentType) headers["Content-Type"] = o.contentType;
		if (o.accept) headers.Accept = o.accept;
		let body = o.body;
		if (typeof body === "string") body = Buffer.from(body, "utf8");
		if (body instanceof Uint8Array) headers["Content-Length"] = String(body.byteLength);
		else if (body === undefined && o.method !== "GET" && o.method !== "HEAD") headers["Content-Length"] = "0";
		if (o.signal?.aborted) return Promise.reject(new AbortError());
		return new Promise((resolve, reject) => {
			const req = this.mod.request(this.url(o.path, o.query), {
				method: o.method,
				headers,
				agent: o.ownConnection ? false : this.agent,
				signal: o.signal,
			});
			o.onRequest?.(req);
			req.on("error", (err) => reject(o.signal?.aborted ? new AbortError(undefined, { cause: err }) : err));
			req.on("response", (res) => {
				const status = res.statusCode ?? 0;
				if (status >= 200 && status < 300) {
					resolve({ res, req });
					return;
				}
				readAll(res).then(
					(buf) => {
						const e = problemError(status, buf, res.headers);
						reject(o.mapError ? o.mapError(e) : e);
					},
					(err) => reject(err),
				);
			});
			if (body === undefined || body instanceof Uint8Array) {
				req.end(body);
				return;
			}
			const src = toReadable(body);
			src.on("error", (err) => req.destroy(err));
			src.pipe(req);
		});
	}

	/** A request whose whole answer is read; a read is retried once when its answer breaks off. */
	async call(o: RequestOptions): Promise<Buffer> {
		const idem = (o.idempotent ?? (o.method === "GET" || o.method === "HEAD")) && !isStream(o.body);
		for (let attempt = 0; ; attempt++) {
			const { res } = await this.request(o);
			try {
				return await readAll(res);
			} catch (err) {
				if (o.signal?.aborted) throw new AbortError(undefined, { cause: err });
				if (!droppedConnection(err)) throw err;
				if (!idem) throw connectionError(o, err, true);
				if (attempt > 0) throw connectionError(o, err, false);
			}
		}
	}

	/** A request whose answer is JSON. */
	async json<T>(o: RequestOptions): Promise<T> {
		return JSON.parse((await this.call(o)).toString("utf8")) as T;
	}
}

function isStream(b: Body | undefined): boolean {
	return b !== undefined && typeof b !== "string" && !(b instanceof Uint8Array);
}

function toReadable(b: Readable | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>): Readable {
	if (b instanceof Readable) return b;
	if (typeof (b as ReadableStream).getReader === "function") return Readable.fromWeb(b as import("node:stream/web").ReadableStream<Uint8Array>);
	return Readable.from(b as AsyncIterable<Uint8Array>, { objectMode: false });
}

function connectionError(o: RequestOptions, err: unknown, mutation: boolean): ConnectionError {
	const what = `${o.method} ${o.path}`;
	const msg = mutation
		? `wsbroker: ${what}: the connection to the broker broke (${(err as Error).message}); not retried: the broker may or may not have done it`
		: `wsbroker: ${what}: the connection to the broker broke twice (${(err as Error).message})`;
	return new ConnectionError(msg, mutation, { cause: err });
}

function problemError(status: number, body: Buffer, headers: http.IncomingHttpHeaders): BrokerError {
	let code: string | undefined;
	let detail = body.toString("utf8").trim();
	try {
		const p = JSON.parse(detail) as { code?: string; detail?: string };
		code = p.code;
		detail = p.detail ?? "";
	} catch {
		// not a problem document (a proxy's page...): keep the text
	}
	const rid = headers["x-request-id"];
	const e = errorFor(code, status, detail, typeof rid === "string" ? rid : undefined);
	if (e instanceof TooManyRequestsError && headers["retry-after"]) e.retryAfter = Number(headers["retry-after"]);
	return e;
}

/** The whole of a stream; an answer that breaks off rejects. */
export function readAll(stream: Readable): Promise<Buffer> {
	return new Promise((resolve, reject) => {
		const chunks: Buffer[] = [];
		stream.on("data", (c: Buffer) => chunks.push(c));
		stream.on("end", () => resolve(Buffer.concat(chunks)));
		stream.on("error", reject);
		stream.on("aborted", () => reject(new Error("broker connection closed mid-answer")));
	});
}

/** The lines of an NDJSON answer as they come; an answer that breaks off throws. */
export async function* ndjson(res: http.IncomingMessage): AsyncGenerator<string> {
	let pending = "";
	res.setEncoding("utf8");
	try {
		for await (const chunk of res as AsyncIterable<string>) {
			pending += chunk;
			let i: number;
			while ((i = pending.indexOf("\n")) >= 0) {
				const line = pending.slice(0, i);
				pending = pending.slice(i + 1);
				if (line.trim() !== "") yield line;
			}
		}
	} catch (err) {
		if (droppedConnection(err) || (err as Error).message === "aborted") throw new Error("broker connection closed mid-answer", { cause: err });
		throw err;
	}
	if (pending.trim() !== "") yield pending;
	if (!res.complete) throw new Error("broker connection closed mid-answer");
}
