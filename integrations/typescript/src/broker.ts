// The entry point: a Broker (URL and token, found as the CLI finds them)
// that creates, gets and lists workspaces.
import { readFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { Transport } from "./http.js";
import type { EnvVar, WorkspaceInfo } from "./types.js";
import { Workspace } from "./workspace.js";

/** The broker the CLI reaches when nothing says otherwise (cli's defaultURL). */
export const DEFAULT_URL = "http://127.0.0.1:8722";

export interface BrokerOptions {
	/** Default $BROKER_URL, else http://127.0.0.1:8722. */
	url?: string;
	/**
	 * Default $BROKER_TOKEN, else the file $BROKER_TOKEN_FILE, else the file
	 * `broker serve` wrote: $BROKER_STATE_DIR/token, $XDG_STATE_HOME/wsbroker/token
	 * or ~/.local/state/wsbroker/token.
	 */
	token?: string;
	/** Where to read the token instead (same default chain). */
	tokenFile?: string;
	/** The environment read for those defaults; default process.env. */
	env?: NodeJS.ProcessEnv;
	/** Connections kept open to the broker at most (default 64). */
	maxSockets?: number;
}

/** What a new workspace is. */
export interface CreateOptions {
	/** "local", "docker", "ssh", "kubernetes": default the broker's default backend. */
	backend?: string;
	/**
	 * A named workspace spec of the broker's configuration (its `profiles:`),
	 * instead of backend and options: naming one with either, or an unknown
	 * one, is an InvalidError naming it. The tenant's backends, images and
	 * quota apply to what it resolves to.
	 */
	profile?: string;
	/** The backend's own options, e.g. {limits: {memory: "512MiB"}} for docker (docs/api.md). */
	options?: Record<string, unknown>;
	/** The workspace's environment: every command sees it; secrets are redacted from every output. */
	env?: EnvVar[] | Record<string, string>;
	/** Leave it in place when disposed (`await using`). */
	keep?: boolean;
	signal?: AbortSignal;
}

/** Resolves the broker URL and token the way the CLI does (cli/config.go). */
export function resolveConnection(opts: BrokerOptions = {}): { url: string; token: string } {
	const env = opts.env ?? process.env;
	const url = opts.url ?? (env.BROKER_URL || DEFAULT_URL);
	let token = opts.token ?? (opts.tokenFile ? undefined : env.BROKER_TOKEN?.trim());
	if (!token) {
		const stateDir = env.BROKER_STATE_DIR || path.join(env.XDG_STATE_HOME || path.join(os.homedir(), ".local", "state"), "wsbroker");
		const file = opts.tokenFile ?? (env.BROKER_TOKEN_FILE || path.join(stateDir, "token"));
		try {
			token = readFileSync(file, "utf8").trim();
		} catch (err) {
			throw new Error(`wsbroker: no token: pass token, or set BROKER_TOKEN or BROKER_TOKEN_FILE (${(err as Error).message})`);
		}
		if (!token) throw new Error(`wsbroker: the token file ${file} is empty`);
	}
	return { url, token };
}

/** A broker: `const broker = new Broker()` finds it as `broker` the CLI does. */
export class Broker {
	readonly url: string;
	/** @internal */
	readonly transport: Transport;

	constructor(opts: BrokerOptions = {}) {
		const c = resolveConnection(opts);
		this.url = c.url;
		this.transport = new Transport(c.url, c.token, { maxSockets: opts.maxSockets });
	}

	/** Creates a workspace. `await using ws = await broker.create({backend: "docker"})` deletes it after. */
	async create(opts: CreateOptions = {}): Promise<Workspace> {
		const body: Record<string, unknown> = {};
		if (opts.backend) body.backend = opts.backend;
		if (opts.profile) body.profile = opts.profile;
		if (opts.options !== undefined) body.options = opts.options;
		if (opts.env) {
			const env = Array.isArray(opts.env) ? opts.env : Object.entries(opts.env).map(([name, value]) => ({ name, value }));
			if (env.length > 0) body.env = env;
		}
		const info = await this.transport.json<WorkspaceInfo>({ method: "POST", path: "/v1/workspaces", body: JSON.stringify(body), contentType: "application/json", signal: opts.signal });
		return new Workspace(this.transport, info, opts.keep ?? false);
	}

	/** An existing workspace (a NotFoundError for an unknown id). Disposing it leaves it in place unless keep is false. */
	async get(id: string, opts: { keep?: boolean; signal?: AbortSignal } = {}): Promise<Workspace> {
		const info = await this.transport.json<WorkspaceInfo>({ method: "GET", path: `/v1/workspaces/${encodeURIComponent(id)}`, signal: opts.signal });
		return new Workspace(this.transport, info, opts.keep ?? true);
	}

	/** The workspaces this token sees, oldest first. */
	async list(opts: { signal?: AbortSignal } = {}): Promise<Workspace[]> {
		const r = await this.transport.json<{ workspaces: WorkspaceInfo[] }>({ method: "GET", path: "/v1/workspaces", signal: opts.signal });
		return r.workspaces.map((info) => new Workspace(this.transport, info, true));
	}

	/** Closes idle connections (a process then exits at once). */
	close(): void {
		this.transport.close();
	}

	[Symbol.dispose](): void {
		this.close();
	}
}
