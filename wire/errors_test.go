package wire_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// TestCodesRoundTrip: every code is found again by its name, an error of
// its kind or sentinel is given it, and an opsapi code means opsapi's kind.
func TestCodesRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range wire.Codes() {
		if seen[c.Name] {
			t.Errorf("code %q twice", c.Name)
		}
		seen[c.Name] = true
		if got, ok := wire.ForCode(c.Name); !ok || got.Name != c.Name || got.Status != c.Status || got.Kind != c.Kind {
			t.Errorf("ForCode(%q) = %+v, %v", c.Name, got, ok)
		}
		if k := opsapi.KindForCode(c.Name); k != nil && k != c.Kind {
			t.Errorf("code %q: kind %v, opsapi says %v", c.Name, c.Kind, k)
		}
		if c.Status == 0 || http.StatusText(c.Status) == "" && c.Status != wire.StatusClientClosedRequest {
			t.Errorf("code %q: status %d", c.Name, c.Status)
		}
	}
	for _, k := range opsapi.Kinds {
		if c := wire.CodeOf(fmt.Errorf("op: %w", k)); c.Name != opsapi.Code(k) || c.Kind != k {
			t.Errorf("CodeOf(%v) = %+v", k, c)
		}
	}
}

// TestCodeOf covers the server's direction for what is not a plain kind.
func TestCodeOf(t *testing.T) {
	for _, c := range []struct {
		err    error
		name   string
		status int
	}{
		{fmt.Errorf("%w: no route", wire.ErrNotFound), "not_found", 404},
		// The broker's own sentinel wins over a kind it also wraps.
		{fmt.Errorf("%w: %w", wire.ErrBadRequest, opsapi.ErrInvalid), "bad_request", 400},
		{wire.ErrTooManyRequests, "too_many_requests", 429},
		{wire.ErrMisdirected, "misdirected_request", 421},
		{&http.MaxBytesError{Limit: 1}, "too_large", 413},
		{context.Canceled, "canceled", wire.StatusClientClosedRequest},
		{errors.New("boom"), "internal", 500},
	} {
		if got := wire.CodeOf(c.err); got.Name != c.name || got.Status != c.status {
			t.Errorf("CodeOf(%v) = %s %d, want %s %d", c.err, got.Name, got.Status, c.name, c.status)
		}
	}
}

// TestForStatus: a bare status (a proxy's page) means the first kind of
// that status.
func TestForStatus(t *testing.T) {
	for status, kind := range map[int]error{
		400: opsapi.ErrInvalid, 401: opsapi.ErrPermission, 403: opsapi.ErrPermission,
		404: opsapi.ErrNotExist, 405: opsapi.ErrInvalid, 409: opsapi.ErrExist,
		413: opsapi.ErrTooLarge, 415: opsapi.ErrInvalid, 429: opsapi.ErrUnavailable,
		499: opsapi.ErrCanceled, 500: nil, 502: opsapi.ErrUnavailable,
		503: opsapi.ErrUnavailable, 504: opsapi.ErrTimeout,
	} {
		if c, ok := wire.ForStatus(status); !ok || c.Kind != kind {
			t.Errorf("ForStatus(%d) = %+v, %v; want kind %v", status, c, ok, kind)
		}
	}
	if _, ok := wire.ForStatus(418); ok {
		t.Error("ForStatus(418) found a code")
	}
}

func TestNewProblem(t *testing.T) {
	p := wire.NewProblem(opsapi.E("read", "a.txt", opsapi.ErrNotExist, nil))
	want := wire.Problem{Type: wire.ProblemTypeBase + "not_exist", Title: "Not Found", Status: 404, Detail: "read a.txt: no such file or directory", Code: "not_exist"}
	if p != want {
		t.Errorf("NewProblem = %+v, want %+v", p, want)
	}
	if p := wire.NewProblem(context.Canceled); p.Title != "Client Closed Request" {
		t.Errorf("canceled title %q", p.Title)
	}
}
