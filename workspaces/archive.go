package workspaces

import (
	"context"
	"io"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/tarball"
)

// Extract lands the tar stream r (compressed as c) in directory dir of the
// workspace, made if missing: every entry through the workspace's Guard,
// so the policy decides on each path as for a single write (package
// tarball says what is refused).
func (s *Service) Extract(ctx context.Context, w *Workspace, dir string, r io.Reader, c tarball.Compression, lim tarball.Limits) (tarball.Report, error) {
	ctx, _, err := s.admit(ctx, w, policy.Call{Op: "extract", Write: []string{dir}})
	if err != nil {
		return tarball.Report{}, err
	}
	wo, ok := opsapi.As[opsapi.WriteOperations](w.guard)
	if !ok {
		return tarball.Report{}, unsupported(w, "extract")
	}
	tree, _ := opsapi.As[opsapi.TreeOperations](w.guard)
	return tarball.Extract(ctx, r, c, tarball.Dest{Files: wo, Tree: tree}, dir, lim)
}

// Archive streams directory dir of the workspace to out as a tar
// compressed with c. Listings and reads go through the workspace's Guard
// (what the policy hides is left out, as in ls) and file content through
// the policy's redaction, as for a read.
func (s *Service) Archive(ctx context.Context, w *Workspace, dir string, out io.Writer, c tarball.Compression, lim tarball.Limits) (tarball.Report, error) {
	ctx, _, err := s.admit(ctx, w, policy.Call{Op: "archive", Read: []string{dir}})
	if err != nil {
		return tarball.Report{}, err
	}
	ls, okLs := opsapi.As[opsapi.LsOperations](w.guard)
	rd, okRd := opsapi.As[opsapi.ReadOperations](w.guard)
	if !okLs || !okRd {
		return tarball.Report{}, unsupported(w, "archive")
	}
	red := s.redactorOf(w)
	src := tarball.Source{ReadDir: ls.ReadDir, Open: rd.Open, Exact: red.Empty()}
	if !src.Exact {
		src.Open = func(ctx context.Context, p string) (io.ReadCloser, error) {
			rc, err := rd.Open(ctx, p)
			if err != nil {
				return nil, err
			}
			return newRedactingReader(red, rc), nil
		}
	}
	src.Tree, _ = opsapi.As[opsapi.TreeOperations](w.guard)
	return tarball.Write(ctx, out, c, src, dir, lim)
}
