// Terminals: GET /exec/tty, a WebSocket (docs/api.md). The bearer token
// goes in the Authorization header, which the browser's WebSocket API cannot
// send but Node's can: Node 22 has a global WebSocket (undici's, which takes
// {headers} in its second argument). Node 20 has none without
// --experimental-websocket, so there this file speaks the little of RFC
// 6455 a terminal needs itself, over node:http's upgrade: one connection,
// masked client frames, fragmented messages, ping/pong and the close
// handshake. `webSocket: "builtin"` forces that client (the tests use it on
// Node 22 to cover both).
import { createHash, randomBytes } from "node:crypto";
import * as http from "node:http";
import * as https from "node:https";
import type { Duplex } from "node:stream";
import { errorFor } from "./errors.js";
import type { ExecExit } from "./types.js";

/** A terminal session's command and size. */
export interface TerminalOptions {
	command: string;
	cwd?: string;
	/** ["NAME=value"] added to the workspace's environment. */
	env?: string[];
	/** Seconds, the broker's deadline. */
	timeout?: number;
	rows?: number;
	cols?: number;
	/** "global": Node's WebSocket (Node 22+); "builtin": this SDK's own client; default the global one when there is one. */
	webSocket?: "global" | "builtin";
}

/** What the Terminal needs of a WebSocket connection. */
interface Channel {
	send(data: string | Uint8Array): void;
	close(code: number, reason: string): void;
}

interface ChannelEvents {
	open(): void;
	message(data: string | Uint8Array): void;
	close(code: number, reason: string): void;
	error(message: string | Error): void;
}

/**
 * A terminal session: `write` types at it, `onData` gets what it displays,
 * `exit` settles with the command's exit (or rejects with its error). A
 * session that closes before its exit line killed the command's tree.
 */
export class Terminal {
	/** Settles when the command ends. */
	readonly exit: Promise<ExecExit>;
	private readonly listeners: Array<(b: Uint8Array) => void> = [];
	private readonly opened: Promise<void>;
	private channel!: Channel;

	/** @internal */
	constructor(connect: (ev: ChannelEvents) => Channel) {
		let opened!: () => void;
		let failed!: (e: Error) => void;
		this.opened = new Promise((resolve, reject) => {
			opened = resolve;
			failed = reject;
		});
		this.opened.catch(() => {});
		let ended = false;
		let resolveExit!: (e: ExecExit) => void;
		let rejectExit!: (e: Error) => void;
		this.exit = new Promise((resolve, reject) => {
			resolveExit = resolve;
			rejectExit = reject;
		});
		this.exit.catch(() => {});
		this.channel = connect({
			open: opened,
			message: (data) => {
				if (typeof data !== "string") {
					for (const fn of this.listeners) fn(data);
					return;
				}
				const line = JSON.parse(data) as { type: string; code?: string; detail?: string } & ExecExit;
				ended = true;
				if (line.type === "exit") {
					const { type: _t, ...exit } = line;
					resolveExit(exit);
				} else rejectExit(errorFor(line.code, 0, line.detail ?? "terminal failed"));
			},
			close: (code, reason) => {
				const e = new Error(`wsbroker: terminal closed before the command ended (${code} ${reason})`.trim());
				failed(e);
				if (!ended) rejectExit(e);
			},
			error: (message) => {
				const e = message instanceof Error ? message : new Error(`wsbroker: terminal: ${message}`);
				failed(e);
				if (!ended) rejectExit(e);
			},
		});
	}

	/** Calls fn with each chunk the terminal displays (stdout and stderr alike). */
	onData(fn: (b: Uint8Array) => void): void {
		this.listeners.push(fn);
	}

	/** Types at the terminal: a "\x03" is a Ctrl-C, SIGINT to its foreground group. */
	async write(data: string | Uint8Array): Promise<void> {
		await this.opened;
		this.channel.send(typeof data === "string" ? Buffer.from(data) : data);
	}

	/** Resizes the terminal (its foreground group gets SIGWINCH). */
	async resize(rows: number, cols: number): Promise<void> {
		await this.opened;
		this.channel.send(JSON.stringify({ type: "resize", rows, cols }));
	}

	/** Ends the session; the broker kills the command's whole tree. */
	close(): void {
		this.channel.close(1000, "closed by the client");
	}
}

