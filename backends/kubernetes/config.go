package kubernetes

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/wsbroker/wsbroker/backends/warmpool"
	"github.com/wsbroker/wsbroker/internal/bytesize"
	"github.com/wsbroker/wsbroker/internal/execconf"
	"github.com/wsbroker/wsbroker/remote"
)

// ByteSize is a size in bytes that YAML and JSON may give as "2GiB".
type ByteSize = bytesize.Size

// Config configures the kubernetes backend. Zero fields take the defaults
// of NewConfig when the backend is built.
type Config struct {
	// Identity names the broker (or the replicas that share workspaces);
	// every pod carries it and the backend touches only pods that do.
	// Required; the broker sets it from its identity setting.
	Identity string `json:"-" yaml:"-"`
	// Kubeconfig is the path of a kubeconfig file; empty uses the
	// in-cluster configuration of a broker running in a pod.
	Kubeconfig string `json:"kubeconfig" yaml:"kubeconfig"`
	// Namespace holds the workspaces' pods. It must exist. Default
	// "default".
	Namespace string `json:"namespace" yaml:"namespace"`
	// ImagePullPolicy is the pods' pull policy: "IfNotPresent" (default),
	// "Never" or "Always".
	ImagePullPolicy string `json:"imagePullPolicy" yaml:"imagePullPolicy"`
	// Box holds defaultImage, allowedImages, user, memory, cpus, disk and
	// tmpfsSize (see remote.Box). Here User must be a numeric "uid:gid"
	// other than root (runAsNonRoot), Disk is the workspace volume's
	// emptyDir sizeLimit (the kubelet evicts a pod that writes past it;
	// default 1 GiB), and /tmp is a memory-backed emptyDir.
	remote.Box `yaml:",inline"`
	// RuntimeClassName runs the pods under another runtime (gVisor,
	// Kata); empty is the cluster's default.
	RuntimeClassName string `json:"runtimeClassName" yaml:"runtimeClassName"`
	// NodeSelector places the pods.
	NodeSelector map[string]string `json:"nodeSelector" yaml:"nodeSelector"`
	// Network "none" (default) puts the pods under a NetworkPolicy that
	// denies all ingress and egress; "cluster" leaves them on the
	// cluster's network as any pod.
	Network string `json:"network" yaml:"network"`
	// WorkspaceDir is where the workspace volume is mounted. Default
	// "/workspace".
	WorkspaceDir string `json:"workspaceDir" yaml:"workspaceDir"`
	// AgentBinary is the static agent (cmd/wsb-agent) copied into
	// each pod. Empty: beside the broker's executable, then on PATH.
	AgentBinary string `json:"agentBinary" yaml:"agentBinary"`
	// StartTimeout bounds a create: the pod scheduled and running, the
	// agent copied and started. Default 2 minutes.
	StartTimeout time.Duration `json:"startTimeout" yaml:"startTimeout"`
	// Pools keep pods made ahead, each running with its agent connected,
	// for creates whose options come to the same settings: such a create
	// takes one (a claim and a patch, milliseconds) and the pool makes
	// another in the background. Each replica keeps its own members and
	// removes them when it stops; a replica that dies leaves them to the
	// others, which remove them within about two minutes. Default none.
	Pools []PoolConfig `json:"pools" yaml:"pools"`
	// Exec holds killGrace, drainIdle, maxDrain, shell and rgPath, all
	// in the pod; see package execconf.
	execconf.Exec `yaml:",inline"`
}

// Defaults.
const (
	DefaultNamespace    = "default"
	DefaultImage        = remote.DefaultImage // the box defaults are remote.NewBox's
	DefaultDisk         = ByteSize(1 << 30)
	DefaultWorkspaceDir = "/workspace"
	DefaultStartTimeout = 2 * time.Minute
	NetworkNone         = "none"
	NetworkCluster      = "cluster"
)

