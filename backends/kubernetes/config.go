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
	// DefaultImage is the image of a workspace whose create request names
	// none; AllowedImages are path.Match patterns a request may name.
	DefaultImage  string   `json:"defaultImage" yaml:"defaultImage"`
	AllowedImages []string `json:"allowedImages" yaml:"allowedImages"`
	// ImagePullPolicy is the pods' pull policy: "IfNotPresent" (default),
	// "Never" or "Always".
	ImagePullPolicy string `json:"imagePullPolicy" yaml:"imagePullPolicy"`
	// User is the numeric "uid:gid" every process of the pod runs as
	// (runAsNonRoot: uid 0 is refused). Default "1000:1000".
	User string `json:"user" yaml:"user"`
	// Memory and CPUs are the container's limits; a request may ask for
	// less. Defaults 2 GiB and 1.
	Memory ByteSize `json:"memory" yaml:"memory"`
	CPUs   float64  `json:"cpus" yaml:"cpus"`
	// Disk bounds the workspace volume (an emptyDir's sizeLimit: the
	// kubelet evicts a pod that writes past it). Default 1 GiB.
	Disk ByteSize `json:"disk" yaml:"disk"`
	// TmpfsSize bounds /tmp, a memory-backed emptyDir counted against
	// Memory. Default 256 MiB.
	TmpfsSize ByteSize `json:"tmpfsSize" yaml:"tmpfsSize"`
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
	DefaultImage        = "wsbroker/workspace:current" // images/workspace, as docker's
	DefaultUser         = "1000:1000"
	DefaultMemory       = ByteSize(2 << 30)
	DefaultCPUs         = 1.0
	DefaultDisk         = ByteSize(1 << 30)
	DefaultTmpfsSize    = ByteSize(256 << 20)
	DefaultWorkspaceDir = "/workspace"
	DefaultStartTimeout = 2 * time.Minute
	NetworkNone         = "none"
	NetworkCluster      = "cluster"
)

// NewConfig returns the default configuration (without Identity).
func NewConfig() Config {
	return Config{Namespace: DefaultNamespace, DefaultImage: DefaultImage, ImagePullPolicy: "IfNotPresent",
		User: DefaultUser, Memory: DefaultMemory, CPUs: DefaultCPUs, Disk: DefaultDisk, TmpfsSize: DefaultTmpfsSize,
		Network: NetworkNone, WorkspaceDir: DefaultWorkspaceDir, StartTimeout: DefaultStartTimeout,
		Exec: execconf.New()}
}

// withDefaults fills c's zero fields from NewConfig.
func (c Config) withDefaults() Config {
	d := NewConfig()
	c.Namespace, c.DefaultImage = cmp.Or(c.Namespace, d.Namespace), cmp.Or(c.DefaultImage, d.DefaultImage)
	c.ImagePullPolicy, c.User = cmp.Or(c.ImagePullPolicy, d.ImagePullPolicy), cmp.Or(c.User, d.User)
	c.Network, c.WorkspaceDir = cmp.Or(c.Network, d.Network), cmp.Or(c.WorkspaceDir, d.WorkspaceDir)
	c.Memory, c.CPUs, c.Disk = cmp.Or(c.Memory, d.Memory), cmp.Or(c.CPUs, d.CPUs), cmp.Or(c.Disk, d.Disk)
	c.TmpfsSize, c.StartTimeout = cmp.Or(c.TmpfsSize, d.TmpfsSize), cmp.Or(c.StartTimeout, d.StartTimeout)
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
	if c.DefaultImage == "" {
		add("defaultImage is required")
	}
	errs = append(errs, remote.ImagePatternProblems(c.AllowedImages)...)
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
		pools[i] = warmpool.Spec{Name: p.Name, Size: p.Size}
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
