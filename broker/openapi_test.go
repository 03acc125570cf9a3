package broker_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi-validator/schema_validation"

	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// TestOpenAPIIsValid validates the embedded document against the OpenAPI
// 3.1 meta-schema that libopenapi-validator embeds.
func TestOpenAPIIsValid(t *testing.T) {
	doc, err := libopenapi.NewDocument(broker.OpenAPI())
	if err != nil {
		t.Fatalf("parsing openapi.json: %v", err)
	}
	if v := doc.GetSpecInfo().Version; v != "3.1.0" {
		t.Fatalf("openapi version %q, want 3.1.0", v)
	}
	ok, errs := schema_validation.ValidateOpenAPIDocument(doc)
	for _, e := range errs {
		t.Errorf("%s: %s (line %d)", e.Message, e.Reason, e.SpecLine)
		for _, se := range e.SchemaValidationErrors {
			t.Errorf("  %s (%s): %s", se.FieldPath, se.KeywordLocation, se.Reason)
		}
	}
	if !ok && len(errs) == 0 {
		t.Error("openapi.json is invalid, with no reason given")
	}
}

// wireSchema names the Go types a component schema describes: more than
// one for a oneOf of line types.
type wireSchema struct {
	types []any
	// request marks a body the client sends: its required fields are the
	// ones the broker insists on, a subset of those Go always encodes.
	request bool
}

// wireSchemas maps every component schema of openapi.json to its wire
// type. A schema without a type here, or a type's field missing from its
// schema, fails TestOpenAPISchemasMatchWire.
var wireSchemas = map[string]wireSchema{
	"Problem":             {types: []any{wire.Problem{}}},
	"CreateRequest":       {types: []any{wire.CreateRequest{}}, request: true},
	"Workspace":           {types: []any{wire.WorkspaceInfo{}}},
	"Confinement":         {types: []any{wire.Confinement{}}},
	"Transport":           {types: []any{wire.Transport{}}},
	"Disk":                {types: []any{wire.Disk{}}},
	"ArchiveReport":       {types: []any{wire.ArchiveReport{}}},
	"ArchiveRefusal":      {types: []any{wire.ArchiveRefusal{}}},
	"WorkspaceList":       {types: []any{wire.WorkspaceList{}}},
	"ToolDefinition":      {types: []any{wire.ToolDefinition{}}},
	"ToolList":            {types: []any{wire.ToolList{}}},
	"Content":             {types: []any{wire.Content{}}},
	"Result":              {types: []any{wire.ToolResult{}}},
	"StreamLine":          {types: []any{wire.StreamLine{}}},
	"BatchCall":           {types: []any{wire.BatchCall{}}, request: true},
	"BatchRequest":        {types: []any{wire.BatchRequest{}}, request: true},
	"BatchResult":         {types: []any{wire.BatchResult{}}},
	"BatchResponse":       {types: []any{wire.BatchResponse{}}},
	"FileInfo":            {types: []any{opsapi.FileInfo{}}},
	"StatResponse":        {types: []any{wire.StatResponse{}}},
	"RealPath":            {types: []any{wire.RealPathResponse{}}},
	"DirList":             {types: []any{wire.DirList{}}},
	"GlobRequest":         {types: []any{opsapi.GlobRequest{}}, request: true},
	"GlobResult":          {types: []any{opsapi.GlobResult{}}},
	"SearchRequest":       {types: []any{opsapi.SearchRequest{}}, request: true},
	"SearchLine":          {types: []any{opsapi.SearchLine{}}},
	"SearchResult":        {types: []any{opsapi.SearchResult{}}},
	"ExecRequest":         {types: []any{wire.ExecRequest{}}, request: true},
	"ExecLine":            {types: []any{wire.ExecLine{}, wire.ExecExit{}}},
	"AuditList":           {types: []any{wire.AuditList{}}},
	"Process":             {types: []any{opsapi.Process{}}},
	"ProcessList":         {types: []any{wire.ProcessList{}}},
	"KillResult":          {types: []any{wire.KillResult{}}},
	"ExecResult":          {types: []any{opsapi.ExecResult{}}},
	"LogSpan":             {types: []any{wire.LogSpan{}}},
	"StartProcessRequest": {types: []any{wire.StartProcessRequest{}}, request: true},
	"BackgroundProcess":   {types: []any{wire.BackgroundProcess{}}},
	"LogLine":             {types: []any{wire.LogLine{}}},
	"SignalRequest":       {types: []any{wire.SignalRequest{}}, request: true},
	"StdinResult":         {types: []any{wire.StdinResult{}}},
	"ProcessUsage":        {types: []any{wire.ProcessUsage{}}},
	"EnvVar":              {types: []any{wire.EnvVar{}}, request: true},
	"EnvName":             {types: []any{wire.EnvName{}}},
	"EnvRequest":          {types: []any{wire.EnvRequest{}}, request: true},
}

