#!/usr/bin/env bash
# Offline builder of the workspace image, for machines that cannot pull from a
# registry (CI, tests). It debootstraps Debian from the apt mirror configured
# on this machine (read from the apt sources, never named here), installs
# packages.txt, runs setup.sh, and turns the tree into an image with
# `docker import`, giving it the configuration the Dockerfile declares.
#
# The image is tagged by a hash of its recipe, wsbroker/workspace:<hash12>;
# when that tag exists already the build is skipped. Either way the image is
# also tagged wsbroker/workspace:current, and its reference is printed on
# stdout (progress goes to stderr).
#
#   images/workspace/build.sh            # build, or reuse the cached image
#   images/workspace/build.sh --force    # rebuild even when cached
#
# Needs root (debootstrap, chroot), debootstrap and a running docker engine.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo=wsbroker/workspace
suite=bookworm
force=0
case "${1:-}" in
--force) force=1 ;;
"") ;;
*) echo "usage: $0 [--force]" >&2; exit 2 ;;
esac

log() { printf 'workspace image: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The recipe: every file whose change must give a new image.
hash="$(cd "$here" && sha256sum build.sh Dockerfile packages.txt setup.sh | sha256sum | cut -c1-12)"
ref="$repo:$hash"

# One build at a time on a machine: a second caller waits and then finds the cache.
exec 9>"${TMPDIR:-/tmp}/wsbroker-image-workspace.lock"
flock 9

if [ "$force" = 0 ] && docker image inspect "$ref" >/dev/null 2>&1; then
	docker tag "$ref" "$repo:current"
	log "cached $ref"
	echo "$ref"
	exit 0
fi

[ "$(id -u)" = 0 ] || die "needs root (debootstrap and chroot)"
command -v debootstrap >/dev/null || die "needs debootstrap (apt-get install debootstrap)"
docker info >/dev/null 2>&1 || die "cannot reach the docker engine"

# apt_uri SUITE prints the first URI of an enabled "deb" source for SUITE,
# from the deb822 *.sources files or the one-line *.list files.
apt_uri() {
	local want="$1" f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk -v want="$want" '
			BEGIN { RS = ""; FS = "\n" }
			{
				types = ""; uris = ""; suites = ""; enabled = "yes"
				for (i = 1; i <= NF; i++) {
					line = $i
					if (line ~ /^[ \t]*#/) continue
					key = tolower(line); sub(/:.*/, "", key)
					val = line; sub(/^[^:]*:[ \t]*/, "", val)
					if (key == "types") types = val
					else if (key == "uris") uris = val
					else if (key == "suites") suites = val
					else if (key == "enabled") enabled = tolower(val)
				}
				if (enabled != "no" && (" " types " ") ~ / deb / && (" " suites " ") ~ (" " want " ")) {
					split(uris, u, /[ \t]+/); print u[1]; exit
				}
			}' "$f" | grep . && return 0
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk -v want="$want" '
			$1 == "deb" {
				i = 2
				if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
				if ($(i + 1) == want) { print $i; exit }
			}' "$f" | grep . && return 0
	done
	return 1
}

mirror="$(apt_uri "$suite")" || die "no apt source for $suite in /etc/apt"
security="$(apt_uri "$suite-security" || true)"
log "mirror $mirror${security:+, security $security}"

# Honour the machine's own apt settings that decide whether its mirror works
# at all: a proxy, and date checks (off for snapshot mirrors whose Release
# files are past Valid-Until; signatures are still verified).
apt_opts=()
eval "$(apt-config shell http_proxy Acquire::http::Proxy check_valid Acquire::Check-Valid-Until check_date Acquire::Check-Date)"
if [ -n "${http_proxy:-}" ]; then export http_proxy; apt_opts+=(-o "Acquire::http::Proxy=$http_proxy"); fi
[ "${check_valid:-}" = false ] && apt_opts+=(-o Acquire::Check-Valid-Until=false)
[ "${check_date:-}" = false ] && apt_opts+=(-o Acquire::Check-Date=false)

started=$SECONDS
work="$(mktemp -d "${TMPDIR:-/var/tmp}/wsb-workspace.XXXXXX")"
rootfs="$work/rootfs"

# unmount_under DIR unmounts whatever is mounted below DIR, deepest first, so
# that removing the tree can never reach the host's /proc or /dev.
unmount_under() {
	local m
	awk -v d="$1/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
		umount -l "$m" || true
	done
}
cleanup() {
	unmount_under "$work"
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT

packages="$(sed -e 's/#.*//' "$here/packages.txt" | tr -s ' \t\n' '\n' | grep . | paste -sd, -)"
log "debootstrap $suite ($packages)"
debootstrap --variant=minbase --components=main --include="$packages" \
	"$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
	{ tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }

# The image's own apt sources: the same mirror, plus updates and security, so
# the upgrade below brings in the fixes the Dockerfile build would get.
rm -f "$rootfs/etc/apt/sources.list"
{
	printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
		"$mirror" "$suite" "$suite"
	if [ -n "$security" ]; then
		printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
			"$security" "$suite"
	fi
} >"$rootfs/etc/apt/sources.list.d/debian.sources"

# Nothing installed in the chroot may start a service.
printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
chmod 755 "$rootfs/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
mount -t proc proc "$rootfs/proc"

in_root() { chroot "$rootfs" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@"; }
log "apt-get upgrade (after $((SECONDS - started))s)"
{
	in_root apt-get "${apt_opts[@]}" -q update &&
		in_root apt-get "${apt_opts[@]}" -q -y -o Dpkg::Options::=--force-confold upgrade &&
		cp "$here/setup.sh" "$rootfs/tmp/wsb-setup.sh" &&
		in_root sh /tmp/wsb-setup.sh
} >"$work/chroot.log" 2>&1 || { tail -n 30 "$work/chroot.log" >&2; die "apt-get upgrade or setup.sh failed"; }

unmount_under "$work"
rm -f "$rootfs/tmp/wsb-setup.sh" "$rootfs/usr/sbin/policy-rc.d"
# The engine provides these at run time.
: >"$rootfs/etc/resolv.conf"
: >"$rootfs/etc/hostname"
rm -rf "${rootfs:?}"/dev/* "${rootfs:?}"/proc/* "${rootfs:?}"/sys/* "${rootfs:?}"/run/* "${rootfs:?}"/tmp/*

# The same configuration as the Dockerfile's ENV/USER/WORKDIR/ENTRYPOINT/CMD.
log "docker import $ref (after $((SECONDS - started))s)"
tar --numeric-owner -C "$rootfs" -c . | docker import \
	--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change 'ENV HOME=/home/agent' \
	--change 'ENV LANG=C.UTF-8' \
	--change 'USER agent' \
	--change 'WORKDIR /workspace' \
	--change 'ENTRYPOINT ["/usr/bin/tini", "--"]' \
	--change 'CMD ["sleep", "infinity"]' \
	--change "LABEL org.wsbroker.recipe=$hash" \
	--message "wsbroker workspace image, recipe $hash" \
	- "$ref" >/dev/null
docker tag "$ref" "$repo:current"
log "built $ref in $((SECONDS - started))s"
echo "$ref"
