package tools

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// newTestToolbox builds a Toolbox over ws with a logger that writes to t.
func newTestToolbox(t *testing.T, ws opsapi.Workspace) *Toolbox {
	t.Helper()
	return New(ws, Options{Logger: testutil.Logger(t)})
}

// call runs a tool and returns its result; args is JSON text.
func call(t *testing.T, tb *Toolbox, name, args string) Result {
	t.Helper()
	return tb.Call(context.Background(), name, json.RawMessage(args), nil)
}

// text returns the only text block of r, failing otherwise.
func text(t *testing.T, r Result) string {
	t.Helper()
	if len(r.Content) == 0 || r.Content[0].Type != "text" {
		t.Fatalf("result has no leading text block: %+v", r)
	}
	return r.Content[0].Text
}

// wantText asserts that r is a success (or an error, when isErr) whose
// first block is exactly want.
func wantText(t *testing.T, r Result, isErr bool, want string) {
	t.Helper()
	if got := text(t, r); got != want {
		t.Errorf("text mismatch\n got: %q\nwant: %q", got, want)
	}
	if r.IsError != isErr {
		t.Errorf("IsError = %v, want %v (text %q)", r.IsError, isErr, text(t, r))
	}
}

func TestCallUnknownTool(t *testing.T) {
	tb := newTestToolbox(t, newFakeWorkspace(t))
	wantText(t, call(t, tb, "nope", `{}`), true, "Tool nope not found")
}

func TestNewRegistersOnlySupportedTools(t *testing.T) {
	full := newTestToolbox(t, fakeBash{newFakeWorkspace(t)})
	var names []string
	for _, d := range full.Definitions() {
		names = append(names, d.Name)
	}
	if !reflect.DeepEqual(names, Names()) {
		t.Errorf("full workspace tools = %v, want %v", names, Names())
	}

	// A workspace that can only list directories gets ls alone.
	type lsOnly struct {
		opsapi.Workspace
		opsapi.LsOperations
	}
	f := newFakeWorkspace(t)
	tb := newTestToolbox(t, lsOnly{f, f})
	if defs := tb.Definitions(); len(defs) != 1 || defs[0].Name != "ls" {
		t.Fatalf("ls-only definitions = %+v", defs)
	}
	if _, ok := tb.Tool("read"); ok {
		t.Error("read registered on a workspace without ReadOperations")
	}
	wantText(t, call(t, tb, "read", `{"path":"x"}`), true, "Tool read not found")
}

func TestDefinitions(t *testing.T) {
	defs := Definitions()
	if len(defs) != 7 {
		t.Fatalf("got %d definitions", len(defs))
	}
	for _, d := range defs {
		var s map[string]any
		if err := json.Unmarshal(d.Parameters, &s); err != nil {
			t.Fatalf("%s parameters: %v", d.Name, err)
		}
		if s["type"] != "object" || d.Description == "" || d.PromptSnippet == "" || d.Label != d.Name {
			t.Errorf("%s: incomplete definition %+v", d.Name, d)
		}
	}
	read := definitionOf("read")
	if !strings.Contains(read.Description, "(jpg, png, gif, webp, bmp)") {
		t.Errorf("read description lacks bmp: %q", read.Description)
	}
	var edit struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(definitionOf("edit").Parameters, &edit); err != nil {
		t.Fatal(err)
	}
	if _, ok := edit.Properties["oldText"]; ok {
		t.Error("edit schema has a top-level oldText")
	}
	if _, ok := edit.Properties["newText"]; ok {
		t.Error("edit schema has a top-level newText")
	}
	if !reflect.DeepEqual(edit.Required, []string{"path", "edits"}) {
		t.Errorf("edit required = %v", edit.Required)
	}
	if !strings.Contains(string(definitionOf("bash").Parameters), `"Bash command to execute"`) {
		t.Error("bash command description changed")
	}
}

