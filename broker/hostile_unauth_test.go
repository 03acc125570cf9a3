//nolint:bodyclose // every response is closed by the t.Cleanup that env.send registers
package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/broker"
)

// TestUnauthenticatedSprayKeepsTheTrail: 2,048 requests with a wrong
// token from 1,024 loopback addresses (each within its own peer budget,
// so every one is a 401) write at most the global budget of records one
// by one, plus summary records whose counts make up the rest, into the
// trail of unauthenticated requests; the tenants' trail, small enough to
// rotate twice over under the old one-record-per-401, keeps its first
// record, and both chains verify.
func TestUnauthenticatedSprayKeepsTheTrail(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("binding to any 127.0.0.0/8 address is Linux's")
	}
	dir := t.TempDir()
	mainPath, unauthPath := filepath.Join(dir, "audit.jsonl"), filepath.Join(dir, "unauthenticated.jsonl")
	mainLog, err := audit.OpenWith(mainPath, audit.Options{MaxBytes: 32 << 10, MaxFiles: 2, Reserve: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mainLog.Close() })
	unauthLog, err := audit.OpenWith(unauthPath, audit.Options{Reserve: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unauthLog.Close() })
	const burst, perSecond, every = 50, 5.0, 300 * time.Millisecond
	tc := newTenancy(t, nil, nil, func(c *broker.Config) {
		c.Audit, c.UnauthAudit = mainLog, unauthLog
		c.UnauthAuditBurst, c.UnauthAuditPerSecond, c.UnauthSummaryEvery = burst, perSecond, every
	})
	tc.createAs(aliceToken)
	first := readTrail(t, mainPath)
	if len(first) == 0 || first[0].Seq != 1 {
		t.Fatalf("the tenants' trail before the spray: %d records", len(first))
	}

	start := time.Now()
	const peers, each = 1024, 2
	statuses := sprayUnauthenticated(t, tc.hs.URL, peers, each)
	elapsed := time.Since(start)
	if statuses[http.StatusUnauthorized] != peers*each {
		t.Fatalf("statuses %v; every request within its peer's budget should be a 401", statuses)
	}

	// The summary is written every period after the first request counted.
	var one, counted int64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		one, counted = 0, 0
		for _, ev := range readTrail(t, unauthPath) {
			switch {
			case ev.Stage == audit.StageSummary:
				counted += ev.Count
			case ev.Rule == "authentication":
				one++
			}
		}
		if one+counted == peers*each || time.Now().After(deadline) {
			break
		}
	}
	if one+counted != peers*each {
		t.Fatalf("%d 401s recorded one by one and %d counted in summaries, of %d", one, counted, peers*each)
	}
	if allowed := int64(burst + perSecond*elapsed.Seconds() + 1); one > allowed {
		t.Fatalf("%d 401s recorded one by one in %v; the budget allows %d", one, elapsed, allowed)
	}
	if st, err := os.Stat(unauthPath); err != nil || st.Size() > (one+20)*4<<10 {
		t.Fatalf("the trail of unauthenticated requests (%d records one by one): %v, %+v", one, err, st)
	}
	after := readTrail(t, mainPath)
	if len(after) == 0 || after[0].Seq != 1 || after[0].AuditID != first[0].AuditID {
		t.Fatal("the tenants' first record was rotated away by unauthenticated requests")
	}
	for _, ev := range after {
		if ev.Rule == "authentication" {
			t.Fatalf("an unauthenticated request in the tenants' trail: %+v", ev)
		}
	}
	// An admin reads that trail over HTTP; a tenant does not.
	resp, data := tc.as(adminToken, "GET", "/v1/audit?trail=unauthenticated&limit=1000", nil)
	var list struct{ Records []audit.Event }
	if err := json.Unmarshal(data, &list); err != nil || resp.StatusCode != http.StatusOK ||
		len(list.Records) == 0 || list.Records[len(list.Records)-1].Stage != audit.StageSummary {
		t.Fatalf("an admin reading the unauthenticated trail: %d %.300s", resp.StatusCode, data)
	}
	resp, data = tc.as(aliceToken, "GET", "/v1/audit?trail=unauthenticated", nil)
	if resp.StatusCode != http.StatusOK || string(bytes.TrimSpace(data)) != `{"records":[]}` {
		t.Fatalf("a tenant reading the unauthenticated trail: %d %s", resp.StatusCode, data)
	}
	resp, data = tc.as(adminToken, "GET", "/v1/audit?trail=other", nil)
	checkProblem(t, resp, data, http.StatusBadRequest, "invalid")
	for _, p := range []string{mainPath, unauthPath} {
		if rep, err := audit.Verify(trailFiles(p)...); err != nil || len(rep.Problems) != 0 || !rep.Anchored {
			t.Fatalf("chain of %s: %v %v anchored %v", p, err, rep.Problems, rep.Anchored)
		}
	}
}

// sprayUnauthenticated sends each requests with a wrong token from each
// of peers loopback addresses (127.77.x.y), 32 addresses at a time, and
// counts the statuses.
func sprayUnauthenticated(t *testing.T, url string, peers, each int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	statuses := map[int]int{}
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range peers {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			src := &net.TCPAddr{IP: net.IPv4(127, 77, byte(i>>8), byte(i&0xff)+1)}
			tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: src}).DialContext}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			for range each {
				req, _ := http.NewRequestWithContext(context.Background(), "GET", url+"/v1/workspaces", nil)
				req.Header.Set("Authorization", "Bearer wrong-token")
				resp, err := client.Do(req)
				code := -1
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				statuses[code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return statuses
}

// trailFiles is the rotated files of the trail at path, oldest first,
// then path.
func trailFiles(path string) []string {
	rotated, _ := filepath.Glob(path + ".*")
	return append(rotated, path)
}

// readTrail returns the records of the trail at path, oldest first.
func readTrail(t *testing.T, path string) []audit.Event {
	t.Helper()
	var out []audit.Event
	for _, name := range trailFiles(path) {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			var ev audit.Event
			if err := json.Unmarshal(line, &ev); err != nil {
				t.Fatal(fmt.Errorf("%s: %w", name, err))
			}
			out = append(out, ev)
		}
	}
	return out
}
