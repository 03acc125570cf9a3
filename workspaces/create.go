package workspaces

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/tenant"
)

// createTimeout bounds a backend's Create and Destroy; they run detached
// from the caller so that one that goes away cannot leave a half-made
// sandbox.
const createTimeout = 5 * time.Minute

// hostNetwork names the network of backends whose commands share the
// host's (local) or the remote host's (ssh) network: those without
// opsapi.NetworkChooser.
const hostNetwork = "host"

// Create makes a workspace for tenant t on the named backend ("" is the
// default) with the backend's own options. An unknown backend is
// ErrInvalid; a backend, image or network the tenant may not use, or a
// full workspace quota, is ErrDenied (and a denial in the caller's
// Notes); a shutting-down service ErrUnavailable.
func (s *Service) Create(ctx context.Context, t *tenant.Tenant, backend string, options json.RawMessage, env []EnvVar) (Info, error) {
	if backend == "" {
		backend = s.cfg.DefaultBackend
	}
	b, ok := s.backends[backend]
	if !ok {
		return Info{}, opsapi.E("create", "", opsapi.ErrInvalid, fmt.Errorf("unknown backend %q", backend))
	}
	if string(options) == "null" {
		options = nil
	}
	options, err := s.admitCreate(t, backend, b, options)
	if err != nil {
		notesFrom(ctx).Deny("tenant", err.Error())
		return Info{}, err
	}
	if err := s.admitEnv(s.policyOf(t.Name), env); err != nil {
		notesFrom(ctx).Deny("env", err.Error())
		return Info{}, err
	}
	release, err := s.reserveWorkspace(t)
	if err != nil {
		notesFrom(ctx).Deny("quota", err.Error())
		return Info{}, err
	}
	defer release()
	releaseDisk, err := s.reserveDisk(ctx, t, b, options)
	if err != nil {
		notesFrom(ctx).Deny("quota", err.Error())
		return Info{}, err
	}
	defer releaseDisk()
	if s.isStopping() {
		return Info{}, errShuttingDown
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	id := newID()
	ws, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: id, Options: options, Owner: t.Name})
	if err != nil {
		return Info{}, fmt.Errorf("creating a %s workspace: %w", backend, err)
	}
	// An owner that is not on disk could be lost at the next restart, and
	// the workspace handed to whoever adopts it then: no record, no
	// workspace. Its environment likewise.
	err = s.owners.set(id, t.Name, false)
	if err == nil && len(env) > 0 {
		if err = s.envs.set(id, env, false); err != nil {
			_ = s.owners.set(id, "", true)
		}
	}
	if err != nil {
		s.logger.Error("recording the workspace's owner failed; removing the workspace", "workspace", id,
			"tenant", t.Name, "err", err)
		if d, ok := opsapi.As[opsapi.Destroyer](ws); ok {
			if derr := d.Destroy(ctx); derr != nil {
				s.logger.Error("removing a workspace whose owner was not recorded", "workspace", id, "err", derr)
			}
		}
		return Info{}, opsapi.E("create", "", opsapi.ErrUnavailable, fmt.Errorf("recording the owner and environment of workspace %s: %w", id, err))
	}
	w := s.add(id, backend, t.Name, ws, time.Now())
	notesFrom(ctx).Workspace(id)
	s.logger.Info("workspace created", "workspace", id, "backend", backend, "tenant", t.Name, "root", ws.Root(),
		"request_id", requestFrom(ctx).ID)
	return w.Info(), nil
}

