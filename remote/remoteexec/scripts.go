package remoteexec

// wrapperScript runs one command: sh -c wrapperScript wsbroker CWD SHELL
// COMMAND HOW LEAD ENV... (see the package documentation). It enters CWD
// (reporting a missing one), then:
//
// When LEAD is 1 (the transport reports the exit status as soon as the
// command exits) and the shell running the script already leads its own
// process group (sshd makes every session a new session; a group whose id
// is the shell's pid exists only then, which `kill -s 0` asks with one
// builtin, where reading /proc/$$/stat byte by byte cost a fifth of a
// millisecond), it reports that
// group and becomes the command: with the environment taken (`export`,
// or env(1) when HOW is "env" because a key is no shell name), stdin from
// /dev/null and stderr into stdout, it evals COMMAND itself when it is
// the bash SHELL names, else execs `SHELL -c COMMAND`. No program starts
// beyond the transport's own shell, or one.
//
// Otherwise a subshell reports its own pid (read from /proc/self/stat by
// a builtin: no fork), takes the environment, moves to a new session with
// setsid (which does not fork: a subshell is no group leader) and execs
// the shell, so its pid is the group id it reports; the wrapper reports
// the exit status. The subshell runs in the foreground: sh starts a
// background job with SIGINT and SIGQUIT ignored, and a shell that
// inherits them ignored can neither trap them nor die of them, so a
// signal from ExecRequest.Signals would not reach it. Control lines go to
// stderr (fd 3 in the subshell); the command's stdout and stderr both go
// to stdout.
const wrapperScript = `cwd=$1 shell=$2 cmd=$3 how=$4 lead=$5
shift 5
if ! cd -- "$cwd" 2>/dev/null; then
	if [ -d "$cwd" ]; then echo '@wsbroker noperm' >&2
	elif [ -e "$cwd" ]; then echo '@wsbroker notdir' >&2
	else echo '@wsbroker nocwd' >&2
	fi
	exit 0
fi
if [ "$lead" = 1 ] && kill -s 0 -- "-$$" 2>/dev/null; then
	echo "@wsbroker leader $$" >&2
	exec </dev/null 2>&1
	if [ "$how" = env ]; then exec env -- "$@" "$shell" -c "$cmd"; fi
	export "$@"
	if [ -n "${BASH_VERSION-}" ] && [ "${shell##*/}" = bash ]; then
		set -- "$cmd"
		unset cwd shell cmd how lead
		eval "set --
$1"
		exit
	fi
	exec "$shell" -c "$cmd"
fi
s= kind=pid
if command -v setsid >/dev/null 2>&1; then s=setsid kind=pgid; fi
(
	read -r pid _ </proc/self/stat
	echo "@wsbroker $kind $pid" >&3
	exec 3>&-
	if [ "$how" = env ]; then exec $s env -- "$@" "$shell" -c "$cmd"; fi
	export "$@"
	exec $s "$shell" -c "$cmd"
) 3>&2 </dev/null 2>&1
echo "@wsbroker exit $?" >&2
`

// killScript kills a call's processes: sh -c killScript wsbroker MODE PGID
// MARKER GRACE_MS, MODE "group" (PGID is a process group) or "pid" (just
// a process). Targets are the live members of the group and every process
// whose environment holds MARKER; they get SIGTERM, up to GRACE_MS to
// vanish, then SIGKILL until none is left. It prints "@wsbroker killed N",
// N the number of targets found at the start.
//
// The grace is measured on the clock: now sets t to the uptime in
// centiseconds (/proc/uptime, read by a builtin, no fork). Counting polls
// instead (GRACE_MS/50 rounds of `sleep 0.05`) made it several times
// longer, since each poll also runs pids: four programs that read every
// process's stat and environ, 300 ms and more per poll on a busy host. A
// clock that cannot be read ends the grace at once.
//
// A group is signalled as `kill -SIG -PGID`, without `--`: dash's kill
// refuses `kill -SIG -- -PGID` ("Illegal number: -").
const killScript = `mode=$1 pg=$2 m=$3 g=$4
` + findScript + `now() {
	read -r t _ 2>/dev/null </proc/uptime || return 1
	t=${t%.*}${t#*.}
	t=${t#"${t%%[!0]*}"}
	t=${t:-0}
}
signal() {
	if [ "$pg" -gt 1 ]; then
		if [ "$mode" = group ]; then kill -"$1" "-$pg" 2>/dev/null; else kill -"$1" "$pg" 2>/dev/null; fi
	fi
}
first=$(pids)
n=0
for p in $first; do n=$((n+1)); done
signal TERM
if [ -n "$first" ]; then kill -TERM $first 2>/dev/null; fi
now; end=$((t + g / 10))
while [ -n "$(pids)" ] && now && [ "$t" -lt "$end" ]; do sleep 0.05; done
signal KILL
i=0
while [ "$i" -lt 100 ]; do
	p=$(pids)
	if [ -z "$p" ]; then break; fi
	kill -KILL $p 2>/dev/null
	sleep 0.02
	i=$((i+1))
done
echo "@wsbroker killed $n"
`

