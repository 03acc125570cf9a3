#!/usr/bin/env bash
# Offline builder of the sshd test target, wsbroker/sshd: starts from the local
# workspace image (built or reused by ../workspace/build.sh, so nothing is
# pulled), runs install.sh in a container of it, and commits the result with
# the configuration the Dockerfile declares.
#
# Tagged by a hash of the recipe and of the workspace image it starts from,
# wsbroker/sshd:<hash12>, reused when that tag exists; also tagged
# wsbroker/sshd:current. Prints the image reference on stdout.
#
#   images/sshd/build.sh [--force]
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo=wsbroker/sshd
force=0
case "${1:-}" in
--force) force=1 ;;
"") ;;
*) echo "usage: $0 [--force]" >&2; exit 2 ;;
esac

log() { printf 'sshd image: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

base="$("$here/../workspace/build.sh")"
base_id="$(docker image inspect -f '{{.Id}}' "$base")"
hash="$({
	cd "$here" && sha256sum build.sh Dockerfile packages.txt install.sh sshd_config entrypoint.sh
	echo "$base_id"
} | sha256sum | cut -c1-12)"
ref="$repo:$hash"

exec 9>"${TMPDIR:-/tmp}/wsbroker-image-sshd.lock"
flock 9

if [ "$force" = 0 ] && docker image inspect "$ref" >/dev/null 2>&1; then
	docker tag "$ref" "$repo:current"
	log "cached $ref"
	echo "$ref"
	exit 0
fi

# The machine's apt settings that decide whether its mirror works (see
# ../workspace/build.sh); the container shares the host's network for apt.
apt_opts=()
eval "$(apt-config shell http_proxy Acquire::http::Proxy check_valid Acquire::Check-Valid-Until check_date Acquire::Check-Date)"
[ -n "${http_proxy:-}" ] && apt_opts+=(-o "Acquire::http::Proxy=$http_proxy")
[ "${check_valid:-}" = false ] && apt_opts+=(-o Acquire::Check-Valid-Until=false)
[ "${check_date:-}" = false ] && apt_opts+=(-o Acquire::Check-Date=false)

started=$SECONDS
name="wsb-sshd-build-$$"
work="$(mktemp -d "${TMPDIR:-/tmp}/wsb-sshd.XXXXXX")"
cleanup() {
	docker rm -f "$name" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

log "install.sh in a container of $base"
docker run --name "$name" --network host --user root --entrypoint /bin/sh \
	-v "$here:/wsb-recipe:ro" "$base" /wsb-recipe/install.sh "${apt_opts[@]}" \
	>"$work/install.log" 2>&1 ||
	{ tail -n 30 "$work/install.log" >&2; die "install.sh failed"; }

# The same configuration as the Dockerfile's ENV/USER/WORKDIR/EXPOSE/ENTRYPOINT/CMD.
docker commit \
	--change 'ENV HOME=/root' \
	--change 'USER root' \
	--change 'WORKDIR /' \
	--change 'EXPOSE 22' \
	--change 'ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/sbin/wsb-sshd"]' \
	--change 'CMD []' \
	--change "LABEL org.wsbroker.recipe=$hash" \
	--message "wsbroker sshd test target, recipe $hash" \
	"$name" "$ref" >/dev/null
docker tag "$ref" "$repo:current"
log "built $ref in $((SECONDS - started))s"
echo "$ref"