interface GlobalWebSocket {
	binaryType: string;
	send(data: string | Uint8Array): void;
	close(code?: number, reason?: string): void;
	addEventListener(type: string, fn: (ev: { data?: unknown; code?: number; reason?: string; message?: string }) => void): void;
}
type GlobalWebSocketConstructor = new (url: string, init: { headers: Record<string, string> }) => GlobalWebSocket;

/** Opens a terminal at url (http(s)://.../exec/tty?...) with the token. */
export function openTerminal(url: URL, token: string, which: TerminalOptions["webSocket"]): Terminal {
	const WS = (globalThis as unknown as { WebSocket?: GlobalWebSocketConstructor }).WebSocket;
	if (which === "global" && !WS) throw new Error(`wsbroker: Node ${process.versions.node} has no global WebSocket (Node 22 has)`);
	if (WS && which !== "builtin") {
		return new Terminal((ev) => {
			const u = new URL(url);
			u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
			const sock = new WS(u.toString(), { headers: { Authorization: `Bearer ${token}` } });
			sock.binaryType = "arraybuffer";
			let opened = false;
			let failed = false;
			sock.addEventListener("open", () => {
				opened = true;
				ev.open();
			});
			sock.addEventListener("message", (m) => ev.message(typeof m.data === "string" ? m.data : new Uint8Array(m.data as ArrayBuffer)));
			sock.addEventListener("close", (c) => {
				if (!failed) ev.close(c.code ?? 1006, c.reason ?? "");
			});
			sock.addEventListener("error", (e) => {
				if (opened) {
					ev.error(e.message ?? "the connection failed");
					return;
				}
				// Refused before the upgrade: undici says only "non-101 status
				// code". The same URL without the upgrade answers the broker's
				// problem document (a bad query is refused before any upgrade).
				failed = true;
				refusal(url, token).then(ev.error, () => ev.error(e.message ?? "the connection failed"));
			});
			return sock;
		});
	}
	return new Terminal((ev) => builtinWebSocket(url, token, ev));
}

/** The broker's error for a terminal URL it refuses, asked without the upgrade. */
async function refusal(url: URL, token: string): Promise<Error> {
	const r = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });
	const body = await r.text();
	let code: string | undefined;
	let detail = body;
	try {
		const p = JSON.parse(body) as { code?: string; detail?: string };
		code = p.code;
		detail = p.detail ?? body;
	} catch {
		// keep the text
	}
	return errorFor(code, r.status, detail, r.headers.get("x-request-id") ?? undefined);
}

const WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

// builtinWebSocket is the RFC 6455 client for Node without a global WebSocket.
function builtinWebSocket(url: URL, token: string, ev: ChannelEvents): Channel {
	const key = randomBytes(16).toString("base64");
	const mod = url.protocol === "https:" ? https : http;
	const req = mod.request(url, {
		headers: {
			Authorization: `Bearer ${token}`,
			Connection: "Upgrade",
			Upgrade: "websocket",
			"Sec-WebSocket-Key": key,
			"Sec-WebSocket-Version": "13",
		},
	});
	let sock: Duplex | undefined;
	let closed = false;
	const pending: Buffer[] = [];
	const write = (opcode: number, payload: Buffer) => {
		const frame = encodeFrame(opcode, payload);
		if (sock) sock.write(frame);
		else pending.push(frame);
	};
	const done = (code: number, reason: string) => {
		if (closed) return;
		closed = true;
		ev.close(code, reason);
		sock?.end();
	};
	req.on("error", (err) => {
		if (!closed) ev.error(err.message);
		closed = true;
	});
	req.on("response", (res) => {
		// Not upgraded: a problem document (bad query, unknown workspace...).
		const chunks: Buffer[] = [];
		res.on("data", (c: Buffer) => chunks.push(c));
		res.on("end", () => {
			let detail = Buffer.concat(chunks).toString("utf8");
			let code: string | undefined;
			try {
				const p = JSON.parse(detail) as { code?: string; detail?: string };
				code = p.code;
				detail = p.detail ?? detail;
			} catch {
				// keep the text
			}
			const rid = res.headers["x-request-id"];
			ev.error(errorFor(code, res.statusCode ?? 0, detail, typeof rid === "string" ? rid : undefined));
			closed = true;
		});
	});
	req.on("upgrade", (res, socket, head) => {
		const want = createHash("sha1").update(key + WS_GUID).digest("base64");
		if (res.headers["sec-websocket-accept"] !== want) {
			socket.destroy();
			ev.error("the broker's WebSocket handshake answered the wrong Sec-WebSocket-Accept");
			return;
		}
		sock = socket;
		socket.setNoDelay(true);
		ev.open();
		for (const f of pending.splice(0)) socket.write(f);
		readFrames(socket, head, {
			message: ev.message,
			ping: (p) => write(0x9 + 1, p),
			close: (code, reason) => {
				if (!closed) write(0x8, closePayload(code, ""));
				done(code, reason);
			},
		});
		socket.on("close", () => done(1006, "connection lost"));
		socket.on("error", (err) => {
			if (!closed) ev.error(err.message);
		});
	});
	req.end();
	return {
		send: (data) => write(typeof data === "string" ? 0x1 : 0x2, Buffer.from(data)),
		close: (code, reason) => {
			if (closed) return;
			write(0x8, closePayload(code, reason));
			// The broker answers with its close frame; readFrames then ends it.
		},
	};
}

