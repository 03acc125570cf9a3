// pi's package under either npm scope. pi moved from @mariozechner (up to
// 0.73.1) to @earendil-works (0.74 on); the extension imports the new name
// and falls back to the old one, so one build runs under every pi. pi's
// extension loader aliases the names it knows to its own copy (0.73.1: the
// old scope only; 0.74+: both), so the extension always gets the pi that
// loaded it; a library user gets whichever scope their project installed.
import type * as PiCodingAgent from "@earendil-works/pi-coding-agent";

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

async function load(): Promise<typeof PiCodingAgent> {
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

/** pi's coding-agent package, whichever scope provides it. */
export const pi: typeof PiCodingAgent = await load();