// NewConfig returns the default configuration (without Identity).
func NewConfig() Config {
	box := remote.NewBox()
	box.Disk = DefaultDisk
	return Config{Namespace: DefaultNamespace, Box: box, ImagePullPolicy: "IfNotPresent", Network: NetworkNone, WorkspaceDir: DefaultWorkspaceDir, StartTimeout: DefaultStartTimeout,
		Exec: execconf.New()}
}

// withDefaults fills c's zero fields from NewConfig.
func (c Config) withDefaults() Config {
	d := NewConfig()
	c.Namespace, c.Box = cmp.Or(c.Namespace, d.Namespace), c.Box.WithDefaults(d.Box)
	c.ImagePullPolicy, c.Network = cmp.Or(c.ImagePullPolicy, d.ImagePullPolicy), cmp.Or(c.Network, d.Network)
	c.WorkspaceDir, c.StartTimeout = cmp.Or(c.WorkspaceDir, d.WorkspaceDir), cmp.Or(c.StartTimeout, d.StartTimeout)
	c.Exec = c.Exec.WithDefaults()
	return c
}

// dnsLabel is a Kubernetes name: a namespace, or a label value's form.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// validIdentity is a label value.
var validIdentity = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$`)

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if !validIdentity.MatchString(c.Identity) {
		add("identity %q is not a label value", c.Identity)
	}
	if !dnsLabel.MatchString(c.Namespace) {
		add("namespace %q is not a namespace name", c.Namespace)
	}
	errs = append(errs, c.ImageProblems()...)
	switch c.ImagePullPolicy {
	case "IfNotPresent", "Never", "Always":
	default:
		add("imagePullPolicy %q must be IfNotPresent, Never or Always", c.ImagePullPolicy)
	}
	if uid, _, ok := numericUser(c.User); !ok || uid == 0 {
		add("user %q must be a numeric uid:gid other than root (pods run as non-root)", c.User)
	}
	if c.Memory < 16<<20 {
		add("memory must be at least 16 MiB, got %d bytes", c.Memory)
	}
	if c.CPUs <= 0 {
		add("cpus must be positive, got %v", c.CPUs)
	}
	if c.Disk < 8<<20 {
		add("disk must be at least 8 MiB, got %d bytes", c.Disk)
	}
	if c.TmpfsSize <= 0 || c.TmpfsSize >= c.Memory {
		add("tmpfsSize must be positive and below memory, got %d bytes", c.TmpfsSize)
	}
	if c.Network != NetworkNone && c.Network != NetworkCluster {
		add("network %q must be %q or %q", c.Network, NetworkNone, NetworkCluster)
	}
	if !path.IsAbs(c.WorkspaceDir) || path.Clean(c.WorkspaceDir) != c.WorkspaceDir || c.WorkspaceDir == "/" ||
		strings.HasPrefix(c.WorkspaceDir, "/proc") || strings.HasPrefix(c.WorkspaceDir, agentDir) {
		add("workspaceDir %q must be a clean absolute path other than /, /proc and %s", c.WorkspaceDir, agentDir)
	}
	if c.AgentBinary != "" && !path.IsAbs(c.AgentBinary) {
		add("agentBinary %q is not an absolute path", c.AgentBinary)
	}
	if c.StartTimeout < time.Second {
		add("startTimeout must be at least 1s, got %v", c.StartTimeout)
	}
	pools := make([]warmpool.Spec, len(c.Pools))
	for i, p := range c.Pools {
		pools[i] = p.Spec
	}
	errs = append(errs, warmpool.Check(pools, validIdentity.MatchString)...)
	errs = append(errs, c.Exec.Problems()...)
	return errors.Join(errs...)
}

// numericUser parses "uid:gid" (or "uid", gid the same).
func numericUser(user string) (uid, gid int64, ok bool) {
	u, g, found := strings.Cut(user, ":")
	if !found {
		g = u
	}
	var err1, err2 error
	_, err1 = fmt.Sscan(u, &uid)
	_, err2 = fmt.Sscan(g, &gid)
	return uid, gid, err1 == nil && err2 == nil && uid >= 0 && gid >= 0
}
