// Test support: builds the real broker from the repository, starts it on a
// free loopback port, and creates workspaces on it. Docker-dependent tests
// skip with the reason locally and fail under CI=true (as the Go tests do).
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { deflateSync } from "node:zlib";
import { pi } from "../src/pi.js";
import { BrokerClient, type WorkspaceInfo } from "../src/client.js";
import { type AnyToolDefinition, brokerTools } from "../src/tools.js";

const { createBashTool, createEditTool, createFindTool, createGrepTool, createLsTool, createReadTool, createWriteTool } = pi;

export const DOCKER_IMAGE = "wsbroker/workspace:current";

/**
 * The repository root: the nearest folder above this compiled file with a
 * go.mod (integrations/pi/dist/test, or integrations/pi/versions/<v>/dist/test
 * for the version matrix).
 */
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

/**
 * Why the docker backend cannot be tested here, or undefined when it can.
 * Under CI a reason throws instead: the tests must run there.
 */
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

/**
 * Why the kubernetes backend cannot be tested here (no test cluster: its
 * kubeconfig comes in WSB_KUBECONFIG, see scripts/kube-cluster.sh), or
 * undefined when it can. Under CI a reason throws instead.
 */
export function kubeUnavailable(): string | undefined {
	const kubeconfig = process.env.WSB_KUBECONFIG;
	let reason: string | undefined;
	if (!kubeconfig) reason = "needs a Kubernetes cluster: set WSB_KUBECONFIG (scripts/kube-cluster.sh up)";
	else if (!existsSync(kubeconfig)) reason = `needs a Kubernetes cluster: ${kubeconfig} does not exist`;
	if (reason && inCI()) throw new Error(`required under CI, cannot skip: ${reason}`);
	return reason;
}

export const SSHD_IMAGE = "wsbroker/sshd:current";

/** Why the ssh backend cannot be tested here (an sshd container), or undefined. */
export function sshUnavailable(): string | undefined {
	let reason: string | undefined;
	try {
		execFileSync("sh", ["-c", "command -v ssh-keygen"], { stdio: "pipe" });
		try {
			execFileSync("docker", ["image", "inspect", SSHD_IMAGE], { stdio: "pipe", timeout: 30_000 });
		} catch {
			reason = `needs docker image ${SSHD_IMAGE}; build it with images/sshd/build.sh`;
		}
	} catch {
		reason = "needs ssh-keygen (openssh-client)";
	}
	if (reason && inCI()) throw new Error(`required under CI, cannot skip: ${reason}`);
	return reason;
}

/** An OpenSSH server in a container of its own, reached on a loopback port (a stand-in for a VM). */
export interface SshTarget {
	/** --ssh-* flags of `broker serve` that reach it as host "vm". */
	brokerArgs: string[];
	stop(): void;
}

/** Starts wsbroker/sshd with fresh host and user keys, as backends/ssh/sshtest does. */
export async function startSshd(): Promise<SshTarget> {
	const dir = mkdtempSync(path.join(os.tmpdir(), "wsbroker-pi-sshd-"));
	const hostKey = path.join(dir, "host_ed25519");
	const userKey = path.join(dir, "id_ed25519");
	for (const f of [hostKey, userKey]) execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", f], { stdio: "pipe" });
	const env = { ...process.env, WSB_HOST_KEY: readFileSync(hostKey, "utf8"), WSB_AUTHORIZED_KEYS: readFileSync(`${userKey}.pub`, "utf8").trim() };
	const id = execFileSync("docker", ["run", "-d", "--rm", "-p", "127.0.0.1::22", "--label", "wsbroker.test=pi", "-e", "WSB_HOST_KEY", "-e", "WSB_AUTHORIZED_KEYS", SSHD_IMAGE], { env, encoding: "utf8" }).trim();
	const stop = () => {
		try {
			execFileSync("docker", ["rm", "-f", id], { stdio: "pipe" });
		} catch {
			// already gone
		}
		rmSync(dir, { recursive: true, force: true });
	};
	try {
		for (let i = 0; ; i++) {
			// sshd logs to stderr (-e); docker logs replays it on its own stderr.
			const all = execFileSync("sh", ["-c", 'docker logs "$1" 2>&1', "sh", id], { encoding: "utf8" });
			if (all.includes("Server listening on 0.0.0.0 port 22.")) break;
			if (i > 300) throw new Error(`sshd not ready after 30 s:\n${all}`);
			await new Promise((r) => setTimeout(r, 100));
		}
		const port = execFileSync("docker", ["port", id, "22/tcp"], { encoding: "utf8" })
			.split("\n")
			.map((l) => l.trim())
			.find((l) => l.startsWith("127.0.0.1:"));
		if (!port) throw new Error("sshd container has no 127.0.0.1 port for 22/tcp");
		const knownHosts = path.join(dir, "known_hosts");
		const [type, key] = readFileSync(`${hostKey}.pub`, "utf8").trim().split(" ");
		writeFileSync(knownHosts, `[127.0.0.1]:${port.split(":")[1]} ${type} ${key}\n`);
		return { brokerArgs: ["--ssh-known-hosts", knownHosts, "--ssh-identity", userKey, "--ssh-host", `vm=wsbtest@${port}`], stop };
	} catch (err) {
		stop();
		throw err;
	}
}