// findScript defines, for killScript and signalScript, members (the
// /proc files of the live members of group (or process) $pg, and of every
// process whose environment holds $m) and pids (their pids, each once),
// $mode being "group" or "pid".
const findScript = `members() {
	if [ "$pg" -gt 1 ]; then
		if [ "$mode" = group ]; then
			grep -lE "^[0-9]+ \(.*\) [^ZX] [0-9]+ $pg " /proc/[0-9]*/stat 2>/dev/null
		else
			grep -lE "^$pg \(.*\) [^ZX] " /proc/$pg/stat 2>/dev/null
		fi
	fi
	if [ -n "$m" ]; then grep -lzxF -e "$m" /proc/[0-9]*/environ 2>/dev/null; fi
}
pids() { members | sed -n 's,^/proc/\([0-9][0-9]*\)/.*,\1,p' | sort -un; }
`

// signalScript sends one signal to a running call's tree: sh -c
// signalScript wsbroker MODE PGID MARKER SIG, MODE and PGID as for
// killScript, SIG a number (`kill -s` takes no number portably, `kill -N`
// does). The tree is what killScript finds (the group, or the process,
// and every process whose environment holds MARKER) and every descendant
// of those by parent pid, from one read of /proc/PID/stat: a child that
// both left the group and cleared its environment (env -i setsid) is
// still its parent's child while the command runs. The group gets SIG
// with one kill (which also reaches a member forked since the scan), every
// other process with one kill of its own: each process once. It prints
// "@wsbroker signalled N", N the processes found, and exits 0: a signal
// that cannot be delivered is dropped.
const signalScript = `mode=$1 pg=$2 m=$3 sig=$4
` + findScript + `tree=" "
for p in $(pids); do tree="$tree$p "; done
# pid ppid pgid of every live process, parents mostly before children.
tab=$(sed -n 's,^\([0-9][0-9]*\) (.*) [^ZX] \([0-9][0-9]*\) \([0-9][0-9]*\) .*,\1 \2 \3,p' /proc/[0-9]*/stat 2>/dev/null | sort -n)
more=1
while [ -n "$more" ]; do
	more=
	while read -r p pp g; do
		case $tree in *" $p "*) continue ;; esac
		case $tree in *" $pp "*) tree="$tree$p " more=1 ;; esac
	done <<EOF
$tab
EOF
done
grouped() { [ "$pg" -gt 1 ] && { [ "$p" = "$pg" ] || { [ "$mode" = group ] && [ "$g" = "$pg" ]; }; }; }
if [ "$pg" -gt 1 ]; then
	if [ "$mode" = group ]; then kill -"$sig" "-$pg" 2>/dev/null; else kill -"$sig" "$pg" 2>/dev/null; fi
fi
n=0
while read -r p pp g; do
	case $tree in *" $p "*) ;; *) continue ;; esac
	n=$((n+1))
	if ! grouped; then kill -"$sig" "$p" 2>/dev/null; fi
done <<EOF
$tab
EOF
echo "@wsbroker signalled $n"
exit 0
`

// noForkKillScript sweeps after killScript, and kills when killScript
// cannot run because no process may fork: a fork bomb has filled a pids
// limit (a container's pids cgroup, an account's RLIMIT_NPROC, the
// system's pid_max). It uses bash builtins only: it stops the call's process
// group and every process carrying the call's marker, round after round
// until no new one appears (a stopped process cannot fork), then kills
// them all. The command that runs it must itself get to start (a docker
// exec does: joining a cgroup is not limited by pids.max).
//
//	bash -c noForkKillScript wsbroker MODE PGID MARKER
const noForkKillScript = noForkKillBody

const noForkKillBody = `mode=$1 pg=$2 m=$3 n=0
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

// KillHelperScript is a kill that is already running: a bash loop, started
// while processes can still fork (e.g. one session per SSH connection),
// that reads "MODE PGID MARKER" lines on stdin and answers each with
// "@wsbroker killed N" on stdout, killing as noForkKillScript does. Where
// a fork bomb at the account's process limit keeps every new session from
// starting, this one kills it. Run it as `bash -c KillHelperScript`.
const KillHelperScript = `wsb_kill() {
` + noForkKillBody + `}
echo '@wsbroker ready'
while IFS=' ' read -r mode pg m; do wsb_kill "$mode" "$pg" "$m"; done
`

// NoForkKillArgs recognises the builtin-only kill a Runner gives its
// RunFunc after the kill script, and returns its MODE, PGID and
// MARKER, so a transport can hand them to a KillHelperScript instead.
func NoForkKillArgs(argv []string) (mode, pgid, marker string, ok bool) {
	if len(argv) != 7 || argv[0] != "bash" || argv[1] != "-c" || argv[2] != noForkKillScript || argv[3] != "wsbroker" {
		return "", "", "", false
	}
	return argv[4], argv[5], argv[6], true
}
