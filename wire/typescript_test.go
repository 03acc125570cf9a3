package wire_test

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// piClient is the TypeScript SDK's wire types (integrations/typescript, which
// the pi integration uses), whose interfaces restate the wire types.
const piClient = "../integrations/typescript/src/types.ts"

// TestTypeScriptMatchesWire holds the TypeScript SDK's
// interfaces to the JSON fields of the Go types they decode: a field added
// on one side only fails here.
func TestTypeScriptMatchesWire(t *testing.T) {
	src, err := os.ReadFile(piClient)
	if err != nil {
		t.Fatal(err)
	}
	for ts, goType := range map[string]any{
		"WorkspaceInfo": wire.WorkspaceInfo{},
		"FileInfo":      wire.StatResponse{},
		"ExecExit":      opsapi.ExecResult{},
		"ToolResult":    wire.ToolResult{},
		"ToolContent":   wire.Content{},
	} {
		got := tsFields(t, string(src), ts)
		want := goFields(reflect.TypeOf(goType))
		if !slices.Equal(got, want) {
			t.Errorf("TypeScript %s has fields %v, Go %T %v", ts, got, goType, want)
		}
	}
}

var (
	tsComment = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	tsField   = regexp.MustCompile(`(?:^|[{;,\n])\s*(\w+)\??\s*:`)
)

// tsFields returns the sorted field names of the exported interface or
// type alias name: the members of its body, or of every object literal of
// a union alias.
func tsFields(t *testing.T, src, name string) []string {
	t.Helper()
	src = tsComment.ReplaceAllString(src, "")
	decl := regexp.MustCompile(`export (?:interface|type) ` + name + `\b[^{]*`).FindStringIndex(src)
	if decl == nil {
		t.Fatalf("%s declares no %s", piClient, name)
	}
	// Keep only what is at depth 1 (the members), each object a statement.
	var top strings.Builder
	depth := 0
scan:
	for _, r := range src[decl[1]:] {
		switch {
		case r == '{':
			depth++
			if depth == 1 {
				top.WriteRune(';')
			}
		case r == '}':
			depth--
			if depth == 0 {
				top.WriteRune(';')
			}
		case depth == 0 && (r == ';' || r == '\n' && strings.HasSuffix(strings.TrimSpace(top.String()), ";")):
			break scan // the declaration ends
		case depth == 1:
			top.WriteRune(r)
		}
	}
	set := map[string]bool{}
	for _, m := range tsField.FindAllStringSubmatch(top.String(), -1) {
		set[m[1]] = true
	}
	return sortedKeys(set)
}

// goFields returns the sorted JSON names of t's fields, embedded structs
// flattened.
func goFields(t reflect.Type) []string {
	set := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case name == "-" || !f.IsExported():
			case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
				walk(f.Type)
			case name == "":
				set[f.Name] = true
			default:
				set[name] = true
			}
		}
	}
	walk(t)
	return sortedKeys(set)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
