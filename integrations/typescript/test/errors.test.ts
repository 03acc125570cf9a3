// The error classes: one per code of the wire's table (wire/testdata/codes.json,
// generated from wire.Codes()), and the broker's real answers mapped to them.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import {
	BadRequestError,
	Broker,
	BrokerError,
	ERROR_CODES,
	ExistsError,
	InvalidError,
	IsDirError,
	MethodNotAllowedError,
	NotDirError,
	NotExistError,
	NotFoundError,
	PermissionError,
	TooLargeError,
	UnauthorizedError,
	UnsupportedMediaTypeError,
	type Workspace,
	errorFor,
} from "../src/index.js";
import { type RunningBroker, repoRoot, startBroker } from "./helpers.js";

test("every code of the wire's table has a class here, with the same status", () => {
	const file = path.join(repoRoot, "wire", "testdata", "codes.json");
	const wire = JSON.parse(readFileSync(file, "utf8")) as Array<{ name: string; status: number }>;
	assert.ok(wire.length > 10, `${file} lists the codes`);
	for (const c of wire) {
		const mine = ERROR_CODES.find((e) => e.name === c.name);
		assert.ok(mine, `the SDK has no error class for the wire's code ${JSON.stringify(c.name)} (${c.status}): add it to src/errors.ts`);
		assert.equal(mine.status, c.status, `status of ${c.name}`);
	}
	for (const e of ERROR_CODES) assert.ok(wire.some((c) => c.name === e.name), `the SDK knows ${e.name}, which the wire no longer has`);
	// One class per code, each a BrokerError.
	assert.equal(new Set(ERROR_CODES.map((e) => e.cls)).size, ERROR_CODES.length);
	for (const e of ERROR_CODES) {
		const err = errorFor(e.name, e.status, "d", "rid");
		assert.ok(err instanceof e.cls && err instanceof BrokerError);
		assert.equal(err.name, e.cls.name);
		assert.deepEqual([err.code, err.status, err.detail, err.requestId], [e.name, e.status, "d", "rid"]);
	}
	// A code this SDK does not know (a newer broker) is classed by its status, keeping the code.
	const newer = errorFor("quota_exceeded", 409, "no room");
	assert.ok(newer instanceof ExistsError);
	assert.equal(newer.code, "quota_exceeded");
	assert.ok(errorFor(undefined, 404, "") instanceof NotExistError);
	assert.equal(errorFor("weird", 418, "").constructor, BrokerError);
});

describe("the broker's answers as error classes (local backend)", () => {
	let rb: RunningBroker;
	let ws: Workspace;
	before(async () => {
		rb = await startBroker({ config: "profiles:\n  small:\n    backend: local\n" });
		ws = await rb.broker.create({ backend: "local" });
		await ws.writeText("file.txt", "x");
		await ws.mkdir("dir");
	});
	after(async () => {
		await rb?.stop();
	});

	const cases: Array<[string, () => Promise<unknown>, new (...a: never[]) => BrokerError, string]> = [
		["a missing file", () => ws.readBytes("missing.txt"), NotExistError, "not_exist"],
		["a directory read as a file", () => ws.readBytes("dir"), IsDirError, "is_dir"],
		["a file listed as a directory", () => ws.listdir("file.txt"), NotDirError, "not_dir"],
		["mkdir over a file", () => ws.mkdir("file.txt"), ExistsError, "exists"],
		["a path out of the local root", () => ws.readBytes("../../etc/passwd"), PermissionError, "permission"],
		["an empty command", () => ws.run("   "), InvalidError, "invalid"],
		["an unknown workspace", () => rb.broker.get("ws_nosuchworkspace"), NotFoundError, "not_found"],
		["a wrong method", () => ws.transport.call({ method: "PATCH", path: `${ws.prefix}/files` }), MethodNotAllowedError, "method_not_allowed"],
		["a body of the wrong type", () => ws.transport.call({ method: "POST", path: `${ws.prefix}/exec`, body: "x", contentType: "text/plain" }), UnsupportedMediaTypeError, "unsupported_media_type"],
		["malformed JSON", () => ws.transport.call({ method: "POST", path: `${ws.prefix}/exec`, body: "{", contentType: "application/json" }), BadRequestError, "bad_request"],
		["an unknown backend", () => rb.broker.create({ backend: "nosuch" }), InvalidError, "invalid"],
		["a profile the broker does not have", () => rb.broker.create({ profile: "nosuch" }), InvalidError, "invalid"],
		["a profile with a backend", () => rb.broker.create({ profile: "small", backend: "local" }), InvalidError, "invalid"],
		["an unknown backend option", () => rb.broker.create({ backend: "local", options: { nosuch: 1 } }), InvalidError, "invalid"],
	];
	for (const [what, call, cls, code] of cases) {
		test(`${what}: ${cls.name}`, async () => {
			await assert.rejects(call(), (err: unknown) => {
				assert.ok(err instanceof cls, `${what}: got ${(err as Error).name}: ${(err as Error).message}`);
				if (code) assert.equal((err as BrokerError).code, code);
				assert.match((err as BrokerError).requestId ?? "", /./, "the request id is kept");
				return true;
			});
		});
	}

	test("a profile of the broker's config creates the workspace it describes", async () => {
		await using made = await rb.broker.create({ profile: "small", env: { GREETING: "hi" } });
		assert.equal(made.backend, "local");
		assert.equal((await made.run("printf %s \"$GREETING\"")).text, "hi");
	});

	test("a wrong token: UnauthorizedError", async () => {
		const b = new Broker({ url: rb.url, token: "wrong" });
		try {
			await assert.rejects(b.list(), UnauthorizedError);
		} finally {
			b.close();
		}
	});

	test("a body over the broker's upload limit: TooLargeError", async () => {
		const small = await startBroker({ extraArgs: ["--max-upload-bytes", "1024"] });
		try {
			const w = await small.broker.create({ backend: "local" });
			await assert.rejects(w.writeBytes("big", Buffer.alloc(4096)), TooLargeError);
		} finally {
			await small.stop();
		}
	});
});
