// pi-ai (the faux model the extension test scripts) under either npm scope,
// as src/pi.ts does for pi's coding-agent package: the test must register
// its faux provider in the same pi-ai that the installed pi uses.
import type * as PiAi from "@earendil-works/pi-ai";
import { packageMissing } from "../src/pi.js";

async function load(): Promise<typeof PiAi> {
	try {
		return await import("@earendil-works/pi-ai");
	} catch (err) {
		if (!packageMissing(err, "@earendil-works/pi-ai")) throw err;
	}
	return (await import("@mariozechner/pi-ai")) as unknown as typeof PiAi;
}

export const piAi: typeof PiAi = await load();
