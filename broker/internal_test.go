package broker

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
	"github.com/wsbroker/wsbroker/workspaces"
)

// TestRecoverer: a panicking handler answers a 500 problem and the server
// lives on; http.ErrAbortHandler passes through to net/http.
func TestRecoverer(t *testing.T) {
	s := &Server{logger: testutil.Logger(t)}
	h := s.recoverer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
	var p wire.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != 500 || p.Code != "internal" {
		t.Fatalf("%d %s (%v)", rec.Code, rec.Body, err)
	}
	abort := s.recoverer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }))
	defer func() {
		if v := recover(); v != http.ErrAbortHandler { //nolint:errorlint // identity, as net/http compares it
			t.Fatalf("recovered %v, want http.ErrAbortHandler", v)
		}
	}()
	abort.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
}

func TestConfigValidate(t *testing.T) {
	cases := map[string]Config{
		"no token":                 {},
		"empty token":              {Tokens: []string{""}},
		"negative limit":           {Tokens: []string{"t"}, MaxJSONBody: -1},
		"negative grace":           {Tokens: []string{"t"}, ShutdownGrace: -1},
		"budget below a tool body": {Tokens: []string{"t"}, MaxBodyBytesInFlight: DefaultMaxToolBody - 1},
		"negative audit budget":    {Tokens: []string{"t"}, UnauthAuditBurst: -1},
	}
	for name, c := range cases {
		if c.Validate() == nil {
			t.Errorf("%s: Validate accepted %+v", name, c)
		}
	}
	if err := (Config{Tokens: []string{"t"}}).Validate(); err != nil {
		t.Errorf("minimal config: %v", err)
	}
	if _, err := New(Config{Tokens: []string{"t"}}, nil, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("New accepted no backends")
	}
}

// TestWorkspaceInfoCarriesTransport: a backend's transport report reaches
// GET /v1/workspaces/{id}; a backend without one leaves it out.
func TestWorkspaceInfoCarriesTransport(t *testing.T) {
	got := workspaceInfo(workspaces.Info{ID: "a", Transport: &opsapi.Transport{Detail: "agent: off in the configuration"}})
	b, _ := json.Marshal(got)
	if !strings.Contains(string(b), `"transport":{"agent":false,"detail":"agent: off in the configuration"}`) {
		t.Errorf("with a transport: %s", b)
	}
	b, _ = json.Marshal(workspaceInfo(workspaces.Info{ID: "a"}))
	if strings.Contains(string(b), "transport") {
		t.Errorf("without one: %s", b)
	}
}

// TestOutputLineIsJSONMarshals: the hand-built output line is the bytes
// json.Marshal makes of the same wire.ExecLine, for any output.
func TestOutputLineIsJSONMarshals(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for _, data := range [][]byte{[]byte("x"), []byte("hello\n\"quoted\" \\ </script>\u2028"), all,
		[]byte(strings.Repeat("ab\x00\xff", execChunk/4))} {
		want, err := json.Marshal(wire.ExecLine{Type: wire.LineOutput, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, '\n')
		if got := appendOutputLine([]byte("prefix"), data); string(got) != "prefix"+string(want) {
			t.Errorf("%d bytes: got\n%.200s\nwant\n%.200s", len(data), got, want)
		}
	}
}

// TestEmptyOutputWriteCommitsNothing: a command's empty write sends no
// line and no headers, so a start that fails after it still gets its
// problem response; the next real write starts the stream.
func TestEmptyOutputWriteCommitsNothing(t *testing.T) {
	rec := httptest.NewRecorder()
	e := &execStream{w: rec}
	if n, err := e.Write(nil); n != 0 || err != nil {
		t.Fatalf("Write(nil) = %d, %v", n, err)
	}
	if e.started || rec.Body.Len() != 0 || len(rec.Header()) != 0 {
		t.Fatalf("an empty write started the stream: started %v, headers %v, body %q", e.started, rec.Header(), rec.Body)
	}
	if _, err := e.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if want := string(appendOutputLine(nil, []byte("x"))); !e.started || rec.Body.String() != want {
		t.Fatalf("after a write: started %v, body %q, want %q", e.started, rec.Body, want)
	}
}

// TestQueryHasKeyAgreesWithParseQuery: the key-only scan finds a token
// parameter exactly when url.ParseQuery does.
func TestQueryHasKeyAgreesWithParseQuery(t *testing.T) {
	for _, raw := range []string{"", "token", "token=", "token=x", "a=1&token=2", "access_token=x", "%74oken=x",
		"tok%65n", "to+ken=x", "token;x=1", "a=1;token=2", "x=token", "tokens=1", "%zz=1&token=1", "%zztoken=1",
		"path=" + strings.Repeat("%41", 1000) + "&access%5Ftoken=1", "a&&b", "=token"} {
		q, _ := url.ParseQuery(raw)
		want := q.Has("token") || q.Has("access_token")
		if got := queryHasKey(raw, "access_token", "token"); got != want {
			t.Errorf("%.60q: got %v, url.ParseQuery says %v", raw, got, want)
		}
	}
}
