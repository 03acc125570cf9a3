package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/wsbroker/wsbroker/backends/warmpool"
	"github.com/wsbroker/wsbroker/opsapi"
)

// Labels of the warm pool. A member carries LabelPool (its pool's name),
// LabelMember (its own name, which its volume keeps) and LabelPoolSpec
// (a hash of the settings it was made with) on its container and volume.
// Labels cannot change after a container is made, so a claim is kept
// as the engine's own facts: the container is renamed to the
// workspace's name, and a small volume of that name (the claim) carries
// the workspace's labels and LabelClaim, the member it took.
const (
	LabelPool     = "wsbroker.pool"
	LabelMember   = "wsbroker.pool-member"
	LabelPoolSpec = "wsbroker.pool-spec"
	LabelClaim    = "wsbroker.claim"
)

// memberPrefix starts a pool member's name. It cannot be the name of a
// workspace (namePrefix ends in '-', this in '.').
const memberPrefix = "wsbroker.pool."

// poolRetry is how long a pool waits after a member could not be made.
const poolRetry = 10 * time.Second

// pool is one configured warm pool.
type pool struct {
	cfg     PoolConfig
	spec    spec   // resolved; home is learnt from the image at each fill
	key     string // specKey of spec, on every member
	members *warmpool.Pool[*member]
}

// member is a ready container of a pool: running, its agent connected.
type member struct {
	name string
	w    *Workspace // named name, never in the backend's table
}

// pools is the backend's warm pools, and the goroutines that fill them.
type pools struct {
	list []*pool
	set  warmpool.Set[*member]
}

// specKey identifies the settings a container was made with, so that a
// member made under another configuration is never handed out.
func specKey(s spec) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%g\x00%d\x00%s", s.image, s.memory, s.cpus, s.pids, s.network))
	return hex.EncodeToString(sum[:8])
}

// setupPools resolves each configured pool as a create request's options
// would be and starts its filler. Without the agent a member would save
// little and its claim could not be proven, so pools need it.
func (b *Backend) setupPools() error {
	if len(b.cfg.Pools) == 0 {
		return nil
	}
	if !b.agent.on {
		b.logger.Warn("warm pools are off: they need the in-box agent", "why", b.agent.why)
		return nil
	}
	b.pools.set = warmpool.Set[*member]{Alive: func(m *member) bool { return m.w.AgentLive() }, Remove: b.removeMember,
		Name: func(m *member) string { return m.name }, Logger: b.logger}
	var errs []error
	for _, pc := range b.cfg.Pools {
		o := createOptions{Image: pc.Image, Network: pc.Network}
		if pc.Memory != 0 || pc.CPUs != 0 || pc.Pids != 0 {
			o.Limits = &createLimits{Memory: pc.Memory, CPUs: pc.CPUs, Pids: pc.Pids}
		}
		s, err := b.resolve(o)
		if err != nil {
			errs = append(errs, fmt.Errorf("pool %s: %w", pc.Name, err))
			continue
		}
		b.pools.list = append(b.pools.list, &pool{cfg: pc, spec: s, key: specKey(s), members: b.pools.set.Add(pc.Name, pc.Size)})
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, p := range b.pools.list {
		b.pools.set.Go(func(ctx context.Context) {
			// First the members an earlier run of the broker left.
			b.rediscoverMembers(ctx, p)
			p.members.Fill(ctx, func(ctx context.Context) (*member, error) { return b.makeMember(ctx, p) },
				b.removeMember, poolRetry, b.logger.With("pool", p.cfg.Name))
		})
	}
	return nil
}

// poolFor is the pool whose members have settings s, or nil.
func (b *Backend) poolFor(s spec) *pool {
	key := specKey(s)
	for _, p := range b.pools.list {
		if p.key == key && s.disk == 0 {
			return p
		}
	}
	return nil
}

// memberLabels are the labels of a new member of p called name.
func (b *Backend) memberLabels(p *pool, name, run string) map[string]string {
	labels := b.labels(opsapi.WorkspaceSpec{}, b.cfg.WorkspaceDir, time.Now().UTC(), LabelPool, p.cfg.Name, LabelMember, name, LabelPoolSpec, p.key)
	if run != "" {
		labels[LabelAgent] = run
	}
	return labels
}

// makeMember makes one container of p, starts it and its agent.
func (b *Backend) makeMember(ctx context.Context, p *pool) (*member, error) {
	const op = "docker.pool"
	name := memberPrefix + randomID()[:16]
	s := p.spec
	if err := b.inspectImage(ctx, op, name, &s); err != nil {
		return nil, err
	}
	if s.run = b.agentRunDir(name); s.run == "" {
		return nil, errors.New("no run directory for the member's agent")
	}
	cid, err := b.makeContainer(ctx, op, name, name, s, b.memberLabels(p, name, s.run), nil)
	if err != nil {
		return nil, err
	}
	return b.readyMember(ctx, name, cid, s.run)
}

// readyMember connects to the agent of the running member container cid,
// or removes the member.
func (b *Backend) readyMember(ctx context.Context, name, cid, run string) (*member, error) {
	m := &member{name: name, w: b.newWorkspace(name, cid, b.cfg.WorkspaceDir, run, time.Now())}
	if _, err := m.w.Agent(ctx); err != nil {
		b.removeMember(m)
		return nil, fmt.Errorf("starting the member's agent: %w", err)
	}
	return m, nil
}

// take is a ready member of p whose agent is still connected, or nil
// when none is ready. Broken members are removed on the way.
func (b *Backend) take(p *pool) *member {
	m, _ := b.pools.set.Take(p.members)
	return m
}

// claim makes workspace ws of member m: a claim volume named as the
// workspace's volume would be (so the name is taken, and the workspace's
// labels are kept), then the container renamed to the workspace's name.
// A claim that fails removes the member: it may be half renamed.
func (b *Backend) claim(ctx context.Context, op string, ws opsapi.WorkspaceSpec, m *member) (*Workspace, error) {
	name := namePrefix + ws.ID
	if err := b.checkFree(ctx, op, ws.ID, name); err != nil {
		b.pools.set.RemoveLater(m)
		return nil, err
	}
	created := time.Now().UTC()
	labels := b.labels(ws, m.w.Root(), created, LabelWorkspace, ws.ID, LabelClaim, m.name)
	if _, err := b.api.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: labels}); err != nil {
		b.pools.set.RemoveLater(m)
		return nil, engineErr(op, ws.ID, err)
	}
	if err := b.api.ContainerRename(ctx, m.w.box.cid, name); err != nil {
		b.removeMember(m)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		_ = b.api.VolumeRemove(cctx, name, true)
		cancel()
		if cerrdefs.IsConflict(err) {
			return nil, opsapi.E(op, ws.ID, opsapi.ErrExist, err)
		}
		return nil, engineErr(op, ws.ID, err)
	}
	w := b.adopt(ws.ID, m.w.box.cid, ws.Owner, m.w.Root(), m.w.box.agentDir, created)
	w.TakeAgent(m.w.Workspace)
	w.box.volumes = []string{m.name, name}
	w.Logger().Info("workspace created from the warm pool", "member", m.name, "container", m.w.box.cid[:12])
	return w, nil
}