// TestOpenAPISchemasMatchWire holds each body schema equal to the JSON
// fields of its wire type: the same property names, and as required the
// fields Go always encodes (for a request, at most those).
func TestOpenAPISchemasMatchWire(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(broker.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc.Components.Schemas
	for name := range schemas {
		if _, ok := wireSchemas[name]; !ok {
			t.Errorf("schema %s has no wire type in wireSchemas", name)
		}
	}
	for name, ws := range wireSchemas {
		s, ok := schemas[name]
		if !ok {
			t.Errorf("wire type of %s has no schema", name)
			continue
		}
		props, required, oneOf := s.flatten(schemas)
		fields, always := map[string]bool{}, map[string]bool{}
		for _, v := range ws.types {
			for f, omit := range jsonFields(reflect.TypeOf(v)) {
				fields[f] = true
				if !omit {
					always[f] = true
				}
			}
		}
		if got, want := keys(props), keys(fields); !slices.Equal(got, want) {
			t.Errorf("schema %s has properties %v, its wire type fields %v", name, got, want)
		}
		if oneOf {
			continue // each line type requires its own fields
		}
		for f := range required {
			if !always[f] {
				t.Errorf("schema %s requires %q, which its wire type may omit", name, f)
			}
		}
		if !ws.request {
			for f := range always {
				if !required[f] {
					t.Errorf("schema %s does not require %q, which its wire type always sends", name, f)
				}
			}
		}
	}
}

// TestOpenAPIProblemCodes: the document's code enum is wire's table.
func TestOpenAPIProblemCodes(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas struct {
				Problem struct {
					Properties struct {
						Code struct {
							Enum []string `json:"enum"`
						} `json:"code"`
					} `json:"properties"`
				} `json:"Problem"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(broker.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, c := range wire.Codes() {
		want = append(want, c.Name)
	}
	got := doc.Components.Schemas.Problem.Properties.Code.Enum
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("Problem.code enum %v, wire.Codes %v", got, want)
	}
}

// schema is the part of a JSON Schema the comparison reads.
type schema struct {
	Ref        string                     `json:"$ref"`
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
	AllOf      []schema                   `json:"allOf"`
	OneOf      []schema                   `json:"oneOf"`
}

// flatten returns the properties and required names of s, merging allOf
// and oneOf branches and following $refs to other component schemas.
func (s schema) flatten(all map[string]schema) (props, required map[string]bool, oneOf bool) {
	props, required = map[string]bool{}, map[string]bool{}
	if s.Ref != "" {
		return all[strings.TrimPrefix(s.Ref, "#/components/schemas/")].flatten(all)
	}
	for p := range s.Properties {
		props[p] = true
	}
	for _, r := range s.Required {
		required[r] = true
	}
	for _, sub := range append(slices.Clone(s.AllOf), s.OneOf...) {
		p, r, _ := sub.flatten(all)
		for k := range p {
			props[k] = true
		}
		for k := range r {
			required[k] = true
		}
	}
	return props, required, len(s.OneOf) > 0
}

// jsonFields returns the JSON names encoding/json gives t's fields, each
// with whether it is omitempty; embedded structs are flattened.
func jsonFields(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