let builtBinary: string | undefined;

/** go build ./cmd/broker, once per test process. */
export function buildBroker(): string {
	if (builtBinary) return builtBinary;
	const dir = mkdtempSync(path.join(os.tmpdir(), "wsbroker-pi-bin-"));
	const bin = path.join(dir, "broker");
	execFileSync("go", ["build", "-o", bin, "./cmd/broker"], { cwd: repoRoot, stdio: ["ignore", "inherit", "inherit"] });
	// The in-box agent beside the broker, where serve looks for it (as
	// make build puts it): docker and kubernetes workspaces run through it.
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
	client: BrokerClient;
	stateDir: string;
	proc: ChildProcess;
	/** Creates a workspace (deleted again by stop()). */
	workspace(backend?: string, options?: unknown): Promise<WorkspaceInfo>;
	stop(): Promise<void>;
}

/** Starts `broker serve` on 127.0.0.1 (a port the kernel picks), with docker when asked. */
export async function startBroker(opts: { docker?: boolean; ssh?: SshTarget; kubeconfig?: string } = {}): Promise<RunningBroker> {
	const bin = buildBroker();
	const stateDir = mkdtempSync(path.join(os.tmpdir(), "wsbroker-pi-state-"));
	const token = randomBytes(32).toString("hex");
	const tokenFile = path.join(stateDir, "token");
	writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
	const args = ["serve", "--listen", "127.0.0.1:0", "--state-dir", stateDir, "--token-file", tokenFile, "--log-level", "warn"];
	if (opts.docker) args.push("--docker");
	if (opts.kubeconfig) {
		// The test cluster's images are imported, never pulled.
		const conf = path.join(stateDir, "broker.yaml");
		writeFileSync(conf, `kubernetes:\n  kubeconfig: ${JSON.stringify(opts.kubeconfig)}\n  imagePullPolicy: Never\n`);
		args.push("--config", conf);
	}
	if (opts.ssh) args.push(...opts.ssh.brokerArgs);
	// The broker logs "broker starting" at info; ask for info only to learn the port.
	args[args.indexOf("warn")] = "info";
	const proc = spawn(bin, args, { stdio: ["ignore", "ignore", "pipe"] });
	let log = "";
	const addr = await new Promise<string>((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error(`broker did not start in 60 s:\n${log}`)), 60_000);
		proc.stderr!.setEncoding("utf8");
		proc.stderr!.on("data", (chunk: string) => {
			log += chunk;
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
	const client = new BrokerClient(url, token);
	const created: string[] = [];
	return {
		url,
		token,
		client,
		stateDir,
		proc,
		async workspace(backend, options) {
			const ws = await client.createWorkspace(backend, options);
			created.push(ws.id);
			return ws;
		},
		async stop() {
			for (const id of created) {
				await client.deleteWorkspace(id).catch(() => {});
			}
			client.close();
			const exited = new Promise((r) => proc.once("exit", r));
			proc.kill("SIGTERM");
			await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
			if (proc.exitCode === null) proc.kill("SIGKILL");
			rmSync(stateDir, { recursive: true, force: true });
		},
	};
}

/** The text of a tool result's text blocks. */
export function textOf(r: { content: Array<{ type: string; text?: string }> }): string {
	return r.content
		.filter((c) => c.type === "text")
		.map((c) => c.text)
		.join("\n");
}

/**
 * Runs fn and returns the error it throws, or the text of the error result
 * it returns (pi 1.x returns a failed command as a result with isError
 * instead of throwing; the model sees the same text). Fails otherwise.
 */
export async function rejection(fn: () => Promise<unknown>): Promise<Error> {
	let r: unknown;
	try {
		r = await fn();
	} catch (err) {
		return err as Error;
	}
	const res = r as { isError?: boolean; content?: Array<{ type: string; text?: string }> } | undefined;
	if (res?.isError && res.content) return new Error(textOf({ content: res.content }));
	throw new Error("expected a rejection");
}

function crc32(buf: Buffer): number {
	let c = ~0;
	for (const b of buf) {
		c ^= b;
		for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
	}
	return ~c >>> 0;
}

/** A valid RGB PNG of w x h pixels (pi detects images by their bytes, not their names). */
export function makePng(w: number, h: number): Buffer {
	const chunk = (type: string, data: Buffer) => {
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
	const rows: Buffer[] = [];
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

/** pi's seven built-in tools on a host directory, by name. */
export function piLocalTools(dir: string): Record<string, AnyToolDefinition> {
	return {
		read: createReadTool(dir),
		write: createWriteTool(dir),
		edit: createEditTool(dir),
		bash: createBashTool(dir),
		grep: createGrepTool(dir),
		find: createFindTool(dir),
		ls: createLsTool(dir),
	} as unknown as Record<string, AnyToolDefinition>;
}

/** brokerTools on a workspace of broker, by name. */
export function brokerToolsByName(broker: RunningBroker, ws: WorkspaceInfo): { tools: Record<string, AnyToolDefinition>; close(): void } {
	const t = brokerTools({ url: broker.url, token: broker.token, workspace: ws.id, root: ws.root, pi });
	return { tools: Object.fromEntries(t.all.map((d) => [d.name, d])), close: () => t.client.close() };
}