// claimOf is the claim volume of pool member container c, when c was
// claimed: c has the workspace's name, and a volume of that name made
// by this broker names c's member as the one it took.
func (b *Backend) claimOf(ctx context.Context, c container.Summary) (volume.Volume, bool) {
	if len(c.Names) != 1 || !strings.HasPrefix(c.Names[0], "/"+namePrefix) {
		return volume.Volume{}, false
	}
	v, err := b.api.VolumeInspect(ctx, c.Names[0][1:])
	if err != nil {
		if !cerrdefs.IsNotFound(err) {
			b.logger.Warn("a claimed pool member's claim could not be read", "container", c.Names[0], "err", err)
		}
		return volume.Volume{}, false
	}
	l := v.Labels
	ok := l[LabelBroker] == b.cfg.Identity && l[LabelClaim] == c.Labels[LabelMember] && v.Name == namePrefix+l[LabelWorkspace]
	return v, ok
}

// removeMember removes a member that is not (or no longer) to be used:
// its container, volume and run directory.
func (b *Backend) removeMember(m *member) {
	m.w.box.volumes = []string{m.name}
	m.w.Discard("removed from the pool")
}

// rediscoverMembers takes back the unclaimed members of p that an earlier
// run of the broker (same identity) left running, and removes those made
// with other settings or that do not answer. Claimed ones are
// workspaces: List finds them.
func (b *Backend) rediscoverMembers(ctx context.Context, p *pool) {
	f := filters.NewArgs(filters.Arg("label", LabelBroker+"="+b.cfg.Identity), filters.Arg("label", LabelPool+"="+p.cfg.Name))
	list, err := b.api.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		b.logger.Warn("pool members left by an earlier run could not be listed", "pool", p.cfg.Name, "err", err)
		return
	}
	for _, c := range list {
		name := c.Labels[LabelMember]
		if !strings.HasPrefix(name, memberPrefix) || len(c.Names) != 1 || c.Names[0] != "/"+name {
			continue // claimed: a workspace now
		}
		run := b.agentDirOf(name)
		if c.State != "running" || c.Labels[LabelPoolSpec] != p.key || c.Labels[LabelAgent] != run || p.members.Ready() == p.members.Size() {
			b.removeMember(&member{name: name, w: b.newWorkspace(name, c.ID, b.cfg.WorkspaceDir, "", time.Now())})
			continue
		}
		m, err := b.readyMember(ctx, name, c.ID, run)
		if err != nil {
			b.logger.Warn("a pool member left by an earlier run was removed", "member", name, "err", err)
			continue
		}
		if !p.members.Put(m) {
			b.removeMember(m)
			continue
		}
		b.logger.Info("pool member taken back", "pool", p.cfg.Name, "member", name)
	}
}

// Pools says how full each pool is (opsapi.PoolReporter).
func (b *Backend) Pools() []opsapi.PoolStatus { return b.pools.set.Status() }
