package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/tenant"
)

func TestPolicyCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	_ = os.WriteFile(good, []byte("name: ro\ntools:\n  allow: [read, ls]\nredact:\n  - name: aws\n    pattern: 'AKIA[0-9A-Z]{16}'\n"), 0o600)
	_ = os.WriteFile(bad, []byte("tools:\n  alow: [read]\n"), 0o600)
	out, _, code := run(nil, "", "policy", "check", good)
	if code != 0 || !strings.Contains(out, "policy ro") || !strings.Contains(out, "redact aws") || !strings.Contains(out, "advisory") {
		t.Fatalf("check good: %d %q", code, out)
	}
	_, errs, code := run(nil, "", "policy", "check", bad)
	if code != 1 || !strings.Contains(errs, "alow") {
		t.Fatalf("check bad: %d %q", code, errs)
	}
}

func TestTokenHash(t *testing.T) {
	out, _, code := run(nil, "s3cret\n", "token", "hash")
	if code != 0 || strings.TrimSpace(out) != tenant.HashToken("s3cret") {
		t.Fatalf("token hash: %d %q", code, out)
	}
	out, _, code = run(nil, "", "token", "new")
	if code != 0 || !strings.Contains(out, "tokenHashes entry: sha256:") {
		t.Fatalf("token new: %d %q", code, out)
	}
}

func TestAuditVerifyCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := audit.Open(path, 600, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		_ = l.Write(audit.Event{AuditID: "x", Stage: audit.StageResponseComplete, Tenant: "alice"})
	}
	_ = l.Close()
	out, _, code := run(nil, "", "audit", "verify", path)
	if code != 0 || !strings.Contains(out, "ok: the chain is intact") || !strings.Contains(out, "10 records") {
		t.Fatalf("verify: %d %q", code, out)
	}
	b, _ := os.ReadFile(path)
	_ = os.WriteFile(path, []byte(strings.Replace(string(b), `"tenant":"alice"`, `"tenant":"bob"`, 1)), 0o600)
	out, errs, code := run(nil, "", "audit", "verify", path)
	if code != 1 || !strings.Contains(out, "edited") {
		t.Fatalf("verify tampered: %d %q %q", code, out, errs)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// servedTenants is a `broker serve` run in-process with a tenants
// section whose alice tokens the test rewrites.
type servedTenants struct {
	t       *testing.T
	addr    string
	cfgPath string
	dir     string
	stderr  *testutil.LockedBuffer
}

// serveTenants starts serve with the watcher ticking every interval.
func serveTenants(t *testing.T, interval time.Duration) *servedTenants {
	t.Helper()
	old := reloadInterval
	reloadInterval = interval
	t.Cleanup(func() { reloadInterval = old })
	dir := t.TempDir()
	st := &servedTenants{t: t, addr: freeAddr(t), cfgPath: filepath.Join(dir, "broker.yaml"), dir: dir, stderr: &testutil.LockedBuffer{}}
	_ = os.WriteFile(filepath.Join(dir, "ro.yaml"), []byte("tools:\n  deny: [bash]\n"), 0o600)
	st.write("alice-1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		c := &CLI{Stdin: strings.NewReader(""), Stdout: &strings.Builder{}, Stderr: st.stderr, Getenv: envMap(map[string]string{})}
		done <- c.Run(ctx, []string{"serve", "--config", st.cfgPath})
	}()
	t.Cleanup(func() { cancel(); <-done })
	st.waitFor("alice-1", 200)
	return st
}

func (st *servedTenants) write(aliceTokens ...string) {
	st.t.Helper()
	var hashes []string
	for _, tok := range aliceTokens {
		hashes = append(hashes, fmt.Sprintf("%q", tenant.HashToken(tok)))
	}
	cfg := fmt.Sprintf(`listen: %s
stateDir: %s
tenants:
  - name: alice
    tokenHashes: [%s]
    policy: ro.yaml
    quotas: {workspaces: 2, requestsPerSecond: 100}
  - name: ops
    admin: true
    tokenHashes: [%q]
`, st.addr, filepath.Join(st.dir, "state"), strings.Join(hashes, ", "), tenant.HashToken("ops-token"))
	if err := os.WriteFile(st.cfgPath, []byte(cfg), 0o600); err != nil {
		st.t.Fatal(err)
	}
}

func (st *servedTenants) status(token string) int {
	req, _ := http.NewRequest("GET", "http://"+st.addr+"/v1/workspaces", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (st *servedTenants) waitFor(token string, want int) {
	st.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for st.status(token) != want {
		if time.Now().After(deadline) {
			st.t.Fatalf("token %s never answered %d (now %d); stderr:\n%s", token, want, st.status(token), st.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServeReloadsTenantsOnFileChange rotates a token by editing the
// config file of a running serve: no restart, no signal.
func TestServeReloadsTenantsOnFileChange(t *testing.T) {
	st := serveTenants(t, 100*time.Millisecond)
	if st.status("alice-2") != 401 {
		t.Fatal("alice-2 accepted before it was configured")
	}
	st.write("alice-2")
	st.waitFor("alice-2", 200)
	st.waitFor("alice-1", 401)
	if st.status("ops-token") != 200 {
		t.Fatal("the admin tenant lost access across the reload")
	}
	// A broken file keeps the tenants in force.
	_ = os.WriteFile(st.cfgPath, []byte("tenants: [ {name: x} ]\n"), 0o600)
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(st.stderr.String(), "tenant reload failed") {
		if time.Now().After(deadline) {
			t.Fatalf("the failed reload was not logged:\n%s", st.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st.status("alice-2") != 200 {
		t.Fatal("a broken config file locked alice out")
	}
	if _, err := os.Stat(filepath.Join(st.dir, "state", "audit", "audit.jsonl")); err != nil {
		t.Fatalf("no audit file: %v", err)
	}
}

// TestServeReloadsTenantsOnSIGHUP: with the watcher's tick an hour away,
// only SIGHUP can make the new token work.
func TestServeReloadsTenantsOnSIGHUP(t *testing.T) {
	st := serveTenants(t, time.Hour)
	st.write("alice-3")
	time.Sleep(300 * time.Millisecond)
	if st.status("alice-3") != 401 {
		t.Fatal("reloaded without a signal")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	st.waitFor("alice-3", 200)
	st.waitFor("alice-1", 401)
}

// The examples in docs/tenancy.md and docs/policy.md must load.
func TestDocumentedTenancyExamplesLoad(t *testing.T) {
	block := func(doc string) string {
		b, err := os.ReadFile(filepath.Join("..", "docs", doc))
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(string(b), "```yaml\n")
		body, _, ok2 := strings.Cut(rest, "```")
		if !ok || !ok2 {
			t.Fatalf("%s has no yaml block", doc)
		}
		return body
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "policies"), 0o700); err != nil {
		t.Fatal(err)
	}
	pol := filepath.Join(dir, "policies", "agents.yaml")
	_ = os.WriteFile(pol, []byte(block("policy.md")), 0o600)
	if out, errs, code := run(nil, "", "policy", "check", pol); code != 0 {
		t.Fatalf("docs/policy.md example: %s %s", out, errs)
	}
	cfgPath := filepath.Join(dir, "broker.yaml")
	_ = os.WriteFile(cfgPath, []byte(block("tenancy.md")), 0o600)
	var cfg serveConfig
	if err := loadConfigFile(cfgPath, &cfg); err != nil {
		t.Fatal(err)
	}
	reg, files, err := buildTenants(cfg, cfgPath)
	if err != nil {
		t.Fatalf("docs/tenancy.md example: %v", err)
	}
	if len(reg.Tenants()) != 3 || len(files) != 2 || reg.Lookup("team-a-agents").Policy == nil || cfg.TLS == nil {
		t.Fatalf("loaded %d tenants, files %v", len(reg.Tenants()), files)
	}
}

// TestServerTLSFromFiles: the tls section's files make a configuration
// that requires client certificates from the given CA.
func TestServerTLSFromFiles(t *testing.T) {
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	_ = os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	cfg, err := serverTLS(&tlsConfig{CertFile: certFile, KeyFile: keyFile, ClientCAFile: certFile})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.ClientCAs == nil || len(cfg.Certificates) != 1 {
		t.Fatalf("config %+v", cfg)
	}
	if cfg, err := serverTLS(&tlsConfig{CertFile: certFile, KeyFile: keyFile}); err != nil || cfg.ClientAuth != tls.NoClientCert {
		t.Fatalf("without a client CA: %v %+v", err, cfg)
	}
	if _, err := serverTLS(&tlsConfig{CertFile: certFile, KeyFile: keyFile, ClientCAFile: keyFile}); err == nil {
		t.Fatal("a CA file without a certificate accepted")
	}
	if _, err := serverTLS(&tlsConfig{CertFile: certFile}); err == nil {
		t.Fatal("a missing key file accepted")
	}
}

// TestAuditVerifyAfterTornWrite: a trail whose last record was cut short
// (a full disk) opens again, and `broker audit verify` accepts the chain
// that goes on with the record saying what was cut.
func TestAuditVerifyAfterTornWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := audit.Open(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_ = l.Write(audit.Event{AuditID: "x", Stage: audit.StageResponseComplete, Tenant: "alice"})
	}
	_ = l.Close()
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	_, _ = f.WriteString(`{"kind":"Event","seq":4,"ten`)
	_ = f.Close()
	if l, err = openAudit(serveConfig{Audit: auditConfig{File: path}}, nil); err != nil {
		t.Fatalf("start after a torn write: %v", err)
	}
	_ = l.Write(audit.Event{AuditID: "y", Stage: audit.StageResponseComplete, Tenant: "alice"})
	_ = l.Close()
	out, errs, code := run(nil, "", "audit", "verify", path)
	if code != 0 || !strings.Contains(out, "ok: the chain is intact") || !strings.Contains(out, "5 records") {
		t.Fatalf("verify after repair: %d %q %q", code, out, errs)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), `"stage":"Repaired"`) {
		t.Fatal("no Repaired record")
	}
}
