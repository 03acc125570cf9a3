package remote

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/wsbroker/wsbroker/internal/bytesize"
)

// Box is what every container-like box a remote backend makes has in
// its configuration (docker's containers, kubernetes' pods): the image
// policy, the user it runs as, and its limits. A backend embeds it in its
// Config with `yaml:",inline"` (encoding/json flattens it unasked), so
// the keys stay at the configuration's top level; the backend's Config
// says what a value means there when that differs (how disk is bounded,
// what a user may be).
type Box struct {
	// DefaultImage is the image of a workspace whose create request names
	// none. Default DefaultImage.
	DefaultImage string `json:"defaultImage" yaml:"defaultImage"`
	// AllowedImages are the images a create request may name, as
	// path.Match patterns ("wsbroker/*", or "*" for any); DefaultImage is
	// always allowed. Default none: a request can only have the default
	// image.
	AllowedImages []string `json:"allowedImages" yaml:"allowedImages"`
	// User runs the box's processes, "uid:gid". Default DefaultUser, the
	// workspace image's agent user.
	User string `json:"user" yaml:"user"`
	// Memory is the box's memory limit, "2GiB" or bytes; /tmp's tmpfs
	// counts against it. A create request may ask for less, never more.
	// Default DefaultMemory.
	Memory bytesize.Size `json:"memory" yaml:"memory"`
	// CPUs is the box's CPU quota in cores (1.5 = one and a half). A
	// request may ask for less. Default DefaultCPUs.
	CPUs float64 `json:"cpus" yaml:"cpus"`
	// Disk bounds the workspace volume, "1GiB" or bytes. A request may
	// ask for less.
	Disk bytesize.Size `json:"disk" yaml:"disk"`
	// TmpfsSize bounds the memory-backed filesystem at /tmp, counted
	// against Memory. Default DefaultTmpfsSize.
	TmpfsSize bytesize.Size `json:"tmpfsSize" yaml:"tmpfsSize"`
}

// Box defaults, docker's and kubernetes' alike.
const (
	DefaultImage     = "wsbroker/workspace:current" // images/workspace
	DefaultUser      = "1000:1000"
	DefaultMemory    = bytesize.Size(2 << 30)
	DefaultCPUs      = 1.0
	DefaultTmpfsSize = bytesize.Size(256 << 20)
)

// NewBox returns the defaults (Disk 0: each backend has its own).
func NewBox() Box {
	return Box{DefaultImage: DefaultImage, User: DefaultUser, Memory: DefaultMemory, CPUs: DefaultCPUs,
		TmpfsSize: DefaultTmpfsSize}
}

// WithDefaults fills b's zero fields from d.
func (b Box) WithDefaults(d Box) Box {
	b.DefaultImage, b.User = cmp.Or(b.DefaultImage, d.DefaultImage), cmp.Or(b.User, d.User)
	b.Memory, b.CPUs, b.Disk = cmp.Or(b.Memory, d.Memory), cmp.Or(b.CPUs, d.CPUs), cmp.Or(b.Disk, d.Disk)
	b.TmpfsSize = cmp.Or(b.TmpfsSize, d.TmpfsSize)
	return b
}

// ImageProblems are what is wrong with the image policy, for a
// configuration's Validate.
func (b Box) ImageProblems() []error {
	var errs []error
	if b.DefaultImage == "" {
		errs = append(errs, errors.New("defaultImage is required"))
	}
	return append(errs, ImagePatternProblems(b.AllowedImages)...)
}

// Image is the image a create request gets when it names asked: the
// default one for "", else asked, with an error when the policy does not
// allow it.
func (b Box) Image(asked string) (string, error) {
	switch {
	case asked == "":
		return b.DefaultImage, nil
	case !ImageAllowed(asked, b.DefaultImage, b.AllowedImages):
		return asked, fmt.Errorf("image %q is not allowed (allowedImages)", asked)
	}
	return asked, nil
}