// Delete forgets the workspace first (new calls get ErrNotFound), cancels
// its running commands, then destroys the sandbox and its data. When the
// backend fails to destroy it, the workspace stays listed so that the
// delete can be retried.
func (s *Service) Delete(ctx context.Context, w *Workspace) error {
	if _, ok := s.remove(w.id); !ok {
		return fmt.Errorf("workspace %q: %w", w.id, ErrNotFound)
	}
	s.calls.cancelWorkspace(w.id, errors.New("workspace deleted"))
	if d, ok := opsapi.As[opsapi.Destroyer](w.ws); ok {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
		defer cancel()
		if err := d.Destroy(ctx); err != nil {
			s.readd(w)
			return fmt.Errorf("destroying workspace %s: %w", w.id, err)
		}
	}
	if err := s.owners.set(w.id, "", true); err != nil {
		s.logger.Warn("forgetting the workspace's owner failed", "workspace", w.id, "err", err)
	}
	if err := s.envs.set(w.id, nil, true); err != nil {
		s.logger.Warn("forgetting the workspace's environment failed", "workspace", w.id, "err", err)
	}
	if err := w.toolbox.Close(); err != nil {
		s.logger.Warn("removing full-output files failed", "workspace", w.id, "err", err)
	}
	if err := w.procs.Close(ctx); err != nil {
		s.logger.Warn("removing background processes' logs failed", "workspace", w.id, "err", err)
	}
	s.logger.Info("workspace deleted", "workspace", w.id, "backend", w.backend, "request_id", requestFrom(ctx).ID)
	return nil
}

// admitCreate checks a create against the tenant: backend, image and the
// policy's network rule. It returns the options to pass on: for a backend
// that chooses a network per workspace, with none named, the policy's
// first allowed mode is filled in, so the backend's default cannot widen
// it.
func (s *Service) admitCreate(t *tenant.Tenant, name string, b opsapi.Backend, options json.RawMessage) (json.RawMessage, error) {
	deny := func(format string, args ...any) error {
		return opsapi.E("create", "", opsapi.ErrDenied, fmt.Errorf(format, args...))
	}
	if !t.AllowsBackend(name) {
		return nil, deny("tenant %s may not use the %s backend", t.Name, name)
	}
	// The image is the one option every backend that has images names
	// alike; shape errors are the backend's to report.
	var opts struct {
		Image string `json:"image"`
	}
	if len(options) > 0 {
		_ = json.Unmarshal(options, &opts)
	}
	if !t.AllowsImage(opts.Image) {
		return nil, deny("tenant %s may not use the image %q", t.Name, opts.Image)
	}
	pol := t.Policy
	network := hostNetwork
	if nc, ok := b.(opsapi.NetworkChooser); ok {
		network = nc.Network(options)
		if network == "" && pol != nil && len(pol.Network.Allow) > 0 && !strings.ContainsAny(pol.Network.Allow[0], "*?[\\") {
			network = pol.Network.Allow[0]
			if pinned, err := nc.WithNetwork(options, network); err == nil {
				options = pinned
			}
		}
		if network == "" {
			network = "default"
		}
	}
	if pol != nil {
		if d := pol.Decide(policy.Call{Network: network, HasNetwork: true}); !d.Allowed {
			return nil, deny("%s", d.Message())
		}
	}
	return options, nil
}

// reserveWorkspace holds one of the tenant's workspace slots while a
// create runs, so that parallel creates cannot together pass the quota.
// The returned func gives the reservation back (the workspace, if made,
// is counted by then).
func (s *Service) reserveWorkspace(t *tenant.Tenant) (func(), error) {
	q := t.Quotas.WorkspaceLimit()
	if q <= 0 {
		return func() {}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	held := s.creating[t.Name]
	for _, w := range s.workspaces {
		if w.tenant == t.Name {
			held++
		}
	}
	if held >= q {
		return nil, opsapi.E("create", "", opsapi.ErrDenied,
			fmt.Errorf("workspace quota exceeded: tenant %s holds %d of %d workspaces", t.Name, held, q))
	}
	s.creating[t.Name]++
	return func() {
		s.mu.Lock()
		s.creating[t.Name]--
		s.mu.Unlock()
	}, nil
}

// idEncoding is lower-case base32 without padding: 16 random bytes make
// exactly 26 characters.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID returns "ws_" and 128 random bits: unguessable, not enumerable.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return "ws_" + idEncoding.EncodeToString(b[:])
}
