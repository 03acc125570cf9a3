package docker

import (
	"context"
	"slices"
)

// A fork bomb fills the container's pids limit, and then remoteexec's kill
// script, which forks for grep, sed and sort, cannot run. The exec that
// runs it still starts (joining a cgroup is not limited by pids.max), so
// when the script fails the backend runs this one instead: bash builtins
// only, no fork. It stops the call's process group and every process
// carrying the call's marker, round after round until no new one appears
// (a stopped process cannot fork), then kills them all.
//
//	bash -c noForkKillScript wsbroker MODE PGID MARKER
const noForkKillScript = `mode=$1 pg=$2 m=$3 n=0
declare -A seen
signal() {
	if [[ $pg -gt 1 ]]; then
		if [[ $mode == group ]]; then kill -"$1" -- "-$pg"; else kill -"$1" "$pg"; fi
	fi 2>/dev/null
}
signal STOP
for round in {1..100}; do
	new=0
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		[[ -n ${seen[$p]} ]] && continue
		hit=
		if [[ -n $m ]]; then
			while IFS= read -r -d '' kv; do
				if [[ $kv == "$m" ]]; then hit=1; break; fi
			done 2>/dev/null < "$d/environ"
		fi
		if [[ -z $hit && $mode == group && $pg -gt 1 ]] && IFS= read -r st 2>/dev/null < "$d/stat"; then
			set -- ${st##*) }
			[[ $1 != [ZX] && $3 == "$pg" ]] && hit=1
		fi
		if [[ -n $hit ]]; then
			kill -STOP "$p" 2>/dev/null
			seen[$p]=1 new=1 n=$((n+1))
		fi
	done
	[[ $new == 0 ]] && break
done
signal KILL
for p in "${!seen[@]}"; do kill -KILL "$p" 2>/dev/null; done
echo "@wsbroker killed $n"
`

// killArgs recognises remoteexec's kill protocol, sh -c SCRIPT wsbroker
// MODE PGID MARKER GRACE_MS, and returns MODE, PGID and MARKER.
func killArgs(argv []string) ([]string, bool) {
	if len(argv) != 8 || !slices.Equal(argv[:2], []string{"sh", "-c"}) || argv[3] != "wsbroker" ||
		(argv[4] != "group" && argv[4] != "pid") {
		return nil, false
	}
	return argv[4:7], true
}

// runKill is remoteexec's RunFunc: the short command in an exec of its
// own, and for a kill script that could not run (the pids limit is
// reached), the same kill without forking.
func (w *Workspace) runKill(ctx context.Context, argv []string) ([]byte, error) {
	out, err := w.run(ctx, argv)
	args, isKill := killArgs(argv)
	if err == nil || !isKill || ctx.Err() != nil || w.gone("", "") != nil {
		return out, err
	}
	w.logger.Warn("the kill script failed (pids limit reached?); killing with shell builtins only", "err", err)
	return w.run(ctx, append([]string{"bash", "-c", noForkKillScript, "wsbroker"}, args...))
}
