// Package bytesize is the size type of the backends' configurations:
// bytes, or a string with a binary unit, as docker's own flags read them.
package bytesize

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/docker/go-units"
)

// Size is a size in bytes. In JSON and YAML it is a number of bytes or a
// string with a binary unit: "512MiB", "2g", "1.5GB" (all powers of
// 1024).
type Size int64

// UnmarshalJSON accepts a number or a string.
func (b *Size) UnmarshalJSON(data []byte) error {
	if s, err := strconv.Unquote(string(data)); err == nil {
		return b.UnmarshalText([]byte(s))
	}
	var n int64
	if err := json.Unmarshal(data, &n); err != nil {
		return fmt.Errorf("size %s: want bytes or a string like \"512MiB\"", data)
	}
	*b = Size(n)
	return nil
}

// UnmarshalText reads "512MiB", "2g" or a plain number of bytes.
func (b *Size) UnmarshalText(text []byte) error {
	n, err := units.RAMInBytes(strings.TrimSpace(string(text)))
	if err != nil {
		return fmt.Errorf("size %q: %w", text, err)
	}
	*b = Size(n)
	return nil
}

// String is the size in binary units, e.g. "2GiB".
func (b Size) String() string { return units.BytesSize(float64(b)) }