function closePayload(code: number, reason: string): Buffer {
	const b = Buffer.alloc(2 + Buffer.byteLength(reason));
	b.writeUInt16BE(code, 0);
	b.write(reason, 2);
	return b;
}

/** A masked frame from the client (RFC 6455 5.3: every client frame is masked). */
function encodeFrame(opcode: number, payload: Buffer): Buffer {
	const len = payload.length;
	const ext = len < 126 ? 0 : len < 65536 ? 2 : 8;
	const head = Buffer.alloc(2 + ext + 4);
	head[0] = 0x80 | opcode;
	head[1] = 0x80 | (ext === 0 ? len : ext === 2 ? 126 : 127);
	if (ext === 2) head.writeUInt16BE(len, 2);
	else if (ext === 8) head.writeBigUInt64BE(BigInt(len), 2);
	const mask = randomBytes(4);
	mask.copy(head, 2 + ext);
	const body = Buffer.alloc(len);
	for (let i = 0; i < len; i++) body[i] = payload[i] ^ mask[i & 3];
	return Buffer.concat([head, body]);
}

/** Parses the broker's (unmasked) frames as they arrive, joining fragments. */
function readFrames(
	socket: Duplex,
	head: Buffer,
	on: { message(d: string | Uint8Array): void; ping(p: Buffer): void; close(code: number, reason: string): void },
): void {
	let buf = head;
	let fragments: Buffer[] = [];
	let fragOp = 0;
	const parse = () => {
		for (;;) {
			if (buf.length < 2) return;
			const fin = (buf[0] & 0x80) !== 0;
			const op = buf[0] & 0x0f;
			const masked = (buf[1] & 0x80) !== 0;
			let len = buf[1] & 0x7f;
			let at = 2;
			if (len === 126) {
				if (buf.length < 4) return;
				len = buf.readUInt16BE(2);
				at = 4;
			} else if (len === 127) {
				if (buf.length < 10) return;
				len = Number(buf.readBigUInt64BE(2));
				at = 10;
			}
			const maskAt = at;
			if (masked) at += 4;
			if (buf.length < at + len) return;
			let payload = buf.subarray(at, at + len);
			if (masked) {
				const m = buf.subarray(maskAt, maskAt + 4);
				payload = Buffer.from(payload.map((b, i) => b ^ m[i & 3]));
			}
			buf = buf.subarray(at + len);
			if (op === 0x8) {
				on.close(payload.length >= 2 ? payload.readUInt16BE(0) : 1005, payload.subarray(2).toString("utf8"));
				return;
			}
			if (op === 0x9) {
				on.ping(Buffer.from(payload));
				continue;
			}
			if (op === 0xa) continue;
			if (op !== 0) fragOp = op;
			fragments.push(Buffer.from(payload));
			if (!fin) continue;
			const whole = Buffer.concat(fragments);
			fragments = [];
			on.message(fragOp === 0x1 ? whole.toString("utf8") : new Uint8Array(whole));
		}
	};
	socket.on("data", (c: Buffer) => {
		buf = buf.length === 0 ? c : Buffer.concat([buf, c]);
		parse();
	});
	parse();
}
