//go:build !linux

package audit

import (
	"errors"
	"os"
)

// allocate has no portable fallocate to call: the reserve is written as
// zeros instead (growReserve).
func allocate(*os.File, int64) error { return errors.ErrUnsupported }
