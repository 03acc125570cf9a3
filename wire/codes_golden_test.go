package wire_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/wsbroker/wsbroker/wire"
)

// update rewrites testdata/codes.json from wire.Codes.
var update = flag.Bool("update", false, "rewrite testdata/codes.json from wire.Codes()")

// codesGolden is the error-code table as the SDKs in other languages read
// it: a JSON array of {"name","status"} in wire.Codes order. The Python SDK's
// tests fail when it names a code the SDK has no exception class for.
var codesGolden = filepath.Join("testdata", "codes.json")

type goldenCode struct {
	Name   string `json:"name"`
	Status int    `json:"status"`
}

// TestCodesGolden holds testdata/codes.json equal to wire.Codes(), so a code
// added to the table reaches the other languages' SDKs through their tests.
func TestCodesGolden(t *testing.T) {
	var want []goldenCode
	for _, c := range wire.Codes() {
		want = append(want, goldenCode{Name: c.Name, Status: c.Status})
	}
	b, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if *update {
		if err := os.WriteFile(codesGolden, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(codesGolden)
	if err != nil {
		t.Fatalf("%v; create it with: go test ./wire -run TestCodesGolden -update", err)
	}
	if !bytes.Equal(got, b) {
		t.Fatalf("%s differs from wire.Codes(); regenerate it with "+
			"`go test ./wire -run TestCodesGolden -update`, then give the Python SDK "+
			"(integrations/python/src/wsbroker/errors.py) and the TypeScript SDK a class "+
			"for each new code.\nwant:\n%s\ngot:\n%s", codesGolden, b, got)
	}
}
