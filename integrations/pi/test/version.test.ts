// The version matrix (scripts/test-version.sh) names the pi it installed;
// this proves the tests ran against that pi and not, through src/pi.ts's
// fallback to the old scope, against another copy further up the tree.
import assert from "node:assert/strict";
import { test } from "node:test";
import { pi } from "../src/pi.js";

test("the pi under test is the version asked for", { skip: process.env.WSBROKER_PI_VERSION ? undefined : "WSBROKER_PI_VERSION not set" }, () => {
	assert.equal(pi.VERSION, process.env.WSBROKER_PI_VERSION);
});
