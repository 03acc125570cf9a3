// The extension loaded by pi itself (its SDK, its extension loader, its
// agent loop) with pi-ai's faux model scripting the tool calls: the seven
// tools, the `!` commands and the prompt's working directory all end up in
// the broker workspace.
import assert from "node:assert/strict";
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import type { Context, Model } from "@earendil-works/pi-ai";
import { pi } from "../src/pi.js";
import { piAi } from "./pi-ai.js";
import { connect, resolveSettings, rewritePromptCwd } from "../src/extension.js";
import { PROCESS_TOOL_NAMES } from "../src/process-tools.js";
import { toWorkspacePath, workspaceArgPath } from "../src/paths.js";
import { type RunningBroker, startBroker } from "./helpers.js";

const { createAgentSession, DefaultResourceLoader, SessionManager, SettingsManager } = pi;
const { fauxAssistantMessage, fauxText, fauxToolCall } = piAi;

// What the tests use of a faux provider, in every version.
interface Faux {
	getModel(): Model<string>;
	setResponses(steps: Array<(ctx: Context) => ReturnType<typeof fauxAssistantMessage>>): void;
	unregister(): void;
	provider: string;
}

// Loosely typed: each pi version has only one of the two SDK shapes.
// biome-ignore lint: the other version's API is not in the compiled types.
const anyPi = pi as any;
// biome-ignore lint: as above.
const anyAi = piAi as any;

/** A faux model provider: registered globally (0.73.1) or a handle for a ModelRuntime (0.85+). */
function newFaux(): Faux {
	if (typeof anyAi.fauxProvider === "function") {
		const h = anyAi.fauxProvider();
		return { getModel: () => h.getModel(), setResponses: (s) => h.setResponses(s), unregister: () => {}, provider: h.provider.id, handle: h } as Faux;
	}
	const r = anyAi.registerFauxProvider();
	return { getModel: () => r.getModel(), setResponses: (s) => r.setResponses(s), unregister: () => r.unregister(), provider: r.models[0].provider };
}

/** createAgentSession's model and auth options for faux. */
async function modelSetup(faux: Faux): Promise<Record<string, unknown>> {
	if (anyPi.ModelRuntime) {
		const modelRuntime = await anyPi.ModelRuntime.create({
			credentials: new anyAi.InMemoryCredentialStore(),
			modelsPath: null,
			refreshOnCreate: false,
		});
		modelRuntime.registerNativeProvider((faux as unknown as { handle: { provider: unknown } }).handle.provider);
		await modelRuntime.setRuntimeApiKey(faux.provider, "faux-key");
		return { modelRuntime };
	}
	const authStorage = anyPi.AuthStorage.inMemory();
	authStorage.setRuntimeApiKey(faux.provider, "faux-key");
	return { authStorage, modelRegistry: anyPi.ModelRegistry.inMemory(authStorage) };
}

const extensionPath = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../src/extension.js");

/**
 * The extension as the README builds it: integrations/pi's package.json,
 * the compiled dist/src, and integrations/pi's node_modules (with pi 0.73.1,
 * whatever pi runs the test), in a folder of its own.
 */
