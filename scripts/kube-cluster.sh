#!/usr/bin/env bash
# A real single-node Kubernetes cluster for tests, on a machine that can pull
# no image and download no binary: everything is built from source through the
# Go module proxy or installed from Debian's packages. See
# docs/kubernetes-cluster.md for what it builds, how long it takes and the traps.
#
#   scripts/kube-cluster.sh build                  # build (or reuse) the binaries; prints their folder
#   scripts/kube-cluster.sh up DIR                 # start a cluster whose state lives in DIR
#   scripts/kube-cluster.sh env DIR                # KUBECONFIG=DIR/kubeconfig, WSBROKER_KUBE_BIN=<kubectl's folder>
#   scripts/kube-cluster.sh import-docker-image DIR IMAGE   # docker engine image -> the cluster's containerd
#   scripts/kube-cluster.sh down DIR               # stop all it started, pods included; unmount
#
# Needs root (containerd, kubelet, mounts). Everything listens on 127.0.0.1
# only, and nothing touches the docker engine's containerd.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
export PATH="/usr/local/go/bin:$HOME/go/bin:/usr/sbin:/sbin:$PATH"

log() { printf 'kube-cluster: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Seconds since the epoch with milliseconds, for the timings it prints.
now() { date +%s.%N | cut -c1-14; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f s", b - a }'; }

cache_root="${WSBROKER_CACHE:-/var/cache/wsbroker}"

# --- build recipe: everything from here to the end marker is hashed into the
# cache key, with the helpers' sources, so editing how binaries are built gives
# a new cache folder while editing `up` or `down` reuses the old one.

# Pinned, not "newest": 1.37 because kubelet 1.38 drops its fallback for
# containerd 1.6 (Debian bookworm's). Bump all three together; the staging
# modules (k8s.io/api, client-go, ...) carry the same patch as v0.37.Z.
K8S_VERSION=v1.37.2
STAGING_VERSION=v0.37.2
# etcd 3.6 as the upstream 1.37 release pairs it with (Debian's etcd-server 3.4
# runs but floods its log with watch-progress errors).
ETCD_VERSION=v3.6.17
PAUSE_IMAGE=localhost/wsbroker/pause:1
K8S_COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

# Debian packages the cluster runs on: its container runtime and runc, the CNI
# plugins (bridge, host-local, loopback), openssl for the certificates, and the
# mount/iptables tools the kubelet and the bridge plugin call.
DEBIAN_PACKAGES=(containerd runc containernetworking-plugins openssl iptables mount util-linux)

ensure_packages() {
	local missing=() p
	for p in "${DEBIAN_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ "${#missing[@]}" -eq 0 ] && return 0
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# build_into DIR builds every binary into DIR/bin and the pause image into
# DIR/images. Slow (minutes): callers build into a scratch folder and rename.
build_into() {
	local out="$1" src="$1/src" gomod
	mkdir -p "$out/bin" "$out/images" "$src/k8s" "$src/etcd"
	# CGO off: static binaries that run in any container, and no C toolchain.
	export CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false"

	# Kubernetes: k8s.io/kubernetes requires its staging modules at v0.0.0
	# and replaces them with ./staging/... folders, which a dependent module
	# does not see. A scratch module replaces each with its published v0.37.Z.
	# Its go and godebug lines are copied too: they set runtime behaviour.
	log "kubernetes $K8S_VERSION: reading its go.mod"
	gomod="$(cd "$src/k8s" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
	[ -f "$gomod" ] || die "no go.mod for k8s.io/kubernetes@$K8S_VERSION"
	{
		echo "module wsbroker.local/kube-build"
		grep -E '^(go|godebug) ' "$gomod"
		echo "require k8s.io/kubernetes $K8S_VERSION"
		grep -oE '^[[:space:]]*k8s\.io/[a-z0-9-]+ => \./staging/' "$gomod" | awk '{ print $1 }' | sort -u |
			while read -r m; do echo "replace $m => $m $STAGING_VERSION"; done
	} >"$src/k8s/go.mod"
	grep -q '^replace k8s.io/client-go ' "$src/k8s/go.mod" || die "found no staging modules in $gomod"
	# Without the version stamps kubectl, the node object and skew checks
	# would all say v0.0.0-master.
	local minor="${K8S_VERSION#v1.}"
	minor="${minor%%.*}"
	local ldflags="-s -w"
	local pkg
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
		ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
	done
	local pkgs=() c
	for c in "${K8S_COMMANDS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
	log "kubernetes $K8S_VERSION: building ${K8S_COMMANDS[*]} (minutes on a cold Go build cache)"
	(cd "$src/k8s" && go build -trimpath -ldflags "$ldflags" -o "$out/bin/" "${pkgs[@]}")

	# etcd: the server module has no main package of its own (the etcd
	# repository's root module does, with many more dependencies), so a
	# two-line main calls etcdmain.Main as that root main does.
	log "etcd $ETCD_VERSION: building"
	cat >"$src/etcd/main.go" <<-'EOF'
		package main

		import (
			"os"

			"go.etcd.io/etcd/server/v3/etcdmain"
		)

		func main() { etcdmain.Main(os.Args) }
	EOF
	printf 'module wsbroker.local/etcd-build\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >"$src/etcd/go.mod"
	(cd "$src/etcd" && go mod tidy >&2 && go build -trimpath -ldflags "-s -w" -o "$out/bin/etcd" .)

	# The pause image: no registry to pull it from, so a static pause program
	# packed into an OCI archive that `ctr images import` takes.
	log "pause image $PAUSE_IMAGE"
	(cd "$here/kube" && go build -trimpath -ldflags "-s -w" -o "$src/pause" ./pause &&
		go run ./ocitar -name "$PAUSE_IMAGE" -bin "$src/pause" -path /pause -o "$out/images/pause.tar" >/dev/null)

	# The sources are in the module cache; only the binaries are worth keeping.
	rm -rf "$src"
}
# --- build recipe end

# recipe_hash prints the cache key: the build recipe above and the helpers'
# sources. Go's own version is in it too: a new toolchain rebuilds.
recipe_hash() {
	{
		sed -n '/^# --- build recipe:/,/^# --- build recipe end/p' "$here/kube-cluster.sh"
		# Not execbench: it measures the cluster, it builds nothing of it.
		(cd "$here/kube" && find ./go.mod ./pause ./ocitar -type f | LC_ALL=C sort | xargs sha256sum)
		go env GOVERSION
	} | sha256sum | cut -c1-12
}

# cache_dir prints the folder the current recipe builds into.
cache_dir() { echo "$cache_root/kube-$(recipe_hash)"; }

cmd_build() {
	[ "$(id -u)" = 0 ] || die "needs root (apt-get, and the cluster runs as root)"
	ensure_packages
	local dir t0
	dir="$(cache_dir)"
	if [ -f "$dir/complete" ]; then
		log "cached $dir"
		echo "$dir"
		return 0
	fi
	mkdir -p "$cache_root"
	# One build at a time on a machine: a second caller waits, then finds it.
	exec 8>"$cache_root/kube-build.lock"
	flock 8
	if [ ! -f "$dir/complete" ]; then
		t0="$(now)"
		rm -rf "$dir.tmp"
		build_into "$dir.tmp"
		touch "$dir.tmp/complete"
		rm -rf "$dir"
		mv "$dir.tmp" "$dir"
		log "built $dir in $(since "$t0")"
	fi
	echo "$dir"
}

# ---------------------------------------------------------------------------
# The running cluster. Its whole state lives in DIR: certificates, configs,
# etcd's data, containerd's root and state, the kubelet's root, pod logs,
# component logs (DIR/logs) and their pids (DIR/run). Fixed loopback ports, so
# one cluster per machine at a time; `up` refuses when a port is taken.

ETCD_PORT=2379
ETCD_PEER_PORT=2380
API_PORT=6443
KUBELET_PORT=10250
KUBELET_HEALTHZ_PORT=10248
CM_PORT=10257
SCHEDULER_PORT=10259
# The pods' bridge. No gateway address on the host and no default route in the
# pods: tests reach pods through the API (exec, port-forward), never by their
# addresses, and pods reach nothing but each other.
BRIDGE=wsbkube0
POD_SUBNET=10.244.0.0/24
SERVICE_RANGE=10.96.0.0/16
# Pods' cgroups go under this parent (the kubelet's cgroupRoot), so what is
# left of a cluster is found and removed by name.
CGROUP_ROOT=/wsbroker-kube

# abs DIR prints DIR as an absolute path (it need not exist yet).
abs() { mkdir -p "$1" && (cd "$1" && pwd); }

# bin_dir prints the cached binaries' folder, failing when not built.
bin_dir() {
	local dir
	dir="$(cache_dir)"
	[ -f "$dir/complete" ] || die "not built: run $0 build first"
	echo "$dir/bin"
}

kubectl_() { "$BIN/kubectl" --kubeconfig "$DIR/kubeconfig" "$@"; }
ctr_() { ctr --address "$DIR/containerd/containerd.sock" -n k8s.io "$@"; }

# start NAME CMD... runs CMD in the background in a session of its own, its
# output in DIR/logs/NAME.log and its pid in DIR/run/NAME.pid.
start() {
	local name="$1"
	shift
	setsid "$@" >"$DIR/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$DIR/run/$name.pid"
}

# wait_for SECONDS WHAT CMD... retries CMD every 0.1 s until it succeeds,
# failing at once when a component it started has exited.
wait_for() {
	local limit="$1" what="$2" t0 f name
	shift 2
	t0="$(now)"
	until "$@" >/dev/null 2>&1; do
		for f in "$DIR"/run/*.pid; do
			name="$(basename "$f" .pid)"
			if ! running "$name" "$(cat "$f")"; then
				log "$name exited while waiting for $what; see $DIR/logs/$name.log"
				return 1
			fi
		done
		if awk -v a="$t0" -v b="$(now)" -v l="$limit" 'BEGIN { exit !(b - a > l) }'; then
			log "timed out after ${limit}s waiting for $what; logs in $DIR/logs"
			return 1
		fi
		sleep 0.1
	done
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# --- certificates: one CA signs every serving and client certificate; ECDSA
# P-256 keys because they are generated in milliseconds.

# cert NAME CN [O] [SANS] [USAGE] writes pki/NAME.{key,crt}.
cert() {
	local name="$1" cn="$2" org="${3:-}" sans="${4:-}" usage="${5:-clientAuth}" subj ext
	subj="/CN=$cn"
	[ -n "$org" ] && subj="/O=$org$subj"
	ext="$DIR/pki/$name.ext"
	{
		echo "basicConstraints=critical,CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$usage"
		[ -n "$sans" ] && echo "subjectAltName=$sans"
	} >"$ext"
	openssl ecparam -name prime256v1 -genkey -noout -out "$DIR/pki/$name.key" 2>/dev/null
	openssl req -new -key "$DIR/pki/$name.key" -subj "$subj" 2>/dev/null |
		openssl x509 -req -CA "$DIR/pki/ca.crt" -CAkey "$DIR/pki/ca.key" -CAcreateserial \
			-days 3650 -extfile "$ext" -out "$DIR/pki/$name.crt" 2>/dev/null
	rm -f "$ext"
}

make_pki() {
	[ -f "$DIR/pki/done" ] && return 0
	mkdir -p "$DIR/pki"
	openssl ecparam -name prime256v1 -genkey -noout -out "$DIR/pki/ca.key" 2>/dev/null
	openssl req -x509 -new -key "$DIR/pki/ca.key" -subj /CN=wsbroker-kube-ca -days 3650 \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
		-out "$DIR/pki/ca.crt" 2>/dev/null
	cert apiserver kube-apiserver "" \
		"DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1" \
		serverAuth
	# The API server's client certificate towards kubelets (exec, logs).
	cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
	cert kubelet localhost "" "DNS:localhost,IP:127.0.0.1" serverAuth
	cert kubelet-client system:node:localhost system:nodes
	cert controller-manager system:kube-controller-manager
	cert scheduler system:kube-scheduler
	cert admin wsbroker-admin system:masters
	# The service-account token signing pair.
	openssl ecparam -name prime256v1 -genkey -noout -out "$DIR/pki/sa.key" 2>/dev/null
	openssl ec -in "$DIR/pki/sa.key" -pubout -out "$DIR/pki/sa.pub" 2>/dev/null
	touch "$DIR/pki/done"
}

# kubeconfig NAME CERT writes DIR/NAME.kubeconfig with that client certificate
# (certificates embedded, so the file can be copied elsewhere).
kubeconfig() {
	local file="$DIR/$1" crt="$DIR/pki/$2.crt" key="$DIR/pki/$2.key"
	cat >"$file" <<-KC
		apiVersion: v1
		kind: Config
		clusters:
		- name: wsbroker-kube
		  cluster:
		    server: https://127.0.0.1:$API_PORT
		    certificate-authority-data: $(base64 -w0 "$DIR/pki/ca.crt")
		users:
		- name: $2
		  user:
		    client-certificate-data: $(base64 -w0 "$crt")
		    client-key-data: $(base64 -w0 "$key")
		contexts:
		- name: wsbroker-kube
		  context: {cluster: wsbroker-kube, user: $2, namespace: default}
		current-context: wsbroker-kube
	KC
	chmod 600 "$file"
}

write_configs() {
	mkdir -p "$DIR/containerd" "$DIR/cni/net.d" "$DIR/cni/ipam" "$DIR/kubelet" "$DIR/pod-logs"
	kubeconfig kubeconfig admin
	kubeconfig controller-manager.kubeconfig controller-manager
	kubeconfig scheduler.kubeconfig scheduler
	kubeconfig kubelet.kubeconfig kubelet-client

	# containerd 1.6 (Debian's), an instance of its own: every path under DIR.
	# The runc root too, so its containers never mix with the docker engine's.
	cat >"$DIR/containerd/config.toml" <<-TOML
		version = 2
		root = "$DIR/containerd/root"
		state = "$DIR/containerd/state"
		# Its /opt plugin would write to /opt/containerd; nothing here needs it.
		disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

		[grpc]
		  address = "$DIR/containerd/containerd.sock"
		[ttrpc]
		  address = "$DIR/containerd/containerd.sock.ttrpc"
		[debug]
		  address = ""
		[metrics]
		  address = ""

		[plugins."io.containerd.grpc.v1.cri"]
		  sandbox_image = "$PAUSE_IMAGE"
		  # Without it every pod fails: root here cannot lower the pause
		  # container's OOM score below its own (-998 asked, as kubelet does).
		  restrict_oom_score_adj = true
		  # exec/attach/port-forward streams: loopback only, any free port.
		  stream_server_address = "127.0.0.1"
		  stream_server_port = "0"
		  enable_selinux = false
		  # Pods' network namespaces under DIR too, not in /var/run/netns.
		  netns_mounts_under_state_dir = true
		  [plugins."io.containerd.grpc.v1.cri".containerd]
		    snapshotter = "overlayfs"
		    default_runtime_name = "runc"
		    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
		        SystemdCgroup = false
		        Root = "$DIR/runc"
		  [plugins."io.containerd.grpc.v1.cri".cni]
		    bin_dir = "/usr/lib/cni"
		    conf_dir = "$DIR/cni/net.d"
	TOML

	# A bridge with host-local addresses, no gateway on the host and no
	# route out (no "routes", isGateway false, no masquerade). Without any
	# CNI config the node would stay NotReady.
	cat >"$DIR/cni/net.d/10-wsbroker.conflist" <<-JSON
		{
		  "cniVersion": "0.4.0",
		  "name": "wsbroker-kube",
		  "plugins": [
		    {
		      "type": "bridge",
		      "bridge": "$BRIDGE",
		      "isGateway": false,
		      "ipMasq": false,
		      "hairpinMode": true,
		      "ipam": {
		        "type": "host-local",
		        "dataDir": "$DIR/cni/ipam",
		        "ranges": [[{"subnet": "$POD_SUBNET"}]]
		      }
		    }
		  ]
		}
	JSON

	# The kubelet: cgroup v1 allowed (failCgroupV1, these hosts are v1),
	# cgroupfs as containerd uses, swap not fatal, everything on loopback,
	# webhook authn/authz against the API server, and image GC and disk
	# eviction off: imported images (imagePullPolicy Never) must stay, and a
	# full test disk must not evict the pods under test.
	cat >"$DIR/kubelet/config.yaml" <<-YAML
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		address: 127.0.0.1
		port: $KUBELET_PORT
		readOnlyPort: 0
		healthzBindAddress: 127.0.0.1
		healthzPort: $KUBELET_HEALTHZ_PORT
		authentication:
		  anonymous: {enabled: false}
		  webhook: {enabled: true}
		  x509: {clientCAFile: $DIR/pki/ca.crt}
		authorization: {mode: Webhook}
		tlsCertFile: $DIR/pki/kubelet.crt
		tlsPrivateKeyFile: $DIR/pki/kubelet.key
		containerRuntimeEndpoint: unix://$DIR/containerd/containerd.sock
		cgroupDriver: cgroupfs
		cgroupRoot: $CGROUP_ROOT
		failCgroupV1: false
		failSwapOn: false
		podLogsDir: $DIR/pod-logs
		clusterDomain: cluster.local
		resolvConf: /etc/resolv.conf
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		evictionHard: {memory.available: "100Mi", nodefs.available: "0%", imagefs.available: "0%", nodefs.inodesFree: "0%", imagefs.inodesFree: "0%"}
		serializeImagePulls: false
		maxPods: 250
		rotateCertificates: false
		serverTLSBootstrap: false
	YAML
}

# make_cgroup_root creates the kubelet's cgroupRoot in every cgroup v1
# hierarchy: the kubelet refuses a root that does not exist. A new cpuset
# cgroup starts with no CPUs and no memory nodes; it gets its parent's.
make_cgroup_root() {
	local h
	for h in /sys/fs/cgroup/*/; do
		[ -f "$h/cgroup.procs" ] || continue
		mkdir -p "$h${CGROUP_ROOT#/}"
	done
	if [ -f /sys/fs/cgroup/cpuset/cpuset.cpus ]; then
		cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset$CGROUP_ROOT/cpuset.cpus"
		cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset$CGROUP_ROOT/cpuset.mems"
	fi
}

up_failed() {
	[ "$1" = 0 ] && return 0
	log "up failed; the last lines of each log follow; run: $0 down $DIR"
	tail -n 5 "$DIR"/logs/*.log >&2 || true
}

cmd_up() {
	[ $# -eq 1 ] || usage
	[ "$(id -u)" = 0 ] || die "needs root"
	DIR="$(abs "$1")"
	BIN="$(bin_dir)"
	local cache t0 p
	cache="$(dirname "$BIN")"
	t0="$(now)"
	[ -e "$DIR/run/up" ] && die "$DIR holds a cluster already (run $0 down $DIR)"
	for p in $ETCD_PORT $ETCD_PEER_PORT $API_PORT $KUBELET_PORT $KUBELET_HEALTHZ_PORT $CM_PORT $SCHEDULER_PORT; do
		port_free "$p" || die "127.0.0.1:$p is taken (another cluster up?)"
	done
	mkdir -p "$DIR/logs" "$DIR/run"
	touch "$DIR/run/up"
	# A failed start leaves what it started for the logs to be read; say
	# what the components said last, and that down still has to run.
	trap 'up_failed $?' EXIT
	make_pki
	write_configs
	log "certificates and configs: $(since "$t0")"

	# containerd first, and the pause image in it before the kubelet asks
	# for any sandbox (the CRI plugin would otherwise try to pull it).
	start containerd containerd --config "$DIR/containerd/config.toml"
	start etcd "$BIN/etcd" --name default --data-dir "$DIR/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "default=http://127.0.0.1:$ETCD_PEER_PORT" \
		--unsafe-no-fsync --log-level warn
	start kube-apiserver "$BIN/kube-apiserver" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
		--etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--client-ca-file "$DIR/pki/ca.crt" \
		--tls-cert-file "$DIR/pki/apiserver.crt" --tls-private-key-file "$DIR/pki/apiserver.key" \
		--service-account-issuer https://kubernetes.default.svc \
		--service-account-key-file "$DIR/pki/sa.pub" --service-account-signing-key-file "$DIR/pki/sa.key" \
		--service-cluster-ip-range "$SERVICE_RANGE" \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
		--kubelet-client-certificate "$DIR/pki/apiserver-kubelet-client.crt" \
		--kubelet-client-key "$DIR/pki/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority "$DIR/pki/ca.crt" \
		--kubelet-preferred-address-types Hostname \
		--endpoint-reconciler-type none \
		--allow-privileged=true --profiling=false
	wait_for 30 containerd ctr_ version
	ctr_ images import "$cache/images/pause.tar" >/dev/null
	log "containerd up, pause image imported: $(since "$t0")"

	wait_for 60 "the API server" kubectl_ get --raw /readyz
	log "API server ready: $(since "$t0")"
	start kube-controller-manager "$BIN/kube-controller-manager" \
		--kubeconfig "$DIR/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$DIR/controller-manager.kubeconfig" \
		--authorization-kubeconfig "$DIR/controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port "$CM_PORT" --leader-elect=false \
		--service-account-private-key-file "$DIR/pki/sa.key" --root-ca-file "$DIR/pki/ca.crt" \
		--cluster-signing-cert-file "$DIR/pki/ca.crt" --cluster-signing-key-file "$DIR/pki/ca.key" \
		--use-service-account-credentials --service-cluster-ip-range "$SERVICE_RANGE"
	start kube-scheduler "$BIN/kube-scheduler" \
		--kubeconfig "$DIR/scheduler.kubeconfig" \
		--authentication-kubeconfig "$DIR/scheduler.kubeconfig" \
		--authorization-kubeconfig "$DIR/scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" --leader-elect=false
	make_cgroup_root
	# The node is named localhost and the API server reaches it by that
	# name (--kubelet-preferred-address-types Hostname): a loopback node IP
	# is refused, and this keeps every hop on 127.0.0.1.
	start kubelet "$BIN/kubelet" --config "$DIR/kubelet/config.yaml" \
		--kubeconfig "$DIR/kubelet.kubeconfig" --root-dir "$DIR/kubelet" \
		--hostname-override localhost

	wait_for 60 "the node" kubectl_ get node localhost
	kubectl_ wait --for=condition=Ready node/localhost --timeout=120s >/dev/null ||
		die "node not Ready; logs in $DIR/logs"
	log "node Ready: $(since "$t0")"
	wait_for 60 "the default service account" kubectl_ get serviceaccount default
	trap - EXIT
	log "cluster up in $(since "$t0"); KUBECONFIG=$DIR/kubeconfig"
}

# running NAME PID: is PID alive and still the component NAME started? A
# zombie is not alive (the components are orphans once `up` exits, and the
# reaper that inherits them may take its time), and a pid reused by another
# program is not ours to signal.
running() {
	local state
	state="$(awk '{ print $3 }' "/proc/$2/stat" 2>/dev/null)" || return 1
	[ -n "$state" ] && [ "$state" != Z ] && tr '\0' ' ' 2>/dev/null <"/proc/$2/cmdline" | grep -qF -- "$1"
}

# stop NAME... sends SIGTERM to those components together and waits up to
# 10 s for all of them, then sends SIGKILL to what is left.
stop() {
	local name pid t0 left
	local -A pids=()
	t0="$(now)"
	for name in "$@"; do
		[ -f "$DIR/run/$name.pid" ] || continue
		pid="$(cat "$DIR/run/$name.pid")"
		if running "$name" "$pid"; then
			pids[$name]="$pid"
			kill -TERM "$pid" 2>/dev/null || true
		fi
	done
	for _ in $(seq 100); do
		left=0
		for name in "${!pids[@]}"; do running "$name" "${pids[$name]}" && left=1; done
		[ "$left" = 0 ] && break
		sleep 0.1
	done
	for name in "${!pids[@]}"; do
		if running "$name" "${pids[$name]}"; then
			kill -KILL "${pids[$name]}" 2>/dev/null || true
			log "$name killed: still running 10 s after SIGTERM"
		fi
	done
	for name in "$@"; do rm -f "$DIR/run/$name.pid"; done
	log "  stopped $* in $(since "$t0")"
}

# pids_matching TEXT prints the pids whose command line contains TEXT (the
# containerd shims of this cluster name its socket; nothing else does).
pids_matching() {
	local p
	for p in /proc/[0-9]*; do
		tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF -- "$1" && echo "${p#/proc/}"
	done
	return 0
}

cmd_down() {
	[ $# -eq 1 ] || usage
	[ "$(id -u)" = 0 ] || die "needs root"
	DIR="$(abs "$1")"
	local t0 id pid mnt
	t0="$(now)"
	BIN="$(cache_dir)/bin"
	[ -x "$BIN/kubectl" ] || BIN=""

	# Pods first, through the API, while the kubelet still runs: it stops
	# their containers and tears their sandboxes down (CNI DEL, netns).
	# Only when the kubelet and containerd live: otherwise nothing would
	# act on the deletion and it would just wait out its timeout.
	if [ -n "$BIN" ] && [ -f "$DIR/kubeconfig" ] &&
		running kubelet "$(cat "$DIR/run/kubelet.pid" 2>/dev/null)" &&
		running containerd "$(cat "$DIR/run/containerd.pid" 2>/dev/null)" &&
		kubectl_ get --raw /readyz >/dev/null 2>&1; then
		kubectl_ delete pods --all --all-namespaces --grace-period=1 --wait=true --timeout=30s >/dev/null 2>&1 ||
			log "pods not all deleted through the API; removing what is left directly"
		log "pods deleted: $(since "$t0")"
	fi
	# The kubelet and controllers first, so nothing recreates what goes;
	# etcd last, so the API server shuts down cleanly.
	stop kubelet kube-scheduler kube-controller-manager
	stop kube-apiserver
	stop etcd
	log "control plane and kubelet stopped: $(since "$t0")"

	# Whatever the kubelet left: tasks killed and containers deleted through
	# containerd itself (their network namespaces are mounts under DIR,
	# unmounted below).
	if [ -S "$DIR/containerd/containerd.sock" ] && ctr_ version >/dev/null 2>&1; then
		for id in $(ctr_ containers list -q 2>/dev/null); do
			ctr_ tasks kill -s KILL "$id" >/dev/null 2>&1 || true
		done
		sleep 0.2
		for id in $(ctr_ containers list -q 2>/dev/null); do
			ctr_ tasks delete -f "$id" >/dev/null 2>&1 || true
			ctr_ containers delete "$id" >/dev/null 2>&1 || true
		done
	fi
	stop containerd
	log "containerd stopped: $(since "$t0")"
	# Shims outlive containerd by design; ours name this cluster's socket.
	for pid in $(pids_matching " -address $DIR/containerd/containerd.sock"); do kill -KILL "$pid" 2>/dev/null || true; done
	# Anything still in a container of ours (runc root under DIR).
	if [ -d "$DIR/runc" ]; then
		for id in $(runc --root "$DIR/runc/k8s.io" list -q 2>/dev/null); do
			runc --root "$DIR/runc/k8s.io" kill "$id" KILL 2>/dev/null || true
			runc --root "$DIR/runc/k8s.io" delete -f "$id" 2>/dev/null || true
		done
	fi

	# Mounts under DIR (container rootfs, pod volumes, kubelet tmpfs), the
	# deepest first.
	findmnt -rn -o TARGET | grep -F "$DIR/" | sort -r | while read -r mnt; do
		umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
	done
	ip link delete "$BRIDGE" 2>/dev/null || true
	# Pods' cgroups (empty now) under the kubelet's cgroupRoot.
	find /sys/fs/cgroup/*"$CGROUP_ROOT" -depth -type d -exec rmdir {} + 2>/dev/null || true
	rm -f "$DIR/run/up"
	log "down in $(since "$t0")"
}

cmd_env() {
	[ $# -eq 1 ] || usage
	DIR="$(abs "$1")"
	[ -f "$DIR/kubeconfig" ] || die "no cluster in $DIR"
	echo "KUBECONFIG=$DIR/kubeconfig"
	# The folder of kubectl (and the rest) of the same build, for tests.
	echo "WSBROKER_KUBE_BIN=$(bin_dir)"
}

# import-docker-image DIR IMAGE copies an image of the local docker engine
# into the cluster's containerd, where pods use it with imagePullPolicy Never.
cmd_import_docker_image() {
	[ $# -eq 2 ] || usage
	DIR="$(abs "$1")"
	local t0
	t0="$(now)"
	docker save "$2" | ctr_ images import - >/dev/null
	log "imported $2 in $(since "$t0")"
}

usage() {
	sed -n '7,12p' "$0" >&2
	exit 2
}

main() {
	local cmd="${1:-}"
	[ $# -gt 0 ] && shift
	case "$cmd" in
	build) cmd_build "$@" ;;
	up) cmd_up "$@" ;;
	down) cmd_down "$@" ;;
	env) cmd_env "$@" ;;
	import-docker-image) cmd_import_docker_image "$@" ;;
	*) usage ;;
	esac
}

main "$@"
