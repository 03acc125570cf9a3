// Test support: builds the real broker from this repository, starts it on a
// free loopback port with a token, and says whether docker can be tested
// (skipped with the reason locally, a failure under CI=true), as
// integrations/pi/test/helpers.ts does.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { Broker } from "../src/index.js";

export const DOCKER_IMAGE = "wsbroker/workspace:current";

/** The repository root: the nearest folder above this file with a go.mod. */
export const repoRoot = (() => {
	let dir = path.dirname(fileURLToPath(import.meta.url));
	while (!existsSync(path.join(dir, "go.mod"))) {
		const up = path.dirname(dir);
		if (up === dir) throw new Error(`no go.mod above ${fileURLToPath(import.meta.url)}`);
		dir = up;
	}
	return dir;
})();

export function inCI(): boolean {
	if (process.env.CI === "true") return true;
	const v = process.env.BROKER_TEST_DISALLOW_SKIP;
	return v !== undefined && v !== "" && v !== "0";
}

/** Why the docker backend cannot be tested here, or undefined; under CI a reason throws. */
export function dockerUnavailable(): string | undefined {
	let reason: string | undefined;
	try {
		execFileSync("docker", ["version", "--format", "{{.Server.Version}}"], { stdio: "pipe", timeout: 30_000 });
		try {
			execFileSync("docker", ["image", "inspect", DOCKER_IMAGE], { stdio: "pipe", timeout: 30_000 });
		} catch {
			reason = `needs docker image ${DOCKER_IMAGE}; build it with images/workspace/build.sh`;
		}
	} catch (err) {
		reason = `needs a docker engine: ${(err as Error).message.split("\n")[0]}`;
	}
	if (reason && inCI()) throw new Error(`required under CI, cannot skip: ${reason}`);
	return reason;
}

let builtBinary: string | undefined;

/**
 * go build ./cmd/broker (and the in-box agent beside it, where serve looks
 * for it), once per test process; WSBROKER_TEST_BIN_DIR names a folder that
 * already holds both instead.
 */
export function buildBroker(): string {
	if (builtBinary) return builtBinary;
	const given = process.env.WSBROKER_TEST_BIN_DIR;
	if (given) return (builtBinary = path.join(given, "broker"));
	const dir = mkdtempSync(path.join(os.tmpdir(), "wsbroker-sdk-bin-"));
	const bin = path.join(dir, "broker");
	execFileSync("go", ["build", "-o", bin, "./cmd/broker"], { cwd: repoRoot, stdio: ["ignore", "inherit", "inherit"] });
	execFileSync("go", ["build", "-o", path.join(dir, "wsb-agent"), "./cmd/wsb-agent"], {
		cwd: repoRoot,
		stdio: ["ignore", "inherit", "inherit"],
		env: { ...process.env, CGO_ENABLED: "0" },
	});
	builtBinary = bin;
	process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
	return bin;
}

export interface RunningBroker {
	url: string;
	token: string;
	tokenFile: string;
	stateDir: string;
	broker: Broker;
	proc: ChildProcess;
	stop(): Promise<void>;
}

/**
 * Starts `broker serve` on 127.0.0.1 (a port the kernel picks), with docker
 * when asked, and `config` (YAML) as its --config file when given.
 */
export async function startBroker(opts: { docker?: boolean; extraArgs?: string[]; config?: string } = {}): Promise<RunningBroker> {
	const bin = buildBroker();
	const stateDir = mkdtempSync(path.join(os.tmpdir(), "wsbroker-sdk-state-"));
	const token = randomBytes(32).toString("hex");
	const tokenFile = path.join(stateDir, "token");
	writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
	// The broker logs "broker starting" at info: that says the port.
	const args = ["serve", "--listen", "127.0.0.1:0", "--state-dir", stateDir, "--token-file", tokenFile, "--log-level", "info", ...(opts.extraArgs ?? [])];
	if (opts.docker) args.push("--docker");
	if (opts.config !== undefined) {
		const configFile = path.join(stateDir, "config.yaml");
		writeFileSync(configFile, opts.config);
		args.push("--config", configFile);
	}
	const proc = spawn(bin, args, { stdio: ["ignore", "ignore", "pipe"] });
	let log = "";
	const addr = await new Promise<string>((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error(`broker did not start in 60 s:\n${log}`)), 60_000);
		proc.stderr!.setEncoding("utf8");
		proc.stderr!.on("data", (chunk: string) => {
			log += chunk;
			if (log.length > 1 << 20) log = log.slice(-65536);
			for (const line of log.split("\n")) {
				if (!line.startsWith("{")) continue;
				try {
					const rec = JSON.parse(line) as { msg?: string; listen?: string };
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
	const broker = new Broker({ url, token });
	return {
		url,
		token,
		tokenFile,
		stateDir,
		broker,
		proc,
		async stop() {
			for (const ws of await broker.list().catch(() => [])) await ws.delete().catch(() => {});
			broker.close();
			const exited = new Promise((r) => proc.once("exit", r));
			proc.kill("SIGTERM");
			await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
			if (proc.exitCode === null) proc.kill("SIGKILL");
			rmSync(stateDir, { recursive: true, force: true });
		},
	};
}

/** A TCP proxy in front of the broker whose connections a test can cut. */
export async function cuttingProxy(target: string): Promise<{ url: string; connections(): number; cutAll(): void; close(): void }> {
	const u = new URL(target);
	const live = new Set<net.Socket>();
	let count = 0;
	const server = net.createServer((down) => {
		count++;
		const up = net.connect(Number(u.port), u.hostname);
		live.add(down);
		live.add(up);
		down.pipe(up).pipe(down);
		const drop = () => {
			live.delete(down);
			live.delete(up);
			down.destroy();
			up.destroy();
		};
		down.on("error", drop).on("close", drop);
		up.on("error", drop).on("close", drop);
	});
	await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
	const port = (server.address() as net.AddressInfo).port;
	return {
		url: `http://127.0.0.1:${port}`,
		connections: () => count,
		cutAll: () => {
			for (const s of live) s.destroy();
		},
		close: () => server.close(),
	};
}

/** Polls fn until it answers true, or fails after ms. */
export async function eventually(what: string, fn: () => Promise<boolean>, ms = 10_000): Promise<void> {
	const end = Date.now() + ms;
	for (;;) {
		if (await fn()) return;
		if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
		await new Promise((r) => setTimeout(r, 100));
	}
}

/**
 * A TCP proxy that takes each of its first `drops` connections, waits for
 * the request's first bytes, and closes it without an answer (a broker
 * restart, or the keep-alive race); later connections pass through.
 */
export async function droppingProxy(target: string, drops: number): Promise<{ url: string; connections(): number; close(): void }> {
	const u = new URL(target);
	let count = 0;
	const socks = new Set<net.Socket>();
	const server = net.createServer((down) => {
		socks.add(down);
		down.on("close", () => socks.delete(down));
		if (count++ < drops) {
			down.once("data", () => down.destroy());
			down.on("error", () => {});
			return;
		}
		const up = net.connect(Number(u.port), u.hostname);
		socks.add(up);
		down.pipe(up).pipe(down);
		down.on("error", () => up.destroy());
		up.on("error", () => down.destroy());
	});
	await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
	const port = (server.address() as net.AddressInfo).port;
	return {
		url: `http://127.0.0.1:${port}`,
		connections: () => count,
		close: () => {
			for (const s of socks) s.destroy();
			server.close();
		},
	};
}
