// Which pi's code the tools are built from. pi moved from @mariozechner (up
// to 0.73.1) to @earendil-works (0.74 on). The extension must use the pi
// that loaded it: pi loads extensions through jiti, whose native import
// comes first and ignores pi's module aliases, so a bare import of pi's name
// from the extension's file finds whatever copy sits in the extension's own
// node_modules (the README's `npm ci` installs pi 0.73.1 there), not the pi
// that is running. So the extension finds the running pi's package from the
// code that called its factory (pi's extension loader), then from the
// running program (process.argv[1], through the bin symlink), and only then
// imports pi by name.
import { existsSync, readFileSync, realpathSync } from "node:fs";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type * as PiCodingAgent from "@earendil-works/pi-coding-agent";

/** pi's coding-agent module: the tool factories and their helpers. */
export type Pi = typeof PiCodingAgent;

/** pi's package names, newest scope first. */
export const PI_PACKAGES = ["@earendil-works/pi-coding-agent", "@mariozechner/pi-coding-agent"] as const;

/** An installed pi package. */
export interface PiPackage {
	name: string;
	version: string;
	/** The package's folder. */
	root: string;
}

/**
 * Whether err says that `name` itself is not installed (not that something
 * it imports is missing: that must surface, not switch to the other scope).
 */
export function packageMissing(err: unknown, name: string): boolean {
	const e = err as { code?: string; message?: string };
	if (e?.code !== "ERR_MODULE_NOT_FOUND" && e?.code !== "MODULE_NOT_FOUND") return false;
	const m = e.message ?? "";
	return m.includes(`'${name}'`);
}

/** pi imported by its name from this package's folder, under either scope. */
export async function importPiByName(): Promise<Pi> {
	try {
		return await import("@earendil-works/pi-coding-agent");
	} catch (err) {
		if (!packageMissing(err, "@earendil-works/pi-coding-agent")) throw err;
	}
	try {
		// The same exports under the old name (pi <= 0.73.1).
		return (await import("@mariozechner/pi-coding-agent")) as unknown as typeof PiCodingAgent;
	} catch (err) {
		if (!packageMissing(err, "@mariozechner/pi-coding-agent")) throw err;
		throw new Error("wsbroker: pi is not installed: neither @earendil-works/pi-coding-agent nor @mariozechner/pi-coding-agent can be imported");
	}
}

function readPackage(dir: string): { name?: unknown; version?: unknown; main?: unknown; exports?: unknown } | undefined {
	const file = path.join(dir, "package.json");
	if (!existsSync(file)) return undefined;
	try {
		return JSON.parse(readFileSync(file, "utf8"));
	} catch {
		return undefined;
	}
}

function asPiPackage(dir: string): PiPackage | undefined {
	const p = readPackage(dir);
	if (!p || !PI_PACKAGES.includes(p.name as (typeof PI_PACKAGES)[number])) return undefined;
	return { name: p.name as string, version: String(p.version), root: dir };
}

/**
 * The pi package a file belongs to: the nearest package.json that has a
 * name decides (a bare `{"type": "module"}` one does not).
 */
export function piPackageOf(file: string): PiPackage | undefined {
	for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
		const p = readPackage(dir);
		if (p && typeof p.name === "string") return asPiPackage(dir);
		if (path.dirname(dir) === dir) return undefined;
	}
}

/**
 * The pi a program uses: the package its entry file belongs to (the `pi`
 * command, through its bin symlink), or the one Node's resolution finds
 * from it (a program using pi's SDK).
 */
export function piPackageOfProgram(entry: string | undefined): PiPackage | undefined {
	if (!entry) return undefined;
	let file: string;
	try {
		file = realpathSync(entry);
	} catch {
		return undefined;
	}
	const own = piPackageOf(file);
	if (own) return own;
	for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
		for (const name of PI_PACKAGES) {
			const found = asPiPackage(path.join(dir, "node_modules", name));
			if (found) return found;
		}
		if (path.dirname(dir) === dir) return undefined;
	}
}

/**
 * The files of the calls that led here, innermost first (V8's structured
 * call sites; file: URLs as paths).
 */
export function callerFiles(): string[] {
	const saved = Error.prepareStackTrace;
	const savedLimit = Error.stackTraceLimit;
	try {
		Error.stackTraceLimit = 50;
		Error.prepareStackTrace = (_err, sites) => sites;
		const sites = new Error().stack as unknown as NodeJS.CallSite[];
		const files: string[] = [];
		for (const s of sites) {
			const f = s.getFileName();
			if (!f) continue;
			if (f.startsWith("file:")) files.push(fileURLToPath(f));
			else if (path.isAbsolute(f)) files.push(f);
		}
		return files;
	} finally {
		Error.prepareStackTrace = saved;
		Error.stackTraceLimit = savedLimit;
	}
}

/**
 * The pi that is running this code: the first pi package among the callers'
 * files (pi's extension loader calls the factory), else the program's.
 */
export function findHostPi(callers: string[], programEntry: string | undefined = process.argv[1]): PiPackage | undefined {
	for (const f of callers) {
		const p = piPackageOf(f);
		if (p) return p;
	}
	return piPackageOfProgram(programEntry);
}

/** The file a package's root import loads (its exports' "import", or main). */
export function packageEntry(root: string): string {
	const p = readPackage(root) ?? {};
	let e: unknown = p.exports;
	if (e && typeof e === "object" && "." in e) e = (e as Record<string, unknown>)["."];
	if (e && typeof e === "object") e = (e as Record<string, unknown>).import ?? (e as Record<string, unknown>).default;
	const rel = typeof e === "string" ? e : typeof p.main === "string" ? p.main : "index.js";
	return path.join(root, rel);
}

async function versionByName(): Promise<string> {
	try {
		return `pi ${(await importPiByName()).VERSION}`;
	} catch (err) {
		return `no pi (${(err as Error).message})`;
	}
}

/**
 * pi's module from the pi that loaded the extension (see the top of this
 * file). callers are the files of the factory's callers, taken before the
 * factory's first await. Fails, naming both versions, when the running pi
 * is found but its module cannot be imported or is another version, rather
 * than building the tools from another pi.
 */
export async function loadHostPi(callers: string[], programEntry: string | undefined = process.argv[1]): Promise<Pi> {
	const host = findHostPi(callers, programEntry);
	if (!host) return importPiByName();
	const entry = packageEntry(host.root);
	let mod: Pi;
	try {
		mod = (await import(pathToFileURL(entry).href)) as Pi;
	} catch (err) {
		throw new Error(
			`wsbroker: pi ${host.version} loaded this extension, but its module ${entry} cannot be imported (${(err as Error).message}); ` +
				`the extension will not use another pi's tools (by name it finds ${await versionByName()})`,
		);
	}
	if (mod.VERSION !== host.version || typeof mod.createReadToolDefinition !== "function") {
		throw new Error(
			`wsbroker: pi ${host.version} loaded this extension, but ${entry} is pi ${String(mod.VERSION)} without its tool factories; ` +
				`the extension will not use another pi's tools (by name it finds ${await versionByName()})`,
		);
	}
	return mod;
}
