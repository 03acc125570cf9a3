// pi's REAL tool factories (@mariozechner/pi-coding-agent 0.73.1) given
// brokerOperations, against a real broker, on the local and docker backends.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { pi } from "../src/pi.js";
import { type BrokerOperations, WorkspaceRoutes, brokerOperations } from "../src/operations.js";
import { type BrokerTools, brokerTools } from "../src/tools.js";
import { type RunningBroker, dockerUnavailable, makePng, rejection, startBroker, textOf } from "./helpers.js";

const { createBashTool, createEditTool, createFindTool, createGrepTool, createLsTool, createReadTool, createWriteTool } = pi;

const lines = (n: number, f: (i: number) => string = (i) => `line ${i}`) =>
	Array.from({ length: n }, (_, i) => f(i + 1)).join("\n");

for (const backend of ["local", "docker"] as const) {
	const skip = backend === "docker" ? dockerUnavailable() : undefined;
	describe(`pi's tools over brokerOperations (${backend} backend)`, { skip }, () => {
		let broker: RunningBroker;
		let ops: BrokerOperations;
		let tools: BrokerTools;
		let root: string;
		const put = (p: string, data: string) => putBytes(p, Buffer.from(data));
		const putBytes = async (p: string, data: Buffer) => {
			await broker.client.call({
				method: "PUT",
				path: `/v1/workspaces/${ws}/files`,
				query: { path: p, mkdirs: "1" },
				body: data,
			});
		};
		let ws: string;
		// Runs a command in the workspace through the broker, for checks.
		const sh = async (command: string) => {
			let out = "";
			const r = await ops.bash.exec(command, root, { onData: (d) => (out += d.toString()) });
			return { out, code: r.exitCode };
		};

		before(async () => {
			broker = await startBroker({ docker: backend === "docker" });
			const info = await broker.workspace(backend);
			ws = info.id;
			root = info.root;
			ops = brokerOperations({ url: broker.url, token: broker.token, workspace: ws, envAllowlist: ["PI_TEST_ALLOWED"] });
			tools = brokerTools({ url: broker.url, token: broker.token, workspace: ws, root, envAllowlist: ["PI_TEST_ALLOWED"], pi });
		});
		after(async () => {
			ops?.client.close();
			tools?.client.close();
			await broker?.stop();
		});

		describe("read", () => {
			test("a small file verbatim, no details", async () => {
				await put("small.txt", "hello\r\nworld\n");
				const r = await createReadTool(root, { operations: ops.read }).execute("t", { path: "small.txt" });
				assert.equal(textOf(r), "hello\r\nworld\n");
				assert.equal(r.details, undefined);
			});
			test("a missing file: Node's ENOENT message", async () => {
				const err = await rejection(() => createReadTool(root, { operations: ops.read }).execute("t", { path: "nope.txt" }));
				assert.equal(err.message, `ENOENT: no such file or directory, access '${root}/nope.txt'`);
			});
			test("line truncation notice", async () => {
				await put("long.txt", lines(2500));
				const r = await createReadTool(root, { operations: ops.read }).execute("t", { path: "long.txt" });
				const text = textOf(r);
				assert.ok(text.startsWith("line 1\nline 2\n"));
				assert.ok(text.includes("line 2000\n"));
				assert.ok(!text.includes("line 2001"));
				assert.ok(text.endsWith("\n\n[Showing lines 1-2000 of 2500. Use offset=2001 to continue.]"), text.slice(-100));
				assert.equal(r.details?.truncation?.truncatedBy, "lines");
			});
			test("byte truncation notice", async () => {
				await put("wide.txt", lines(500, (i) => `${String(i).padStart(4, "0")} ${"x".repeat(205)}`));
				const r = await createReadTool(root, { operations: ops.read }).execute("t", { path: "wide.txt" });
				assert.match(textOf(r), /\n\n\[Showing lines 1-\d+ of 500 \(50\.0KB limit\)\. Use offset=\d+ to continue\.\]$/);
			});
			test("offset and limit notices", async () => {
				await put("hundred.txt", lines(100));
				const read = createReadTool(root, { operations: ops.read });
				const r = await read.execute("t", { path: "hundred.txt", limit: 10 });
				assert.ok(textOf(r).endsWith("line 10\n\n[90 more lines in file. Use offset=11 to continue.]"));
				const r2 = await read.execute("t", { path: "hundred.txt", offset: 41, limit: 20 });
				assert.ok(textOf(r2).startsWith("line 41\n"));
				assert.ok(textOf(r2).endsWith("[40 more lines in file. Use offset=61 to continue.]"));
				await put("three.txt", "a\nb\nc");
				const err = await rejection(() => read.execute("t", { path: "three.txt", offset: 100 }));
				assert.equal(err.message, "Offset 100 is beyond end of file (3 lines total)");
			});
			test("a first line over 50KB", async () => {
				await put("oneline.txt", "y".repeat(60 * 1024));
				const r = await createReadTool(root, { operations: ops.read }).execute("t", { path: "oneline.txt" });
				assert.equal(textOf(r), "[Line 1 is 60.0KB, exceeds 50.0KB limit. Use bash: sed -n '1p' oneline.txt | head -c 51200]");
			});
			test("an image, detected by its bytes", async () => {
				const png = makePng(4, 3);
				await putBytes("pics/image.txt", png);
				const r = await createReadTool(root, { operations: ops.read }).execute("t", { path: "pics/image.txt" });
				assert.equal(r.content[0].type, "text");
				assert.equal(textOf(r), "Read image file [image/png]");
				const img = r.content[1];
				assert.equal(img?.type, "image");
				assert.equal(img.type === "image" && img.mimeType, "image/png");
				await put("pics/not-an-image.png", "just text");
				const r2 = await createReadTool(root, { operations: ops.read }).execute("t", { path: "pics/not-an-image.png" });
				assert.equal(textOf(r2), "just text");
			});
			if (backend === "local") {
				test("a path outside the local workspace: EACCES", async () => {
					const err = await rejection(() => createReadTool(root, { operations: ops.read }).execute("t", { path: "/etc/hostname" }));
					assert.equal(err.message, "EACCES: permission denied, access '/etc/hostname'");
				});
			}
			test("a large file is streamed on pi >= 1.5.1, never fetched whole", async () => {
				await put("big.txt", lines(200_000));
				let whole = 0;
				let streamed = 0;
				const counting = {
					...ops.read,
					readFile: (p: string) => {
						whole++;
						return ops.read.readFile(p);
					},
					createReadStream: (p: string, o: { signal?: AbortSignal }) => {
						streamed++;
						return ops.read.createReadStream(p, o);
					},
				};
				const r = await createReadTool(root, { operations: counting }).execute("t", { path: "big.txt", offset: 100, limit: 3 });
				assert.equal(textOf(r), "line 100\nline 101\nline 102\n\n[199898 more lines in file. Use offset=103 to continue.]");
				const [major, minor, patch] = pi.VERSION.split(".").map(Number);
				const streams = major > 1 || (major === 1 && (minor > 5 || (minor === 5 && patch >= 1)));
				assert.deepEqual({ whole, streamed }, streams ? { whole: 0, streamed: 1 } : { whole: 1, streamed: 0 });
			});
			test("readStream: leaving early closes the answer, errors are Node's", async () => {
				const size = Buffer.byteLength(lines(200_000));
				await put("big2.txt", lines(200_000));
				const routes = new WorkspaceRoutes(ops.client, ws);
				let first = 0;
				for await (const c of routes.readStream(`${root}/big2.txt`)) {
					first = c.length;
					break;
				}
				assert.ok(first > 0 && first < size, `first chunk ${first} of ${size}`);
				const err = await rejection(async () => {
					for await (const _ of routes.readStream(`${root}/nope.txt`, "nope.txt")) {
						// never reached
					}
				});
				assert.equal(err.message, "ENOENT: no such file or directory, open 'nope.txt'");
				let all = 0;
				for await (const c of routes.readStream(`${root}/big2.txt`)) all += c.length;
				assert.equal(all, size);
			});
			test("~ is the workspace root (brokerTools)", async () => {
				await put("tilde.txt", "at the root");
				const r = await tools.read.execute("t", { path: "~/tilde.txt" }, undefined, undefined, undefined as never);
				assert.equal(textOf(r), "at the root");
			});
		});

		describe("write", () => {
			test("creates parents, reports pi's text", async () => {
				const r = await createWriteTool(root, { operations: ops.write }).execute("t", { path: "a/b/c.txt", content: "héllo" });
				// pi's text; the byte count went away after 0.82.
				assert.match(textOf(r), /^Successfully wrote (5 bytes )?to a\/b\/c\.txt$/);
				assert.equal((await ops.read.readFile(`${root}/a/b/c.txt`)).toString(), "héllo");
			});
		});

		describe("edit", () => {
			const edit = () => createEditTool(root, { operations: ops.edit });
			test("exact replacement with a diff", async () => {
				await put("e1.txt", "alpha\nbeta\ngamma\n");
				const r = await edit().execute("t", { path: "e1.txt", edits: [{ oldText: "beta", newText: "BETA" }] });
				assert.equal(textOf(r), "Successfully replaced 1 block(s) in e1.txt.");
				assert.match(r.details!.diff, /\+2 BETA/);
				assert.equal((await ops.read.readFile(`${root}/e1.txt`)).toString(), "alpha\nBETA\ngamma\n");
			});
			test("fuzzy matching: trailing spaces, smart quotes, dashes, NBSP", async () => {
				await put("fz.txt", "line one   \nsay \u201chi\u201d \u2014 it\u2019s\u00a0ok\nline three\n");
				const r = await edit().execute("t", {
					path: "fz.txt",
					edits: [{ oldText: "line one\nsay \"hi\" - it's ok\n", newText: "replaced\n" }],
				});
				assert.match(textOf(r), /Successfully replaced 1 block/);
				assert.equal((await ops.read.readFile(`${root}/fz.txt`)).toString(), "replaced\nline three\n");
			});
			test("CRLF and BOM preserved", async () => {
				await put("crlf.txt", "\ufefffirst\r\nsecond\r\nthird\r\n");
				await edit().execute("t", { path: "crlf.txt", edits: [{ oldText: "second\n", newText: "REPLACED\n" }] });
				assert.equal((await ops.read.readFile(`${root}/crlf.txt`)).toString(), "\ufefffirst\r\nREPLACED\r\nthird\r\n");
			});
			test("errors: not found, duplicates, missing file", async () => {
				await put("dup.txt", "foo foo foo");
				let err = await rejection(() => edit().execute("t", { path: "dup.txt", edits: [{ oldText: "bar", newText: "x" }] }));
				assert.match(err.message, /^Could not find the exact text in dup\.txt\./);
				err = await rejection(() => edit().execute("t", { path: "dup.txt", edits: [{ oldText: "foo", newText: "x" }] }));
				assert.match(err.message, /^Found 3 occurrences of the text in dup\.txt\./);
				err = await rejection(() => edit().execute("t", { path: "missing.txt", edits: [{ oldText: "a", newText: "b" }] }));
				assert.equal(err.message, "Could not edit file: missing.txt. Error code: ENOENT.");
			});
		});

		describe("bash", () => {
			const bash = () => createBashTool(root, { operations: ops.bash });
			test("output, working directory, exit codes", async () => {
				const r = await bash().execute("t", { command: "echo hi; pwd; echo err >&2" });
				assert.equal(textOf(r), `hi\n${root}\nerr\n`);
				const err = await rejection(() => bash().execute("t", { command: "echo out; exit 3" }));
				assert.equal(err.message, "out\n\n\nCommand exited with code 3");
				const none = await bash().execute("t", { command: "true" });
				assert.equal(textOf(none), "(no output)");
			});
			test("a timeout: pi's timeout:<n> protocol", async () => {
				const err = await rejection(() => bash().execute("t", { command: "echo started; sleep 30", timeout: 1 }));
				assert.equal(err.message, "started\n\n\nCommand timed out after 1 seconds");
			});
			test("an abort: pi's aborted protocol", async () => {
				const ac = new AbortController();
				const p = bash().execute("t", { command: "echo started; sleep 30" }, ac.signal, (u) => {
					if (textOf(u).includes("started")) ac.abort();
				});
				const err = await rejection(() => p);
				assert.equal(err.message, "started\n\n\nCommand aborted");
			});
			test("an abort before any output", async () => {
				const ac = new AbortController();
				setTimeout(() => ac.abort(), 300);
				const err = await rejection(() => bash().execute("t", { command: "sleep 30" }, ac.signal));
				assert.equal(err.message, "Command aborted");
			});
			test("a missing working directory: pi's message", async () => {
				const err = await rejection(() => createBashTool(`${root}/nowhere`, { operations: ops.bash }).execute("t", { command: "true" }));
				assert.equal(err.message, `Working directory does not exist: ${root}/nowhere\nCannot execute bash commands.`);
			});
			test("environment: only the allowlist crosses", async () => {
				process.env.PI_TEST_ALLOWED = "yes";
				process.env.PI_TEST_SECRET = "sk-should-not-leak";
				try {
					const r = await bash().execute("t", { command: 'echo "a=$PI_TEST_ALLOWED s=$PI_TEST_SECRET"' });
					assert.equal(textOf(r), "a=yes s=\n");
				} finally {
					delete process.env.PI_TEST_ALLOWED;
					delete process.env.PI_TEST_SECRET;
				}
			});
			test("UTF-8 split across chunks", async () => {
				const r = await bash().execute("t", { command: "printf '\\342'; sleep 0.3; printf '\\202\\254\\n'" });
				assert.equal(textOf(r), "€\n");
			});
			test("truncation: the full output file is inside the workspace (brokerTools)", async () => {
				const r = await tools.bash.execute("t", { command: "seq 3000" }, undefined, undefined, undefined as never);
				const text = textOf(r);
				// 3001 lines in pi 0.73.1, which counts the trailing newline's empty line.
				const m = text.match(/\n\n\[Showing lines (\d+)-(3000 of 3000|3001 of 3001)\. Full output: (\S+)\]$/);
				assert.ok(m, text.slice(-200));
				const full = m![3];
				assert.equal(r.details?.fullOutputPath, full);
				assert.ok(full.startsWith(`${root}/.wsbroker/bash-output/pi-bash-`), full);
				const back = await tools.read.execute("t", { path: full, offset: 2999 }, undefined, undefined, undefined as never);
				assert.equal(textOf(back), "2999\n3000\n");
				// Non-zero exit: the path in the error text is moved as well.
				const err = await rejection(() =>
					tools.bash.execute("t", { command: "seq 3000; exit 4" }, undefined, undefined, undefined as never),
				);
				const m2 = err.message.match(/Full output: (\S+)\]\n\nCommand exited with code 4$/);
				assert.ok(m2, err.message.slice(-300));
				assert.ok(m2![1].startsWith(`${root}/.wsbroker/`), m2![1]);
				assert.equal((await ops.read.readFile(m2![1])).toString().split("\n").length, 3001);
				// and grep/find do not list them (.ignore)
				const g = await tools.grep.execute("t", { pattern: "^2999$" }, undefined, undefined, undefined as never);
				assert.equal(textOf(g), "No matches found");
			});
			test("no onData after exec settles", async () => {
				let settled = false;
				let late = 0;
				let seen = "";
				const r = await ops.bash.exec("(sleep 0.5; echo late) & echo early", root, {
					onData: (d) => {
						if (settled) late++;
						seen += d.toString();
					},
				});
				settled = true;
				await new Promise((res) => setTimeout(res, 1500));
				assert.equal(r.exitCode, 0);
				assert.equal(late, 0);
				assert.ok(seen.startsWith("early\n"), seen);
			});
			test("a throwing onData stops the command and rejects with its error", async () => {
				const err = await rejection(() =>
					ops.bash.exec("echo x; sleep 60", root, {
						onData: () => {
							throw new Error("boom");
						},
					}),
				);
				assert.equal(err.message, "boom");
			});
			test("a signal is exit code 128+N", async () => {
				const err = await rejection(() => bash().execute("t", { command: "kill -9 $$" }));
				assert.equal(err.message, "(no output)\n\nCommand exited with code 137");
			});
		});

		describe("cancellation", () => {
			test("aborting pi's bash kills the remote process tree", async () => {
				// A duration unique to this run marks its processes; the grep
				// pattern is bracketed so the counting command never matches itself.
				const secs = String(1000 + Math.floor(Math.random() * 9000));
				const pattern = `sleep ${secs.slice(0, -1)}[${secs.slice(-1)}]`;
				const count = async () =>
					(
						await sh(
							`n=0; for f in /proc/[0-9]*/cmdline; do { tr '\\0' ' ' < $f; } 2>/dev/null | grep -q '${pattern}' && n=$((n+1)); done; echo $n`,
						)
					).out.trim();
				// "started" can come before the background shells have started
				// their sleeps: count until all four are there (or 5 s pass).
				const countAll = async () => {
					for (let i = 0; i < 100; i++) {
						const n = await count();
						if (Number(n) >= 4) return n;
						await new Promise((r) => setTimeout(r, 50));
					}
					return count();
				};
				const ac = new AbortController();
				const cmd = `sh -c 'sleep ${secs}; :' & sh -c 'sleep ${secs}; :' & echo started; wait`;
				let running: Promise<string> | undefined;
				const p = createBashTool(root, { operations: ops.bash }).execute("t", { command: cmd }, ac.signal, (u) => {
					if (!running && textOf(u).includes("started")) {
						running = countAll().finally(() => ac.abort());
					}
				});
				const err = await rejection(() => p);
				assert.equal(err.message, "started\n\n\nCommand aborted");
				// Both sh and both sleep processes ran, seen through the broker...
				assert.equal(Number(await running) >= 4, true, `running count ${await running}`);
				// ...and none is left once pi reported the abort.
				assert.equal(await count(), "0");
			});
		});

		describe("grep, find, ls", () => {
			before(async () => {
				await put("tree/src/a.ts", "const x = 1;\n// TODO one\n");
				await put("tree/src/b.spec.ts", "test TODO two\n");
				await put("tree/.hidden/h.txt", "TODO hidden\n");
				await put("tree/.gitignore", "ignored.txt\n");
				await put("tree/ignored.txt", "TODO ignored\n");
				await ops.write.mkdir(`${root}/tree/empty`);
			});
			test("grep runs in the workspace (server-side tool)", async () => {
				const r = await tools.grep.execute("t", { pattern: "TODO", path: "tree" }, undefined, undefined, undefined as never);
				const got = textOf(r).split("\n").sort();
				// ripgrep honours .gitignore only inside a git repository (pi's too).
				assert.deepEqual(got, [
					".hidden/h.txt:1: TODO hidden",
					"ignored.txt:1: TODO ignored",
					"src/a.ts:2: // TODO one",
					"src/b.spec.ts:1: test TODO two",
				]);
				const lim = await tools.grep.execute("t", { pattern: "TODO", path: "tree", limit: 1 }, undefined, undefined, undefined as never);
				assert.match(textOf(lim), /\n\n\[1 matches limit reached\. Use limit=2 for more, or refine pattern\]$/);
				const err = await rejection(() => tools.grep.execute("t", { pattern: "x", path: "nowhere" }, undefined, undefined, undefined as never));
				assert.match(err.message, /^Path not found: /);
			});
			test("find through pi's factory with FindOperations.glob", async () => {
				const find = createFindTool(root, { operations: ops.find });
				const r = await find.execute("t", { pattern: "*.ts", path: "tree" });
				assert.deepEqual(textOf(r).split("\n").sort(), ["src/a.ts", "src/b.spec.ts"]);
				const r2 = await find.execute("t", { pattern: "src/**/*.spec.ts", path: "tree" });
				assert.equal(textOf(r2), "src/b.spec.ts");
				// Two matches: pi 1.x prints the notice only when there are more than limit.
				const r3 = await find.execute("t", { pattern: "*.ts", path: "tree", limit: 1 });
				assert.match(textOf(r3), /\n\n\[1 results limit reached\]$/);
				const err = await rejection(() => find.execute("t", { pattern: "*", path: "nowhere" }));
				assert.equal(err.message, `Path not found: ${root}/nowhere`);
			});
			test("find runs in the workspace (server-side tool)", async () => {
				const r = await tools.find.execute("t", { pattern: "*.txt", path: "tree" }, undefined, undefined, undefined as never);
				assert.equal(textOf(r), ".hidden/h.txt");
			});
			test("ls: sorted, dirs with /, dotfiles", async () => {
				const ls = createLsTool(root, { operations: ops.ls });
				const r = await ls.execute("t", { path: "tree" });
				assert.equal(textOf(r), ".gitignore\n.hidden/\nempty/\nignored.txt\nsrc/");
				assert.equal(textOf(await ls.execute("t", { path: "tree/empty" })), "(empty directory)");
				const lim = await ls.execute("t", { path: "tree", limit: 2 });
				assert.equal(textOf(lim), ".gitignore\n.hidden/\n\n[2 entries limit reached. Use limit=4 for more]");
				let err = await rejection(() => ls.execute("t", { path: "tree/nowhere" }));
				assert.equal(err.message, `Path not found: ${root}/tree/nowhere`);
				err = await rejection(() => ls.execute("t", { path: "tree/ignored.txt" }));
				assert.equal(err.message, `Not a directory: ${root}/tree/ignored.txt`);
			});
			test("ls skips a dangling symbolic link, as statSync does", async () => {
				await sh("mkdir -p links && ln -sf /nonexistent-target links/dangling && ln -sf ../tree links/good");
				const r = await createLsTool(root, { operations: ops.ls }).execute("t", { path: "links" });
				assert.equal(textOf(r), "good/");
			});
			if (backend === "local") {
				// pi's grep spawns ripgrep on the host with the resolved path: it
				// only works where the workspace root is a host path (local backend).
				test("grep through pi's factory with GrepOperations (context lines via readFile)", async () => {
					const grep = createGrepTool(root, { operations: ops.grep });
					const r = await grep.execute("t", { pattern: "TODO one", path: "tree", context: 1 });
					// pi up to 0.85 reads context lines through readFile and splits the
					// file's trailing newline into an empty line 3; pi 1.x takes them from
					// ripgrep (readFile is no longer called), which has no such line.
					const want = pi.VERSION.startsWith("0.") ? "src/a.ts-1- const x = 1;\nsrc/a.ts:2: // TODO one\nsrc/a.ts-3- " : "src/a.ts-1- const x = 1;\nsrc/a.ts:2: // TODO one";
					assert.equal(textOf(r), want);
				});
			}
		});
	});
}
