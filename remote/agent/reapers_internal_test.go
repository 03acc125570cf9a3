//go:build linux

package agent

import (
	"bufio"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/internal/testutil"
)

// TestReaperIsReusedAndAStaleKillMissesTheNextJob: a reaper serves a
// second command once the first is done, and a kill sent for the first
// one after it ended (the race between a client's cancel and the exit)
// leaves the second alone.
func TestReaperIsReusedAndAStaleKillMissesTheNextJob(t *testing.T) {
	s := &Server{Self: testutil.AgentBinary(t)}
	r, err := s.startReaperProc()
	if err != nil {
		t.Fatal(err)
	}
	defer r.discard()

	first := startTestJob(t, r, "true")
	if out, status := first.wait(t); out != "" || status != "exit 0,idle" {
		t.Fatalf("first job: output %q, status %q", out, status)
	}
	r.kill(first.id) // late: the first job is over
	second := startTestJob(t, r, "sleep 0.5; echo ok")
	if second.id == first.id {
		t.Fatal("the second job has the first one's id")
	}
	if out, status := second.wait(t); out != "ok\n" || status != "exit 0,idle" {
		t.Fatalf("second job after a stale kill: output %q, status %q", out, status)
	}

	third := startTestJob(t, r, "exec sleep 30")
	time.Sleep(100 * time.Millisecond)
	r.kill(third.id)
	if _, status := third.wait(t); status != "exit 143,killed 1,idle" && status != "killed 1,exit 143,idle" {
		t.Fatalf("killed job: status %q", status)
	}
}

// TestReaperSignalFollowsItsJob: a signal sent right behind its job
// reaches that job, however the reaper's reads fall (it is never taken
// first and dropped as stale), and one for a job already done leaves the
// next alone.
func TestReaperSignalFollowsItsJob(t *testing.T) {
	s := &Server{Self: testutil.AgentBinary(t)}
	r, err := s.startReaperProc()
	if err != nil {
		t.Fatal(err)
	}
	defer r.discard()
	for i := range 10 {
		j := startTestJob(t, r, "exec sleep 30")
		r.signal(j.id, 9)
		if _, status := j.wait(t); status != "exit 137,idle" {
			t.Fatalf("run %d: a SIGKILL right behind its job: status %q", i, status)
		}
		r.signal(j.id, 15) // late: that job is over
		next := startTestJob(t, r, "sleep 0.2; echo ok")
		if out, status := next.wait(t); out != "ok\n" || status != "exit 0,idle" {
			t.Fatalf("run %d: the job after a stale signal: output %q, status %q", i, out, status)
		}
	}
}

type testJob struct {
	id          uint64
	out, status *os.File
}

func startTestJob(t *testing.T, r *reaper, command string) testJob {
	t.Helper()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	statR, statW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.run(reapJob{Argv: []string{"/bin/sh", "-c", command}, Env: os.Environ(), Cwd: "/", GraceMS: 500},
		outW, outW, statW)
	outW.Close()
	statW.Close()
	if err != nil {
		t.Fatal(err)
	}
	return testJob{id: id, out: outR, status: statR}
}

// wait returns the job's output and its status lines, joined by commas.
func (j testJob) wait(t *testing.T) (string, string) {
	t.Helper()
	defer j.out.Close()
	defer j.status.Close()
	_ = j.status.SetReadDeadline(time.Now().Add(20 * time.Second))
	var lines []string
	sc := bufio.NewScanner(j.status)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	out, _ := io.ReadAll(j.out)
	return string(out), strings.Join(lines, ",")
}
