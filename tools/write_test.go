package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
)

func TestWrite(t *testing.T) {
	f := newFakeWorkspace(t)
	tb := newTestToolbox(t, f)
	r := call(t, tb, "write", `{"path":"a/b/c.txt","content":"héllo\n"}`)
	wantText(t, r, false, "Successfully wrote to a/b/c.txt")
	if r.Details != nil {
		t.Errorf("details = %#v", r.Details)
	}
	if got, _ := f.content("a/b/c.txt"); got != "héllo\n" {
		t.Errorf("content = %q", got)
	}
	log := f.callLog()
	if i, j := indexOf(log, "Mkdir /w/a/b"), indexOf(log, "WriteFile /w/a/b/c.txt"); i < 0 || j < i {
		t.Errorf("calls = %v, want Mkdir of the parent before WriteFile", log)
	}
	// Overwrite; the raw path is echoed, '@' and '~' expanded.
	wantText(t, call(t, tb, "write", `{"path":"@~/a/b/c.txt","content":""}`), false, "Successfully wrote to @~/a/b/c.txt")
	if got, _ := f.content("a/b/c.txt"); got != "" {
		t.Errorf("content after overwrite = %q", got)
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func TestWriteErrors(t *testing.T) {
	f := newFakeWorkspace(t)
	tb := newTestToolbox(t, f)
	f.addFile("file", "x")
	wantText(t, call(t, tb, "write", `{"path":"file/child.txt","content":"x"}`), true,
		"EEXIST: file already exists, mkdir '/w/file'")
	f.addDir("d")
	wantText(t, call(t, tb, "write", `{"path":"d","content":"x"}`), true,
		"EISDIR: illegal operation on a directory, open '/w/d'")
	f.addFile("ro", "x")
	f.setMode("ro", 0o444)
	wantText(t, call(t, tb, "write", `{"path":"ro","content":"x"}`), true,
		"EACCES: permission denied, open '/w/ro'")
	wantText(t, call(t, tb, "write", `{"path":"/etc/x","content":"x"}`), true,
		"EACCES: permission denied, realpath '/etc/x'")
	wantText(t, call(t, tb, "write", `{"path":"x"}`), true,
		"Validation failed for tool \"write\":\n  - content: must have required property 'content'\n\nReceived arguments:\n{\n  \"path\": \"x\"\n}")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	wantText(t, tb.Call(ctx, "write", json.RawMessage(`{"path":"y","content":"x"}`), nil), true, "Operation aborted")
	if _, ok := f.content("y"); ok {
		t.Error("an aborted write created the file")
	}
}

func TestWriteSerializesThroughAliases(t *testing.T) {
	f := newFakeWorkspace(t)
	f.addFile("real.txt", "")
	f.addSymlink("alias.txt", "real.txt")
	tb := newTestToolbox(t, f)
	// While one write holds the file, a write through the alias must wait.
	inWrite := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	f.hook = func(op, p string) {
		if op == "WriteFile" && p == "/w/real.txt" {
			once.Do(func() { close(inWrite); <-release })
		}
	}
	done := make(chan Result, 2)
	go func() { done <- call(t, tb, "write", `{"path":"real.txt","content":"first"}`) }()
	<-inWrite
	go func() { done <- call(t, tb, "write", `{"path":"alias.txt","content":"second"}`) }()
	waitUsers(t, tb.env.queue, "/w/real.txt", 2)
	close(release)
	for range 2 {
		if r := <-done; r.IsError {
			t.Fatal(text(t, r))
		}
	}
	if got, _ := f.content("real.txt"); got != "second" {
		t.Errorf("content = %q, want the later write to win", got)
	}
}

func TestWriteParallelFiles(t *testing.T) {
	f := newFakeWorkspace(t)
	tb := newTestToolbox(t, f)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := call(t, tb, "write", fmt.Sprintf(`{"path":"p/%d.txt","content":"%d"}`, i, i))
			if r.IsError {
				t.Error(text(t, r))
			}
		}()
	}
	wg.Wait()
	for i := range 20 {
		if got, _ := f.content(fmt.Sprintf("p/%d.txt", i)); got != fmt.Sprint(i) {
			t.Errorf("file %d = %q", i, got)
		}
	}
	if n := tb.env.queue.size(); n != 0 {
		t.Errorf("%d queue entries left", n)
	}
}
