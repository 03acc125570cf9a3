// The pi extension: `pi -e <this file>` puts the agent's seven tools and the
// user's `!` commands into a broker workspace.
//
// Configuration (flags win over environment variables):
//   --broker-url / BROKER_URL               default http://127.0.0.1:8722
//   BROKER_TOKEN, or BROKER_TOKEN_FILE      default <state dir>/token, the state dir being
//                                           $BROKER_STATE_DIR, $XDG_STATE_HOME/wsbroker or
//                                           ~/.local/state/wsbroker (as for `broker serve`)
//   --broker-workspace / BROKER_WORKSPACE   attach to this workspace; otherwise one is created
//   --broker-backend / BROKER_BACKEND       backend of a created workspace (local, docker, ssh)
//   --broker-options / BROKER_OPTIONS       its creation options, as JSON
//   --broker-env / BROKER_ENV_ALLOWLIST     comma-separated names of pi's environment
//                                           forwarded to commands (default: PI_* session names)
//   --broker-secret-env / BROKER_SECRET_ENV comma-separated names of pi's environment set as
//                                           the created workspace's secrets (redacted from output)
//   --broker-process-tools / BROKER_PROCESS_TOOLS
//                                           "off" leaves out the background process tools
//
// The tools are built with the factories of the pi that loaded the
// extension, found from the factory's callers (src/host.ts), never with
// another copy of pi that the extension's folder happens to hold.
import { readFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { type Pi, callerFiles, loadHostPi } from "./host.js";
import { BrokerClient, type EnvVar, type WorkspaceInfo } from "./client.js";
import { DEFAULT_ENV_ALLOWLIST, brokerOperations } from "./operations.js";
import { PROCESS_TOOL_NAMES, processTools } from "./process-tools.js";
import { type AnyToolDefinition, type BrokerTools, brokerTools, userBashOperations } from "./tools.js";
import { Workspace } from "@wsbroker/sdk";

export interface ExtensionSettings {
	url: string;
	token: string;
	workspace?: string;
	backend?: string;
	options?: unknown;
	envAllowlist: string[];
	/** A created workspace's environment: secrets taken from pi's environment. */
	workspaceEnv: EnvVar[];
	/** Whether the model gets the background process tools. */
	processTools: boolean;
}

/** Reads the settings from flag values and the environment. */
export function resolveSettings(flag: (name: string) => string | undefined, env: NodeJS.ProcessEnv = process.env): ExtensionSettings {
	const pick = (f: string, e: string) => {
		const v = flag(f) ?? env[e];
		return v === undefined || v === "" ? undefined : v;
	};
	let token = env.BROKER_TOKEN?.trim();
	if (!token) {
		// Where `broker serve` puts it by default (cli/config.go).
		const stateDir = env.BROKER_STATE_DIR || path.join(env.XDG_STATE_HOME || path.join(os.homedir(), ".local", "state"), "wsbroker");
		const file = env.BROKER_TOKEN_FILE || path.join(stateDir, "token");
		try {
			token = readFileSync(file, "utf8").trim();
		} catch (err) {
			throw new Error(`wsbroker: no token: set BROKER_TOKEN or BROKER_TOKEN_FILE (${(err as Error).message})`);
		}
	}
	const optionsText = pick("broker-options", "BROKER_OPTIONS");
	let options: unknown;
	if (optionsText) {
		try {
			options = JSON.parse(optionsText);
		} catch (err) {
			throw new Error(`wsbroker: --broker-options is not JSON: ${(err as Error).message}`);
		}
	}
	const envList = pick("broker-env", "BROKER_ENV_ALLOWLIST");
	const workspaceEnv: EnvVar[] = [];
	for (const name of (pick("broker-secret-env", "BROKER_SECRET_ENV") ?? "").split(",").map((n) => n.trim()).filter(Boolean)) {
		const value = env[name];
		if (value === undefined) throw new Error(`wsbroker: --broker-secret-env names ${name}, which is not set in pi's environment`);
		workspaceEnv.push({ name, value, secret: true });
	}
	const procTools = pick("broker-process-tools", "BROKER_PROCESS_TOOLS") ?? "on";
	if (procTools !== "on" && procTools !== "off") throw new Error(`wsbroker: --broker-process-tools is "on" or "off", not ${JSON.stringify(procTools)}`);
	return {
		url: pick("broker-url", "BROKER_URL") ?? "http://127.0.0.1:8722",
		token,
		workspace: pick("broker-workspace", "BROKER_WORKSPACE"),
		backend: pick("broker-backend", "BROKER_BACKEND"),
		options,
		envAllowlist: envList ? envList.split(",").map((s) => s.trim()).filter(Boolean) : [...DEFAULT_ENV_ALLOWLIST],
		workspaceEnv,
		processTools: procTools === "on",
	};
}

/** Creates (or attaches to) the workspace and builds the tools for it with pi's factories. */
export async function connect(
	s: ExtensionSettings,
	pi: Pi,
): Promise<{ info: WorkspaceInfo; tools: BrokerTools; client: BrokerClient; workspace: Workspace; created: boolean }> {
	const client = new BrokerClient(s.url, s.token);
	const created = !s.workspace;
	if (s.workspace && s.workspaceEnv.length > 0) {
		// Setting them would replace the workspace's whole environment,
		// whose values the broker never answers: say so instead.
		throw new Error("wsbroker: --broker-secret-env sets a created workspace's environment; change an existing one with `broker ws env`");
	}
	const info = s.workspace ? await client.getWorkspace(s.workspace) : await client.createWorkspace(s.backend, s.options, s.workspaceEnv);
	const tools = brokerTools({
		url: s.url,
		token: s.token,
		workspace: info.id,
		root: info.root,
		client,
		envAllowlist: s.envAllowlist,
		pi,
	});
	return { info, tools, client, workspace: new Workspace(client, info, true), created };
}

/**
 * Replaces the system prompt's working directory with the workspace root:
 * the `Current working directory: <dir>` line (pi up to 0.85) or the
 * `<cwd>\n<dir>\n</cwd>` section (pi 1.x).
 */
export function rewritePromptCwd(prompt: string, root: string, label: string): string {
	return prompt
		.replace(/^Current working directory: .*$/m, () => `Current working directory: ${root} (${label})`)
		.replace(/^<cwd>\n.*\n<\/cwd>$/m, () => `<cwd>\n${root} (${label})\n</cwd>`);
}

export default async function wsbroker(pi: ExtensionAPI): Promise<void> {
	// Before any await: the callers are pi's extension loader.
	const runningPi = await loadHostPi(callerFiles());
	pi.registerFlag("broker-url", { description: "wsbroker: broker URL (default $BROKER_URL or http://127.0.0.1:8722)", type: "string" });
	pi.registerFlag("broker-workspace", { description: "wsbroker: attach to this workspace id instead of creating one", type: "string" });
	pi.registerFlag("broker-backend", { description: "wsbroker: backend of the created workspace (local, docker, ssh)", type: "string" });
	pi.registerFlag("broker-options", { description: "wsbroker: the created workspace's backend options, as JSON", type: "string" });
	pi.registerFlag("broker-env", { description: "wsbroker: comma-separated names of environment variables forwarded to commands", type: "string" });
	pi.registerFlag("broker-secret-env", { description: "wsbroker: comma-separated names of environment variables set as the created workspace's secrets", type: "string" });
	pi.registerFlag("broker-process-tools", { description: 'wsbroker: "off" leaves out the background process tools (process_start, ...)', type: "string" });

	let state: { info: WorkspaceInfo; tools: BrokerTools; workspace: Workspace; byName: Record<string, AnyToolDefinition> } | undefined;
	let failure: Error | undefined;

	// Registered at load (the model sees pi's own declarations); execution
	// waits for session_start, which has the flags. Without a workspace a
	// call fails: it never falls back to running on the host.
	const metadata = [
		runningPi.createReadToolDefinition("/"),
		runningPi.createBashToolDefinition("/"),
		runningPi.createEditToolDefinition("/"),
		runningPi.createWriteToolDefinition("/"),
		runningPi.createGrepToolDefinition("/"),
		runningPi.createFindToolDefinition("/"),
		runningPi.createLsToolDefinition("/"),
	] as unknown as AnyToolDefinition[];
	const noWorkspace = (name: string) => new Error(`wsbroker: no workspace${failure ? `: ${failure.message}` : " yet"}; the ${name} tool did not run`);
	for (const def of metadata) {
		const name = def.name;
		pi.registerTool({
			...def,
			execute(id, params, signal, onUpdate, ctx) {
				if (!state) throw noWorkspace(name);
				return state.byName[name].execute(id, params, signal, onUpdate, ctx);
			},
		});
	}
	// The background process tools: handles on commands that keep running.
	for (const def of processTools(() => {
		if (!state) throw noWorkspace("process");
		return state.workspace;
	}, runningPi)) {
		pi.registerTool(def);
	}

	pi.on("session_start", async (_event, ctx) => {
		if (state) return; // /new, /resume, /fork keep the workspace
		const flag = (n: string) => {
			const v = pi.getFlag(n);
			return typeof v === "string" ? v : undefined;
		};
		try {
			const settings = resolveSettings(flag);
			if (!settings.processTools) {
				const ours = new Set<string>(PROCESS_TOOL_NAMES);
				pi.setActiveTools(pi.getActiveTools().filter((n) => !ours.has(n)));
			}
			const c = await connect(settings, runningPi);
			state = { info: c.info, tools: c.tools, workspace: c.workspace, byName: Object.fromEntries(c.tools.all.map((t) => [t.name, t])) };
			failure = undefined;
			const what = `${c.info.id} (${c.info.backend}) at ${c.info.root}`;
			ctx.ui.setStatus("wsbroker", `wsbroker: ${c.info.id}`);
			ctx.ui.notify(
				c.created
					? `wsbroker: tools run in new workspace ${what}; reattach with --broker-workspace ${c.info.id}`
					: `wsbroker: tools run in workspace ${what}`,
				"info",
			);
		} catch (err) {
			failure = err as Error;
			ctx.ui.notify(`wsbroker: ${failure.message}; tools will refuse to run`, "error");
		}
	});

	pi.on("user_bash", () => {
		if (!state) {
			const msg = `wsbroker: no workspace${failure ? `: ${failure.message}` : ""}; the command did not run`;
			return { result: { output: msg, exitCode: 1, cancelled: false, truncated: false } };
		}
		const ops = brokerOperations({ url: "", token: "", workspace: state.info.id, client: state.tools.client });
		return { operations: userBashOperations(ops.bash, state.info.root) };
	});

	pi.on("before_agent_start", (event) => {
		if (!state) return;
		return { systemPrompt: rewritePromptCwd(event.systemPrompt, state.info.root, `wsbroker workspace ${state.info.id}, ${state.info.backend} backend`) };
	});
}
