// The seven tool definitions, built with pi's own factories over
// brokerOperations, except grep and find: pi runs ripgrep/fd on its host
// whatever operations it is given (pi issue #9524), so those two call the
// broker's server-side tools, which run where the files are.
import { createReadStream } from "node:fs";
import { rm, stat } from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import * as posix from "node:path/posix";
import type { BashOperations, BashToolDetails, ToolDefinition } from "@earendil-works/pi-coding-agent";
import type { Pi } from "./host.js";
import { BrokerClient, type ToolResult } from "./client.js";
import { type BrokerOperationsOptions, WorkspaceRoutes, brokerOperations } from "./operations.js";
import { workspaceArgPath } from "./paths.js";

type Factories = Pick<Pi, "createBashToolDefinition" | "createEditToolDefinition" | "createFindToolDefinition" | "createGrepToolDefinition" | "createLsToolDefinition" | "createReadToolDefinition" | "createWriteToolDefinition">;

export interface BrokerToolsOptions extends BrokerOperationsOptions {
	/** The workspace root (POSIX): the tools' working directory. */
	root: string;
	/**
	 * Where bash's full-output files go, relative to the root (pi writes
	 * them to the host's temp dir, where a later read through the broker
	 * could not find them). Default `.wsbroker/bash-output`.
	 */
	bashOutputDir?: string;
	/** pi's shellCommandPrefix setting, prepended to every bash command. */
	commandPrefix?: string;
	/**
	 * pi's coding-agent module whose tool factories build the tools: the
	 * running pi's (the extension passes the pi that loaded it), e.g.
	 * `await import("@earendil-works/pi-coding-agent")`.
	 */
	pi: Pi;
}

// One tool of pi's, whatever its schema (for lists; each tool keeps its
// precise type in BrokerTools).
// biome-ignore lint: ToolDefinition's parameters differ per tool.
export type AnyToolDefinition = ToolDefinition<any, any>;

export interface BrokerTools {
	read: ReturnType<Factories["createReadToolDefinition"]>;
	bash: ReturnType<Factories["createBashToolDefinition"]>;
	edit: ReturnType<Factories["createEditToolDefinition"]>;
	write: ReturnType<Factories["createWriteToolDefinition"]>;
	grep: ReturnType<Factories["createGrepToolDefinition"]>;
	find: ReturnType<Factories["createFindToolDefinition"]>;
	ls: ReturnType<Factories["createLsToolDefinition"]>;
	/** The seven in pi's order: read, bash, edit, write, grep, find, ls. */
	all: AnyToolDefinition[];
	/** The client the tools use. */
	client: BrokerClient;
}

const DEFAULT_OUTPUT_DIR = ".wsbroker/bash-output";
// pi's spill file: os.tmpdir()/pi-bash-<16 hex>.log
const SPILL_RE = /(?:[A-Za-z]:)?[^\s[\]]*pi-bash-[0-9a-f]{16}\.log/g;
const HAS_SPILL = /pi-bash-[0-9a-f]{16}\.log/;