func TestCallValidationError(t *testing.T) {
	tb := newTestToolbox(t, newFakeWorkspace(t))
	r := call(t, tb, "read", `{"offset": "abc", "limit": true, "extra": [1, 2.5, "x"]}`)
	want := "Validation failed for tool \"read\":\n" +
		"  - path: must have required property 'path'\n" +
		"  - offset: must be number\n" +
		"\n" +
		"Received arguments:\n" +
		"{\n" +
		"  \"offset\": \"abc\",\n" +
		"  \"limit\": true,\n" +
		"  \"extra\": [\n" +
		"    1,\n" +
		"    2.5,\n" +
		"    \"x\"\n" +
		"  ]\n" +
		"}"
	wantText(t, r, true, want)
}

func TestCallCoercesLikeTypeBox(t *testing.T) {
	f := newFakeWorkspace(t)
	f.addFile("a.txt", "1\n2\n3\n4\n5\n")
	tb := newTestToolbox(t, f)
	// "2" -> 2 for offset and limit.
	wantText(t, call(t, tb, "read", `{"path":"a.txt","offset":"2","limit":"1"}`), false,
		"2\n\n[4 more lines in file. Use offset=3 to continue.]")
	// A number where a string is expected becomes its JS string.
	f.addFile("5", "five")
	wantText(t, call(t, tb, "read", `{"path":5}`), false, "five")
	// "true" -> true for booleans.
	f.addFile("g.txt", "Hello\n")
	wantText(t, call(t, tb, "grep", `{"pattern":"hello","path":"g.txt","ignoreCase":"true"}`), false,
		"g.txt:1: Hello")
}

func TestCallNonObjectArguments(t *testing.T) {
	tb := newTestToolbox(t, newFakeWorkspace(t))
	wantText(t, call(t, tb, "write", `"hello"`), true,
		"Validation failed for tool \"write\":\n  - root: must be object\n\nReceived arguments:\n\"hello\"")
	// Empty or malformed JSON is {} as pi's stream parser makes it.
	wantText(t, call(t, tb, "find", ``), true,
		"Validation failed for tool \"find\":\n  - pattern: must have required property 'pattern'\n\nReceived arguments:\n{}")
	wantText(t, call(t, tb, "find", `{"pattern":`), true,
		"Validation failed for tool \"find\":\n  - pattern: must have required property 'pattern'\n\nReceived arguments:\n{}")
}

type panicTool struct{}

func (panicTool) Definition() Definition {
	return Definition{Name: "boom", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (panicTool) Execute(context.Context, json.RawMessage, UpdateFunc) (Result, error) {
	panic("kaboom")
}

func TestCallRecoversPanic(t *testing.T) {
	tb := newTestToolbox(t, newFakeWorkspace(t))
	tb.tools["boom"] = panicTool{}
	r := call(t, tb, "boom", `{}`)
	if !r.IsError || !strings.Contains(text(t, r), "kaboom") {
		t.Fatalf("panic result = %+v", r)
	}
}

type lateUpdateTool struct{ sent chan UpdateFunc }

func (lateUpdateTool) Definition() Definition {
	return Definition{Name: "late", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (l lateUpdateTool) Execute(_ context.Context, _ json.RawMessage, up UpdateFunc) (Result, error) {
	up(Result{Content: []Content{TextContent("during")}})
	l.sent <- up
	return Result{}, nil
}

func TestCallDropsUpdatesAfterExecute(t *testing.T) {
	tb := newTestToolbox(t, newFakeWorkspace(t))
	tool := lateUpdateTool{sent: make(chan UpdateFunc, 1)}
	tb.tools["late"] = tool
	var got []string
	r := tb.Call(context.Background(), "late", json.RawMessage(`{}`), func(r Result) { got = append(got, r.Content[0].Text) })
	(<-tool.sent)(Result{Content: []Content{TextContent("after")}})
	if !reflect.DeepEqual(got, []string{"during"}) {
		t.Errorf("updates = %v, want only the one sent during Execute", got)
	}
	if r.Content == nil || r.IsError {
		t.Errorf("result = %+v, want an empty success with non-nil content", r)
	}
}
