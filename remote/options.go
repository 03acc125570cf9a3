package remote

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
)

// DecodeOptions decodes a create request's options into v strictly: an
// unknown field or data after the object is an error. Empty or null
// options leave v as it is.
func DecodeOptions(options json.RawMessage, v any) error {
	raw := bytes.TrimSpace(options)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("options: %w", err)
	}
	if dec.More() {
		return errors.New("options: trailing data")
	}
	return nil
}

// ImageAllowed says whether a create request may name image: the default
// image, or one that a path.Match pattern of allowed matches ("*": any).
func ImageAllowed(image, defaultImage string, allowed []string) bool {
	if image == defaultImage {
		return true
	}
	for _, p := range allowed {
		if ok, _ := path.Match(p, image); ok || p == "*" {
			return true
		}
	}
	return false
}

// ImagePatternProblems are the patterns of allowed that are empty or do
// not parse, for a configuration's Validate.
func ImagePatternProblems(allowed []string) []error {
	var errs []error
	for _, p := range allowed {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			errs = append(errs, fmt.Errorf("allowedImages: bad pattern %q", p))
		}
	}
	return errs
}