/** pi's seven tools, executing in the broker workspace. */
export function brokerTools(opts: BrokerToolsOptions): BrokerTools {
	const { createBashToolDefinition, createEditToolDefinition, createFindToolDefinition, createGrepToolDefinition, createLsToolDefinition, createReadToolDefinition, createWriteToolDefinition } =
		opts.pi;
	const client = opts.client ?? new BrokerClient(opts.url, opts.token);
	const o: BrokerOperationsOptions = { ...opts, client };
	const root = opts.root;
	const ws = new WorkspaceRoutes(client, opts.workspace);
	const outDir = posix.join(root, opts.bashOutputDir ?? DEFAULT_OUTPUT_DIR);
	// Fresh operations per call: their small caches (ls listing, read's stat)
	// must not outlive one tool call.
	const ops = () => brokerOperations(o);
	const withPath = <T extends { path?: string }>(params: T): T =>
		typeof params?.path === "string" ? { ...params, path: workspaceArgPath(params.path, root) } : params;

	const readTool = override(createReadToolDefinition(root), (id, params, signal, onUpdate, ctx) =>
			createReadToolDefinition(root, { operations: ops().read }).execute(id, withPath(params), signal, onUpdate, atRoot(ctx, root))
	);
	const writeTool = override(createWriteToolDefinition(root), (id, params, signal, onUpdate, ctx) =>
			createWriteToolDefinition(root, { operations: ops().write }).execute(id, withPath(params), signal, onUpdate, atRoot(ctx, root))
	);
	const editTool = override(createEditToolDefinition(root), (id, params, signal, onUpdate, ctx) =>
			createEditToolDefinition(root, { operations: ops().edit }).execute(id, withPath(params), signal, onUpdate, atRoot(ctx, root))
	);
	const lsTool = override(createLsToolDefinition(root), (id, params, signal, onUpdate, ctx) =>
			createLsToolDefinition(root, { operations: ops().ls }).execute(id, withPath(params), signal, onUpdate, atRoot(ctx, root))
	);

	let ignoreWritten = false;
	const relocate = async (hostPath: string): Promise<string | undefined> => {
		try {
			await stat(hostPath);
		} catch {
			return undefined; // not pi's spill file after all
		}
		const dest = posix.join(outDir, path.basename(hostPath));
		await ws.writeFile(dest, createReadStream(hostPath), dest, true);
		if (!ignoreWritten) {
			// Keeps these files out of grep and find results (rg, fd and the
			// broker's walker all honour .ignore).
			await ws.writeFile(posix.join(outDir, ".ignore"), Buffer.from("*\n"), undefined, true);
			ignoreWritten = true;
		}
		await rm(hostPath, { force: true });
		return dest;
	};
	const relocateAll = async (text: string): Promise<string> => {
		const tmp = os.tmpdir();
		let out = text;
		for (const host of new Set(text.match(SPILL_RE) ?? [])) {
			if (!host.startsWith(tmp)) continue;
			const dest = await relocate(host);
			if (dest) out = out.split(host).join(dest);
		}
		return out;
	};
	const bashTool = override(createBashToolDefinition(root), async (id, params, signal, onUpdate, ctx) => {
			const tool = createBashToolDefinition(root, { operations: ops().bash, commandPrefix: opts.commandPrefix });
			let result: Awaited<ReturnType<typeof tool.execute>>;
			try {
				result = await tool.execute(id, params, signal, onUpdate, atRoot(ctx, root));
			} catch (err) {
				if (err instanceof Error && HAS_SPILL.test(err.message)) {
					throw new Error(await relocateAll(err.message));
				}
				throw err;
			}
			const details = result.details as BashToolDetails | undefined;
			if (!details?.fullOutputPath) return result;
			const host = details.fullOutputPath;
			const dest = await relocate(host);
			if (!dest) return result;
			return {
				...result,
				content: result.content.map((c) => (c.type === "text" ? { ...c, text: c.text.split(host).join(dest) } : c)),
				details: { ...details, fullOutputPath: dest },
			};
	});

	const serverTool = <T extends AnyToolDefinition>(def: T): T =>
		override(def, (_id: string, params: unknown, signal?: AbortSignal) => callTool(ws, def.name, params, signal));
	const grepTool = serverTool(createGrepToolDefinition(root));
	const findTool = serverTool(createFindToolDefinition(root));

	return {
		read: readTool,
		bash: bashTool,
		edit: editTool,
		write: writeTool,
		grep: grepTool,
		find: findTool,
		ls: lsTool,
		all: [readTool, bashTool, editTool, writeTool, grepTool, findTool, lsTool] as unknown as AnyToolDefinition[],
		client,
	};
}

/**
 * pi's context with its cwd replaced by the workspace root. pi >= 0.75
 * resolves a tool's relative paths (and runs bash) against `ctx.cwd` when
 * there is one, the host directory pi runs in, rather than the cwd the tool
 * was built with; 0.73.1 ignores it. Other members are pi's, unchanged.
 */
export function atRoot<C>(ctx: C, root: string): C {
	if (ctx === undefined || ctx === null || typeof ctx !== "object") return ctx;
	return new Proxy(ctx as object, {
		get(target, key) {
			if (key === "cwd") return root;
			const v = Reflect.get(target, key, target);
			return typeof v === "function" ? v.bind(target) : v;
		},
	}) as C;
}

/** def with its execute replaced (name, schema, prompt texts and renderers kept). */
function override<T extends { execute: unknown }>(def: T, execute: T["execute"]): T {
	return { ...def, execute };
}

/**
 * Runs one of the broker's own tools. Its error results are thrown, as pi's
 * tools do, so the agent loop reports them the same way.
 */
export async function callTool(ws: WorkspaceRoutes, name: string, params: unknown, signal?: AbortSignal) {
	const res = await ws.client.json<ToolResult>({
		method: "POST",
		path: `/v1/workspaces/${encodeURIComponent(ws.id)}/tools/${encodeURIComponent(name)}`,
		body: JSON.stringify(params ?? {}),
		contentType: "application/json",
		signal,
	});
	if (res.isError) {
		throw new Error(res.content.map((c) => (c.type === "text" ? c.text : "")).join("\n"));
	}
	return { content: res.content, details: res.details ?? undefined };
}

/**
 * BashOperations for pi's `!` user commands: they run at the workspace root
 * whatever pi's own (host) working directory is.
 */
export function userBashOperations(bash: BashOperations, root: string): BashOperations {
	return { exec: (command, _cwd, options) => bash.exec(command, root, options) };
}