function extensionLayout(): { dir: string; extension: string; remove(): void } {
	let pkg = path.dirname(extensionPath);
	while (!existsSync(path.join(pkg, "package.json")) || JSON.parse(readFileSync(path.join(pkg, "package.json"), "utf8")).name !== "@wsbroker/pi") {
		assert.notEqual(path.dirname(pkg), pkg, "integrations/pi's package.json not found above the test");
		pkg = path.dirname(pkg);
	}
	const old = JSON.parse(readFileSync(path.join(pkg, "node_modules", "@mariozechner", "pi-coding-agent", "package.json"), "utf8"));
	assert.equal(old.version, "0.73.1", "integrations/pi/node_modules holds pi 0.73.1 (npm ci)");
	const dir = mkdtempSync(path.join(os.tmpdir(), "wsbroker-pi-ext-"));
	copyFileSync(path.join(pkg, "package.json"), path.join(dir, "package.json"));
	cpSync(path.dirname(extensionPath), path.join(dir, "dist", "src"), { recursive: true });
	symlinkSync(path.join(pkg, "node_modules"), path.join(dir, "node_modules"));
	return { dir, extension: path.join(dir, "dist", "src", "extension.js"), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

describe("the pi extension, loaded by pi", () => {
	let broker: RunningBroker;
	let hostDir: string;
	let agentDir: string;
	const saved = { ...process.env };

	before(async () => {
		broker = await startBroker();
		hostDir = mkdtempSync(path.join(os.tmpdir(), "wsbroker-pi-host-"));
		agentDir = mkdtempSync(path.join(os.tmpdir(), "wsbroker-pi-agent-"));
	});
	after(async () => {
		process.env = saved;
		await broker?.stop();
		rmSync(hostDir, { recursive: true, force: true });
		rmSync(agentDir, { recursive: true, force: true });
	});

	// A pi session as the CLI builds one: pi's resource loader loads the
	// extension from its file; the faux model plays the LLM. The model and
	// auth setup is the one SDK part that changed between the versions
	// tested: 0.73.1 has AuthStorage and ModelRegistry, 0.85+ a ModelRuntime
	// that the faux provider is registered in.
	const SEVEN = ["read", "bash", "edit", "write", "grep", "find", "ls"];
	// where: the extension files given to pi (default: the one under test)
	// and pi's agent folder, whose extensions/ pi also loads.
	const piSession = async (faux: Faux, tools: string[] = SEVEN, where: { cwd?: string; extensions?: string[]; agentDir?: string } = {}) => {
		const settingsManager = SettingsManager.inMemory();
		const cwd = where.cwd ?? hostDir;
		const agent = where.agentDir ?? agentDir;
		const loader = new DefaultResourceLoader({
			cwd,
			agentDir: agent,
			settingsManager,
			additionalExtensionPaths: where.extensions ?? [extensionPath],
			noSkills: true,
			noPromptTemplates: true,
			noThemes: true,
			noContextFiles: true,
		});
		await loader.reload();
		const { session, extensionsResult } = await createAgentSession({
			cwd,
			agentDir: agent,
			model: faux.getModel(),
			...(await modelSetup(faux)),
			resourceLoader: loader,
			sessionManager: SessionManager.inMemory(cwd),
			settingsManager,
			tools,
		});
		assert.deepEqual(extensionsResult.errors, []);
		return session;
	};

	test("tools, ! commands and the prompt's cwd go to the workspace", async () => {
		const ws = await broker.workspace("local");
		process.env.BROKER_URL = broker.url;
		process.env.BROKER_TOKEN = broker.token;
		process.env.BROKER_WORKSPACE = ws.id;
		process.env.PI_TEST_SECRET_KEY = "sk-must-not-cross";

		const faux = newFaux();
		const prompts: string[] = [];
		const seen = (ctx: Context) => {
			// pi 1.x hands providers the prompt as a leading system message.
			const sys = (ctx.messages as Array<{ role: string; content: unknown }>).filter((m) => m.role === "system");
			const text = (c: unknown) => (typeof c === "string" ? c : (c as Array<{ text?: string }>).map((b) => b.text ?? "").join(""));
			prompts.push(ctx.systemPrompt ?? sys.map((m) => text(m.content)).join("\n"));
		};
		faux.setResponses([
			(ctx) => (seen(ctx), fauxAssistantMessage(fauxToolCall("write", { path: "from-agent.txt", content: "made by the agent\n" }), { stopReason: "toolUse" })),
			() =>
				fauxAssistantMessage(fauxToolCall("bash", { command: 'pwd; cat from-agent.txt; echo "key=[$PI_TEST_SECRET_KEY]"' }), {
					stopReason: "toolUse",
				}),
			() => fauxAssistantMessage(fauxToolCall("edit", { path: "from-agent.txt", edits: [{ oldText: "made", newText: "edited" }] }), { stopReason: "toolUse" }),
			() => fauxAssistantMessage(fauxToolCall("read", { path: "from-agent.txt" }), { stopReason: "toolUse" }),
			() => fauxAssistantMessage(fauxToolCall("grep", { pattern: "edited" }), { stopReason: "toolUse" }),
			() => fauxAssistantMessage(fauxToolCall("find", { pattern: "*.txt" }), { stopReason: "toolUse" }),
			() => fauxAssistantMessage(fauxToolCall("ls", {}), { stopReason: "toolUse" }),
			() => fauxAssistantMessage(fauxText("done")),
		]);
		try {
			const session = await piSession(faux);
			await session.bindExtensions({});

			await session.prompt("do things");

			// The prompt names the workspace root as the working directory.
			assert.equal(prompts.length, 1);
			// pi up to 0.85 says `Current working directory: <dir>`; 1.x has a <cwd> section.
			const where = `${ws.root} \\(wsbroker workspace ${ws.id}, local backend\\)`;
			assert.match(prompts[0], new RegExp(`\\nCurrent working directory: ${where}|\\n<cwd>\\n${where}\\n</cwd>`));
			assert.ok(!prompts[0].includes(hostDir));

			const results = session.messages.filter((m) => m.role === "toolResult");
			const byTool = Object.fromEntries(
				results.map((m) => [m.toolName, { isError: m.isError, text: m.content.map((c) => (c.type === "text" ? c.text : "")).join("") }]),
			);
			// pi's own text: the byte count went away after 0.82 (the write is ours either way).
			assert.equal(byTool.write.isError, false);
			assert.match(byTool.write.text, /^Successfully wrote (18 bytes )?to from-agent\.txt$/);
			assert.deepEqual(byTool.bash, { isError: false, text: `${ws.root}\nmade by the agent\nkey=[]\n` });
			assert.deepEqual(byTool.edit, { isError: false, text: "Successfully replaced 1 block(s) in from-agent.txt." });
			assert.deepEqual(byTool.read, { isError: false, text: "edited by the agent\n" });
			assert.deepEqual(byTool.grep, { isError: false, text: "from-agent.txt:1: edited by the agent" });
			assert.deepEqual(byTool.find, { isError: false, text: "from-agent.txt" });
			assert.deepEqual(byTool.ls, { isError: false, text: "from-agent.txt" });
			// Nothing happened on the host.
			assert.deepEqual(readdirSync(hostDir), []);

			// A `!` command, the way pi's interactive mode runs one.
			const ev = await session.extensionRunner.emitUserBash({ type: "user_bash", command: "pwd; ls", excludeFromContext: false, cwd: hostDir });
			assert.ok(ev?.operations, "user_bash returned operations");
			const r = await session.executeBash("pwd; ls", undefined, { operations: ev.operations });
			assert.equal(r.exitCode, 0);
			assert.equal(r.output, `${ws.root}\nfrom-agent.txt\n`);
			session.dispose();
		} finally {
			faux.unregister();
		}
	});

	// Issue 38: pi loads an extension through jiti, whose native import comes
	// first and ignores pi's aliases, so a bare import of pi's name from the
	// extension's file found the pi 0.73.1 that the README's `npm ci` puts
	// beside it, and pi 1.6.0 ran 0.73.1's tools. Here the built extension
	// sits as the README builds it (its folder's node_modules holding pi
	// 0.73.1) and in pi's own extensions folder; the tool results must be
	// those of the running pi's built-ins on a host directory.
	test("the tools are those of the pi that loads the extension, with pi 0.73.1 beside it", async () => {
		const layout = extensionLayout();
		const script = () => [
			() => fauxAssistantMessage(fauxToolCall("write", { path: "hello.py", content: "print('hi')\nprint('bye')\n" }), { stopReason: "toolUse" }),
			() => fauxAssistantMessage(fauxToolCall("edit", { path: "hello.py", edits: [{ oldText: "'hi'", newText: "'hello'" }] }), { stopReason: "toolUse" }),
			() => fauxAssistantMessage(fauxToolCall("bash", { command: "echo oops; exit 3" }), { stopReason: "toolUse" }),
			() => fauxAssistantMessage(fauxToolCall("read", { path: "hello.py" }), { stopReason: "toolUse" }),
			() => fauxAssistantMessage(fauxText("done")),
		];
		const run = async (where: { cwd?: string; extensions?: string[]; agentDir?: string }, root: string) => {
			const faux = newFaux();
			faux.setResponses(script());
			try {
				const session = await piSession(faux, SEVEN, where);
				await session.bindExtensions({});
				await session.prompt("write, edit, fail, read");
				const out = session.messages
					.filter((m) => m.role === "toolResult")
					.map((m) => ({
						tool: m.toolName,
						isError: m.isError,
						text: m.content.map((c) => (c.type === "text" ? c.text : "")).join("").split(root).join("<root>"),
						details: JSON.stringify(m.details ?? null).split(root).join("<root>"),
					}));
				session.dispose();
				return out;
			} finally {
				faux.unregister();
			}
		};
		const builtinDir = mkdtempSync(path.join(os.tmpdir(), "wsbroker-pi-builtin-"));
		const builtinAgent = mkdtempSync(path.join(os.tmpdir(), "wsbroker-pi-agent-"));
		const folderAgent = mkdtempSync(path.join(os.tmpdir(), "wsbroker-pi-agent-"));
		try {
			const want = await run({ cwd: builtinDir, extensions: [], agentDir: builtinAgent }, builtinDir);
			assert.deepEqual(
				want.map((r) => r.tool),
				["write", "edit", "bash", "read"],
			);
			// pi's own extensions folder: a package with a "pi" manifest.
			mkdirSync(path.join(folderAgent, "extensions"));
			symlinkSync(layout.dir, path.join(folderAgent, "extensions", "wsbroker"));
			const layouts: Array<[string, { extensions: string[]; agentDir?: string }]> = [
				["the README's layout", { extensions: [layout.extension] }],
				["pi's extensions folder", { extensions: [], agentDir: folderAgent }],
			];
			for (const [name, where] of layouts) {
				const ws = await broker.workspace("local");
				process.env.BROKER_URL = broker.url;
				process.env.BROKER_TOKEN = broker.token;
				process.env.BROKER_WORKSPACE = ws.id;
				assert.deepEqual(await run(where, ws.root), want, `${name}: pi ${pi.VERSION}'s built-in results`);
			}
			assert.deepEqual(readdirSync(hostDir), []);
		} finally {
			layout.remove();
			for (const d of [builtinDir, builtinAgent, folderAgent]) rmSync(d, { recursive: true, force: true });
		}
	});

	test("without a reachable broker the tools refuse instead of running on the host", async () => {
		process.env.BROKER_URL = "http://127.0.0.1:1"; // nothing listens on port 1
		process.env.BROKER_TOKEN = "x";
		delete process.env.BROKER_WORKSPACE;
		const faux = newFaux();
		faux.setResponses([
			() => fauxAssistantMessage(fauxToolCall("bash", { command: "touch host-was-touched" }), { stopReason: "toolUse" }),
			() => fauxAssistantMessage(fauxText("done")),
		]);
		try {
			const session = await piSession(faux);
			await session.bindExtensions({});
			await session.prompt("touch a file");
			const res = session.messages.find((m) => m.role === "toolResult");
			assert.ok(res && res.role === "toolResult");
			assert.equal(res.isError, true);
			const text = res.content.map((c) => (c.type === "text" ? c.text : "")).join("");
			assert.match(text, /^wsbroker: no workspace: .*the bash tool did not run$/);
			assert.deepEqual(readdirSync(hostDir), []);
			const ev = await session.extensionRunner.emitUserBash({ type: "user_bash", command: "true", excludeFromContext: false, cwd: hostDir });
			assert.equal(ev?.result?.exitCode, 1);
			session.dispose();
		} finally {
			faux.unregister();
		}
	});

	test("the model gets handles on background processes, unless they are turned off", async () => {
		const ws = await broker.workspace("local");
		process.env.BROKER_URL = broker.url;
		process.env.BROKER_TOKEN = broker.token;
		process.env.BROKER_WORKSPACE = ws.id;
		delete process.env.BROKER_PROCESS_TOOLS;
		const lastText = (ctx: Context) => {
			const m = ctx.messages[ctx.messages.length - 1] as { content: Array<{ type: string; text?: string }> };
			return m.content.map((c) => c.text ?? "").join("");
		};
		const faux = newFaux();
		faux.setResponses([
			() => fauxAssistantMessage(fauxToolCall("process_start", { command: "echo up; sleep 30", tag: "srv", wait: 0.5 }), { stopReason: "toolUse" }),
			() => fauxAssistantMessage(fauxToolCall("process_list", {}), { stopReason: "toolUse" }),
			(ctx) => fauxAssistantMessage(fauxToolCall("process_kill", { id: /p-[0-9a-f]{16}/.exec(lastText(ctx))?.[0] ?? "none" }), { stopReason: "toolUse" }),
			() => fauxAssistantMessage(fauxText("done")),
		]);
		try {
			const session = await piSession(faux, [...SEVEN, ...PROCESS_TOOL_NAMES]);
			await session.bindExtensions({});
			assert.deepEqual(
				session.getActiveToolNames().filter((n) => n.startsWith("process_")),
				[...PROCESS_TOOL_NAMES],
			);
			await session.prompt("start a server");
			const results = session.messages.filter((m) => m.role === "toolResult");
			const texts = results.map((m) => ({ tool: m.toolName, isError: m.isError, text: m.content.map((c) => (c.type === "text" ? c.text : "")).join("") }));
			assert.equal(texts.length, 3);
			assert.match(texts[0].text, /^up\n\[p-[0-9a-f]{16} \[srv\] running; 3 bytes of output so far; process_output for more\]$/);
			assert.match(texts[1].text, /^p-[0-9a-f]{16} {2}running {2}\[srv\] {2}echo up; sleep 30$/);
			assert.equal(texts[2].isError, false);
			assert.match(texts[2].text, /^\[p-[0-9a-f]{16} \[srv\] .*; removed\]$/);
			session.dispose();
		} finally {
			faux.unregister();
		}

		process.env.BROKER_PROCESS_TOOLS = "off";
		const faux2 = newFaux();
		try {
			const session = await piSession(faux2, [...SEVEN, ...PROCESS_TOOL_NAMES]);
			await session.bindExtensions({});
			assert.deepEqual(session.getActiveToolNames().sort(), [...SEVEN].sort());
			session.dispose();
		} finally {
			faux2.unregister();
			delete process.env.BROKER_PROCESS_TOOLS;
		}
	});

	test("--broker-secret-env puts pi's values in a created workspace, redacted from output", async () => {
		const env = { BROKER_URL: broker.url, BROKER_TOKEN: broker.token, BROKER_SECRET_ENV: "GH_TOKEN", GH_TOKEN: "ghp-7c1e5a9f" };
		const c = await connect(resolveSettings(() => undefined, env), pi);
		try {
			assert.deepEqual(c.info.env, [{ name: "GH_TOKEN", secret: true }]);
			const p = await c.workspace.processes.start({ command: 'echo "token=$GH_TOKEN"' });
			await c.workspace.processes.wait(p.id, { timeout: 30 });
			let out = "";
			for await (const ev of c.workspace.processes.logs(p.id)) if (ev.type === "output") out += Buffer.from(ev.data).toString("utf8");
			assert.equal(out, "token=[REDACTED:GH_TOKEN]\n");
			// Attaching cannot set them: the broker never answers the values it would replace.
			await assert.rejects(connect(resolveSettings(() => undefined, { ...env, BROKER_WORKSPACE: c.info.id }), pi), /sets a created workspace's environment/);
		} finally {
			await broker.client.deleteWorkspace(c.info.id);
			c.client.close();
		}
	});

	test("connect creates a workspace when none is named", async () => {
		const c = await connect(resolveSettings(() => undefined, { BROKER_URL: broker.url, BROKER_TOKEN: broker.token }), pi);
		assert.equal(c.created, true);
		assert.match(c.info.id, /^ws_/);
		const got = await broker.client.getWorkspace(c.info.id);
		assert.equal(got.root, c.info.root);
		await broker.client.deleteWorkspace(c.info.id);
		c.client.close();
	});
});

describe("settings and paths", () => {
	test("the token comes from BROKER_TOKEN, else the token file", () => {
		const dir = mkdtempSync(path.join(os.tmpdir(), "wsbroker-pi-tok-"));
		try {
			const file = path.join(dir, "token");
			writeFileSync(file, "abc123\n");
			const s = resolveSettings(() => undefined, { BROKER_TOKEN_FILE: file });
			assert.equal(s.token, "abc123");
			assert.equal(s.url, "http://127.0.0.1:8722");
			const s2 = resolveSettings((n) => (n === "broker-url" ? "http://flag:1" : undefined), { BROKER_TOKEN: "t", BROKER_URL: "http://env:2" });
			assert.equal(s2.url, "http://flag:1");
			assert.throws(() => resolveSettings(() => undefined, { BROKER_TOKEN_FILE: path.join(dir, "none") }), /no token/);
			assert.equal(resolveSettings(() => undefined, { BROKER_STATE_DIR: dir }).token, "abc123");
			const s3 = resolveSettings(() => undefined, { BROKER_TOKEN: "t", BROKER_ENV_ALLOWLIST: "A, B", BROKER_OPTIONS: '{"image":"x"}' });
			assert.deepEqual(s3.envAllowlist, ["A", "B"]);
			assert.deepEqual(s3.options, { image: "x" });
			assert.deepEqual(s3.workspaceEnv, []);
			assert.equal(s3.processTools, true);
			const s4 = resolveSettings((n) => (n === "broker-process-tools" ? "off" : undefined), { BROKER_TOKEN: "t", BROKER_SECRET_ENV: "K1, K2", K1: "v1", K2: "" });
			assert.deepEqual(s4.workspaceEnv, [
				{ name: "K1", value: "v1", secret: true },
				{ name: "K2", value: "", secret: true },
			]);
			assert.equal(s4.processTools, false);
			assert.throws(() => resolveSettings(() => undefined, { BROKER_TOKEN: "t", BROKER_SECRET_ENV: "MISSING" }), /names MISSING, which is not set/);
			assert.throws(() => resolveSettings(() => undefined, { BROKER_TOKEN: "t", BROKER_PROCESS_TOOLS: "maybe" }), /"on" or "off"/);
		} finally {
			rmSync(dir, { recursive: true, force: true });
		}
	});
	test("the prompt's cwd line is replaced", () => {
		const p = "You are pi.\nCurrent date: 2026-01-01\nCurrent working directory: /home/me/proj";
		assert.equal(rewritePromptCwd(p, "/workspace", "x"), "You are pi.\nCurrent date: 2026-01-01\nCurrent working directory: /workspace (x)");
		const p1 = "You are pi.\n<cwd>\n/home/me/proj\n</cwd>";
		assert.equal(rewritePromptCwd(p1, "/workspace", "x"), "You are pi.\n<cwd>\n/workspace (x)\n</cwd>");
	});
	test("Windows host paths map to the workspace's POSIX paths", () => {
		assert.equal(toWorkspacePath("C:\\workspace\\src\\a.txt", "win32"), "/workspace/src/a.txt");
		assert.equal(toWorkspacePath("C:\\", "win32"), "/");
		assert.equal(toWorkspacePath("/workspace/a/../b", "win32"), "/workspace/b");
		// On POSIX hosts a backslash is part of a name.
		assert.equal(toWorkspacePath("/w/odd\\name", "linux"), "/w/odd\\name");
		assert.equal(workspaceArgPath("~/x/y", "/workspace"), "/workspace/x/y");
		assert.equal(workspaceArgPath("@~", "/workspace"), "/workspace");
		assert.equal(workspaceArgPath("~x", "/workspace"), "~x");
	});
});
