package docker

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types"
)

// CVE-2024-21626 ("Leaky Vessels"): runc before 1.1.12 leaked a host
// directory fd into the container process, so an exec whose working
// directory was /proc/self/fd/N started outside the container's root.
// The backend never passes a caller's directory to runc (every exec starts
// in the workspace root and the wrapper changes directory inside the
// container) and refuses any working directory under /proc; an old runc
// is still worth a warning, since it also affects images and `docker
// run`.

// runcFixed is the first upstream release with the fix.
var runcFixed = [3]int{1, 1, 12}

// debianFixed maps a Debian release to the first security update of its
// runc package carrying the fix (DSA-5615-1): 1.0.0~rc93+ds1-5+deb11u3 in
// bullseye, 1.1.5+ds1-1+deb12u1 in bookworm. Later releases ship runc
// 1.1.12 or newer.
var debianFixed = map[int]int{11: 3, 12: 1}

var (
	upstreamRE = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)`)
	debianRE   = regexp.MustCompile(`\+deb(\d+)u(\d+)`)
	// A distribution's own build: Debian's "+ds1-1", Ubuntu's
	// "-0ubuntu1", RPM's ".el9", Alpine's "-r0".
	distroRE = regexp.MustCompile(`(\+ds|\+dfsg|-\d|ubuntu|\.el\d|\.fc\d|-r\d)`)
)

// runcVerdict is what the engine's runc says about CVE-2024-21626.
type runcVerdict struct {
	Version string // the fullest version string the engine gave
	Fixed   bool   // known to carry the fix
	Message string
}

// checkRunc judges runc's version and, when the engine reports one, its
// package revision (Debian's engine puts "1.1.5+ds1-1+deb12u1" in the
// component's GitCommit). It never refuses: distributions backport fixes,
// so an old upstream number alone does not prove an engine vulnerable.
func checkRunc(version, commit string) runcVerdict {
	full := version
	if strings.HasPrefix(commit, strings.TrimPrefix(version, "v")) && len(commit) > len(version) {
		full = commit
	}
	v := runcVerdict{Version: full}
	m := upstreamRE.FindStringSubmatch(full)
	if m == nil {
		v.Message = fmt.Sprintf("runc version %q is not recognised; make sure it carries the fix for CVE-2024-21626 (runc 1.1.12)", full)
		return v
	}
	var got [3]int
	for i := range got {
		got[i], _ = strconv.Atoi(m[i+1])
	}
	if !less(got, runcFixed) {
		v.Fixed = true
		v.Message = fmt.Sprintf("runc %s carries the fix for CVE-2024-21626", full)
		return v
	}
	if d := debianRE.FindStringSubmatch(full); d != nil {
		release, _ := strconv.Atoi(d[1])
		update, _ := strconv.Atoi(d[2])
		if first, ok := debianFixed[release]; ok && update >= first {
			v.Fixed = true
			v.Message = fmt.Sprintf("runc %s predates 1.1.12 but is Debian's security update with the fix for CVE-2024-21626 backported", full)
			return v
		}
		v.Message = fmt.Sprintf("runc %s is a Debian build without the fix for CVE-2024-21626 (want +deb%du%d or later); update the runc package", full, release, debianFixed[release])
		return v
	}
	if strings.Contains(full, "+ds") && !strings.Contains(full, "ubuntu") {
		v.Message = fmt.Sprintf("runc %s is a Debian build without a security update carrying the fix for CVE-2024-21626; update the runc package", full)
		return v
	}
	if distroRE.MatchString(full) {
		v.Message = fmt.Sprintf("runc %s predates 1.1.12; it is a distribution build, which may carry a backported fix for CVE-2024-21626: check the distribution's advisory", full)
		return v
	}
	v.Message = fmt.Sprintf("runc %s predates 1.1.12 and is vulnerable to CVE-2024-21626 (working directory /proc/self/fd/N escapes the container); update the engine", full)
	return v
}

func less(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// runcOf finds runc among the engine's components.
func runcOf(v types.Version) (version, commit string, ok bool) {
	for _, c := range v.Components {
		if strings.EqualFold(c.Name, "runc") {
			return c.Version, c.Details["GitCommit"], true
		}
	}
	return "", "", false
}
