package opsapi_test

import (
	"context"
	"testing"

	"github.com/wsbroker/wsbroker/opsapi"
)

type bare struct{}

func (bare) Root() string { return "/w" }

type destroyable struct{ bare }

func (destroyable) Destroy(context.Context) error { return nil }

// wrapper implements Destroyer whatever it wraps, as the policy Guard
// implements every interface it might forward.
type wrapper struct{ inner opsapi.Workspace }

func (w wrapper) Root() string                                      { return w.inner.Root() }
func (w wrapper) Unwrap() opsapi.Workspace                          { return w.inner }
func (w wrapper) Destroy(context.Context) error                     { return nil }
func (w wrapper) KillProcesses(context.Context, []int) (int, error) { return 0, nil }

type plainWrapper struct{ inner opsapi.Workspace }

func (w plainWrapper) Root() string             { return w.inner.Root() }
func (w plainWrapper) Unwrap() opsapi.Workspace { return w.inner }

func TestAs(t *testing.T) {
	if _, ok := opsapi.As[opsapi.Destroyer](bare{}); ok {
		t.Error("a bare workspace is not a Destroyer")
	}
	if _, ok := opsapi.As[opsapi.Destroyer](destroyable{}); !ok {
		t.Error("a Destroyer is one")
	}
	if _, ok := opsapi.As[opsapi.Destroyer](wrapper{bare{}}); ok {
		t.Error("a wrapper claimed an ability its workspace lacks")
	}
	d, ok := opsapi.As[opsapi.Destroyer](wrapper{destroyable{}})
	if _, isWrapper := d.(wrapper); !ok || !isWrapper {
		t.Errorf("a wrapper that forwards an ability should serve it: %T %v", d, ok)
	}
	d, ok = opsapi.As[opsapi.Destroyer](plainWrapper{wrapper{destroyable{}}})
	if _, isWrapper := d.(wrapper); !ok || !isWrapper {
		t.Errorf("an ability is found through a wrapper that lacks it: %T %v", d, ok)
	}
}
