//nolint:bodyclose // every response is closed by the t.Cleanup that env.send registers
package broker_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/wire"
)

// TestDiskQuotaSumsTheKernelLimits: a tenant's diskBytes quota admits
// workspaces by the sizes of their own filesystems, their info says use
// and limit, a full one still runs rm, and writing past its size is
// refused by the kernel with nothing left behind.
func TestDiskQuotaSumsTheKernelLimits(t *testing.T) {
	testutil.RequireLoopDevices(t)
	const size = 16 << 20
	tc := newTenancy(t, func(c *tenant.Config) { c.Quotas.DiskBytes = 40 << 20 }, nil, nil)
	create := func() (*http.Response, []byte) {
		return tc.as(aliceToken, "POST", "/v1/workspaces",
			map[string]any{"options": map[string]any{"limits": map[string]any{"diskBytes": size}}})
	}
	var made []wire.WorkspaceInfo
	t.Cleanup(func() { // before the state directory goes: the images are mounted in it
		for _, ws := range made {
			tc.as(aliceToken, "DELETE", "/v1/workspaces/"+ws.ID, nil)
		}
	})
	for range 2 {
		resp, data := create()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create within the quota: %d %s", resp.StatusCode, data)
		}
		var ws wire.WorkspaceInfo
		if err := json.Unmarshal(data, &ws); err != nil {
			t.Fatal(err)
		}
		made = append(made, ws)
		if ws.Disk == nil || ws.Disk.LimitBytes != size || ws.Disk.UsedBytes <= 0 {
			t.Fatalf("info of a limited workspace: disk %+v", ws.Disk)
		}
	}
	resp, data := create()
	checkProblem(t, resp, data, http.StatusForbidden, "denied")
	if !strings.Contains(string(data), "disk quota") || !strings.Contains(string(data), "at most 8388608 bytes") {
		t.Errorf("third 16 MiB workspace in 40 MiB: %s, want a denial that says 8 MiB fit", data)
	}

	ws := made[0]
	resp, data = tc.as(aliceToken, "PUT", wsPath(ws, "/files", "big"), strings.Repeat("x", 2*size))
	if resp.StatusCode < 400 {
		t.Fatalf("writing twice the size: %d %s", resp.StatusCode, data)
	}
	run := func(command string) string {
		_, data := tc.as(aliceToken, "POST", "/v1/workspaces/"+ws.ID+"/exec", map[string]any{"command": command})
		out, _ := readExec(t, bytes.NewReader(data), nil)
		return string(out)
	}
	// The failed write left nothing; the disk fills; rm still runs.
	if out := run("ls -A; head -c 32M /dev/zero > full 2>/dev/null || echo full"); out != "full\n" {
		t.Fatalf("filling the disk: %q", out)
	}
	if out := run("rm full && echo removed"); out != "removed\n" {
		t.Fatalf("rm on a full workspace: %q", out)
	}
	resp, data = tc.as(aliceToken, "GET", "/v1/workspaces/"+ws.ID, nil)
	var info wire.WorkspaceInfo
	if err := json.Unmarshal(data, &info); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("info: %d %s", resp.StatusCode, data)
	}
	if info.Disk == nil || info.Disk.LimitBytes != size || info.Disk.UsedBytes >= size/2 {
		t.Errorf("info after rm: disk %+v", info.Disk)
	}

	// Deleting one makes room for another.
	tc.as(aliceToken, "DELETE", "/v1/workspaces/"+made[1].ID, nil)
	made = made[:1]
	if resp, data := create(); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create after a delete: %d %s", resp.StatusCode, data)
	} else {
		var ws wire.WorkspaceInfo
		_ = json.Unmarshal(data, &ws)
		made = append(made, ws)
	}
}
