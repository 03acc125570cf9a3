// pi's package for library users and the tests: imported by name, under
// either npm scope (the new @earendil-works first, then @mariozechner), from
// this package's folder. The extension does not use this: it takes the pi
// that loaded it (src/host.ts).
import { type Pi, importPiByName } from "./host.js";

export { packageMissing } from "./host.js";

/** pi's coding-agent package, whichever scope provides it. */
export const pi: Pi = await importPiByName();
