// Test support: builds the broker from this repository, starts `broker
// serve` on a free loopback port with a temporary state directory and a
// known token (as integrations/pi's tests do), and speaks its HTTP API and
// its MCP endpoints.
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { deflateSync } from "node:zlib";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

/** The repository root (integrations/mcp/test -> ../../..). */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

/** go build ./cmd/broker into a temporary directory removed at exit. */
function buildBroker() {
	const dir = mkdtempSync(path.join(os.tmpdir(), "wsbroker-mcp-bin-"));
	const bin = path.join(dir, "broker");
	execFileSync("go", ["build", "-o", bin, "./cmd/broker"], { cwd: repoRoot, stdio: ["ignore", "inherit", "inherit"] });
	process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
	return bin;
}

/**
 * Starts `broker serve` on 127.0.0.1 (a port the kernel picks) and waits
 * for /healthz. The port is read from the "broker starting" log line.
 */
export async function startBroker() {
	const bin = buildBroker();
	const stateDir = mkdtempSync(path.join(os.tmpdir(), "wsbroker-mcp-state-"));
	const token = randomBytes(32).toString("hex");
	const tokenFile = path.join(stateDir, "token");
	writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
	const args = ["serve", "--listen", "127.0.0.1:0", "--state-dir", stateDir, "--token-file", tokenFile, "--log-level", "info"];
	const proc = spawn(bin, args, { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, BROKER_CONFIG: "" } });
	let log = "";
	const addr = await new Promise((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error(`broker did not start in 60 s:\n${log}`)), 60_000);
		proc.stderr.setEncoding("utf8");
		proc.stderr.on("data", (chunk) => {
			log += chunk;
			for (const line of log.split("\n")) {
				if (!line.startsWith("{")) continue;
				try {
					const rec = JSON.parse(line);
					if (rec.msg === "broker starting" && rec.listen) {
						clearTimeout(timer);
						resolve(rec.listen);
					}
				} catch {
					// a partial line
				}
			}
		});
		proc.on("exit", (code) => {
			clearTimeout(timer);
			reject(new Error(`broker exited with ${code}:\n${log}`));
		});
	});
	const url = `http://${addr}`;
	for (let i = 0; ; i++) {
		try {
			const r = await fetch(`${url}/healthz`);
			if (r.ok) break;
		} catch (err) {
			if (i > 100) throw err;
		}
		await new Promise((r) => setTimeout(r, 100));
	}
	return new Broker(url, token, stateDir, proc);
}

/** A running broker: its HTTP API and MCP clients of it. */
export class Broker {
	constructor(url, token, stateDir, proc) {
		this.url = url;
		this.token = token;
		this.stateDir = stateDir;
		this.proc = proc;
		this.clients = [];
	}

	/** An HTTP API call; JSON bodies are encoded, JSON answers decoded. */
	async api(method, route, body, headers = {}) {
		const init = { method, headers: { Authorization: `Bearer ${this.token}`, ...headers } };
		if (Buffer.isBuffer(body)) {
			init.body = body;
			init.headers["Content-Type"] = "application/octet-stream";
		} else if (body !== undefined) {
			init.body = JSON.stringify(body);
			init.headers["Content-Type"] = "application/json";
		}
		const r = await fetch(this.url + route, init);
		const text = await r.text();
		if (!r.ok) throw new Error(`${method} ${route}: ${r.status} ${text}`);
		const type = r.headers.get("content-type") ?? "";
		return text && /^application\/(.*\+)?json\b/.test(type) ? JSON.parse(text) : text;
	}

	/** A new workspace on backend (POST /v1/workspaces). */
	createWorkspace(backend = "local") {
		return this.api("POST", "/v1/workspaces", { backend });
	}

	/** A tool call through the HTTP tool route, for comparison. */
	httpTool(ws, name, args) {
		return this.api("POST", `/v1/workspaces/${ws}/tools/${name}`, args);
	}

	/**
	 * An MCP client connected over streamable HTTP to route (e.g.
	 * /v1/mcp?backend=local), with the bearer token as a static header.
	 * token: null connects without one.
	 */
	async mcp(route, token = this.token) {
		const headers = token === null ? {} : { Authorization: `Bearer ${token}` };
		const transport = new StreamableHTTPClientTransport(new URL(this.url + route), { requestInit: { headers } });
		const client = new Client({ name: "wsbroker-node-test", version: "0.1.0" });
		await client.connect(transport);
		this.clients.push(client);
		return client;
	}

	async stop() {
		for (const c of this.clients) await c.close().catch(() => {});
		const exited = new Promise((r) => this.proc.once("exit", r));
		this.proc.kill("SIGTERM");
		await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
		if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill("SIGKILL");
		rmSync(this.stateDir, { recursive: true, force: true });
	}
}

/** The text of a tool result's text blocks. */
export function textOf(result) {
	return result.content
		.filter((c) => c.type === "text")
		.map((c) => c.text)
		.join("\n");
}

function crc32(buf) {
	let c = ~0;
	for (const b of buf) {
		c ^= b;
		for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
	}
	return ~c >>> 0;
}

/** A valid RGB PNG of w x h pixels (the broker detects images by their bytes). */
export function makePng(w, h) {
	const chunk = (type, data) => {
		const len = Buffer.alloc(4);
		len.writeUInt32BE(data.length);
		const td = Buffer.concat([Buffer.from(type, "ascii"), data]);
		const crc = Buffer.alloc(4);
		crc.writeUInt32BE(crc32(td));
		return Buffer.concat([len, td, crc]);
	};
	const ihdr = Buffer.alloc(13);
	ihdr.writeUInt32BE(w, 0);
	ihdr.writeUInt32BE(h, 4);
	ihdr[8] = 8; // bit depth
	ihdr[9] = 2; // RGB
	const rows = [];
	for (let y = 0; y < h; y++) {
		const row = Buffer.alloc(1 + 3 * w);
		for (let x = 0; x < w; x++) row.set([(x * 40) & 255, (y * 40) & 255, 128], 1 + 3 * x);
		rows.push(row);
	}
	return Buffer.concat([
		Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
		chunk("IHDR", ihdr),
		chunk("IDAT", deflateSync(Buffer.concat(rows))),
		chunk("IEND", Buffer.alloc(0)),
	]);
}

/** Polls fn every 100 ms until it returns a truthy value or ms pass. */
export async function eventually(fn, ms, what) {
	const end = Date.now() + ms;
	for (;;) {
		const v = await fn();
		if (v) return v;
		if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
		await new Promise((r) => setTimeout(r, 100));
	}
}
