// The TypeScript SDK's figures for scripts/sdk-bench.sh (issue 39), which
// runs it beside the Go client and the Python SDK against one broker and one
// workspace. It reads BROKER_URL and BROKER_TOKEN (or the token file, as
// the SDK does), WSBROKER_BENCH_WS (the workspace; WS also works),
// WSBROKER_BENCH_READ (a 4 KiB file, default bench-4k.bin), WSBROKER_BENCH_BIG
// (a 1 GiB file, default bench-1g.bin), WSBROKER_BENCH_N (calls per figure,
// 300) and WSBROKER_BENCH_NO_DOWNLOAD (1: skip the download), and prints one
// line: {"read4k_p50_ms":..,"true_p50_ms":..,"download_rss_growth_mib":..}.
//
// The download's figure is the peak RSS (VmHWM, reset through
// /proc/self/clear_refs) minus the RSS before it, while the file streams
// through Workspace.open to the end, as the Go bench measures itself.
//
//   (cd integrations/typescript && npm ci && npm run build)
//   BROKER_URL=... BROKER_TOKEN=... WSBROKER_BENCH_WS=ws_... node integrations/typescript/bench/bench.mjs
import { existsSync, readFileSync, writeFileSync } from "node:fs";

const dist = new URL("../dist/src/index.js", import.meta.url);
if (!existsSync(dist)) {
	console.error("bench: the SDK is not built: (cd integrations/typescript && npm ci && npm run build)");
	process.exit(2);
}
const { Broker } = await import(dist.href);

const wsId = process.env.WSBROKER_BENCH_WS || process.env.WS;
if (!wsId) {
	console.error("bench: WSBROKER_BENCH_WS (or WS) names no workspace");
	process.exit(2);
}
const n = Number(process.env.WSBROKER_BENCH_N || 300);
const small = process.env.WSBROKER_BENCH_READ || "bench-4k.bin";
const big = process.env.WSBROKER_BENCH_BIG || "bench-1g.bin";
const noDownload = process.env.WSBROKER_BENCH_NO_DOWNLOAD === "1";

const broker = new Broker();
const ws = await broker.get(wsId);

async function p50(fn) {
	for (let i = 0; i < Math.max(Math.floor(n / 10), 5); i++) await fn();
	const times = [];
	for (let i = 0; i < n; i++) {
		const t = process.hrtime.bigint();
		await fn();
		times.push(Number(process.hrtime.bigint() - t) / 1e6);
	}
	times.sort((a, b) => a - b);
	return Math.round(times[Math.floor(times.length / 2)] * 1000) / 1000;
}

function statusKiB(field) {
	const line = readFileSync("/proc/self/status", "utf8")
		.split("\n")
		.find((l) => l.startsWith(`${field}:`));
	if (!line) throw new Error(`bench: /proc/self/status has no ${field}`);
	return Number(line.split(/\s+/)[1]);
}

const out = {};
out.read4k_p50_ms = await p50(async () => {
	const b = await ws.readBytes(small);
	if (b.byteLength !== 4096) throw new Error(`bench: ${small} has ${b.byteLength} bytes, want 4096`);
});
out.true_p50_ms = await p50(async () => {
	const r = await ws.run("true");
	if (r.exitCode !== 0) throw new Error(`bench: true exited ${r.exitCode}`);
});
out.download_rss_growth_mib = null;
if (!noDownload) {
	const base = statusKiB("VmRSS");
	writeFileSync("/proc/self/clear_refs", "5");
	let total = 0;
	for await (const c of await ws.open(big)) total += c.byteLength;
	if (total !== 2 ** 30) throw new Error(`bench: ${big}: read ${total} bytes, want 1 GiB`);
	out.download_rss_growth_mib = Math.round(((statusKiB("VmHWM") - base) / 1024) * 10) / 10;
}
broker.close();
console.log(JSON.stringify(out));
