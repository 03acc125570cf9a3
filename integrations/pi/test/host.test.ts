// How the extension finds the pi that runs it (src/host.ts) in the layouts
// a user builds: pi's extension loader among the callers, the `pi` command
// of a global npm install through its bin symlink, a program using pi's
// SDK; and the error naming both versions when the running pi's module
// cannot be used. (extension.test.ts loads the extension through pi itself.)
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { type PiPackage, findHostPi, loadHostPi, packageEntry, piPackageOfProgram } from "../src/host.js";
import { pi } from "../src/pi.js";

describe("finding the running pi", () => {
	let tmp: string;
	let installed: PiPackage;

	before(() => {
		tmp = mkdtempSync(path.join(os.tmpdir(), "wsbroker-pi-host-"));
		// A program using pi's SDK (this test): Node's resolution from it.
		const p = piPackageOfProgram(fileURLToPath(import.meta.url));
		assert.ok(p, "the pi under test is found from the test's file");
		installed = p;
	});
	after(() => rmSync(tmp, { recursive: true, force: true }));

	test("a program using pi's SDK gets the pi it imports", () => {
		assert.equal(installed.version, pi.VERSION);
		assert.equal(packageEntry(installed.root), path.join(installed.root, "dist", "index.js"));
	});

	test("the pi command of a global npm install, through its bin symlink", () => {
		const prefix = path.join(tmp, "prefix");
		const pkg = path.join(prefix, "lib", "node_modules", ...installed.name.split("/"));
		mkdirSync(path.dirname(pkg), { recursive: true });
		symlinkSync(installed.root, pkg);
		const bin = JSON.parse(readFileSync(path.join(pkg, "package.json"), "utf8")).bin.pi as string;
		mkdirSync(path.join(prefix, "bin"));
		symlinkSync(path.join(pkg, bin), path.join(prefix, "bin", "pi"));
		const got = findHostPi([], path.join(prefix, "bin", "pi"));
		assert.equal(got?.version, pi.VERSION);
		assert.equal(got?.root, realpathSync(installed.root));
		// Nothing of pi's there: not found, so the extension imports pi by name.
		assert.equal(findHostPi([], path.join(tmp, "nowhere.js")), undefined);
	});

	test("the caller's pi wins over the program's", () => {
		const loader = path.join(installed.root, "dist", "core", "extensions", "loader.js");
		assert.equal(findHostPi([path.join(tmp, "extension.js"), loader], path.join(tmp, "nowhere.js"))?.root, installed.root);
	});

	test("without a running pi found, pi is imported by name", async () => {
		assert.equal(await loadHostPi([], path.join(tmp, "nowhere.js")), pi);
	});

	test("a running pi whose module cannot be used fails, naming both versions", async () => {
		const fake = (dir: string, index?: string) => {
			const root = path.join(tmp, dir, "node_modules", "@earendil-works", "pi-coding-agent");
			mkdirSync(path.join(root, "dist", "core", "extensions"), { recursive: true });
			writeFileSync(
				path.join(root, "package.json"),
				JSON.stringify({ name: "@earendil-works/pi-coding-agent", version: "9.9.9", type: "module", exports: { ".": { import: "./dist/index.js" } } }),
			);
			if (index !== undefined) writeFileSync(path.join(root, "dist", "index.js"), index);
			return path.join(root, "dist", "core", "extensions", "loader.js");
		};
		const both = new RegExp(`wsbroker: pi 9\\.9\\.9 loaded this extension, .*by name it finds pi ${pi.VERSION.replace(/\./g, "\\.")}\\)$`);
		await assert.rejects(loadHostPi([fake("missing")], undefined), both);
		await assert.rejects(loadHostPi([fake("other", 'export const VERSION = "1.0.0";\n')], undefined), /is pi 1\.0\.0 without its tool factories/);
	});
});
