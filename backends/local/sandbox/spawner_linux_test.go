package sandbox

import (
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/internal/testutil"
)

// With one P, a spawner whose goroutine first landed on the main thread
// handed itself to a new goroutine that the same thread took up again,
// without end (a broker with GOMAXPROCS=1, as in a one-CPU container,
// never got its sandbox). Every spawner must come up and start a command.
func TestSpawnerComesUpWithOneP(t *testing.T) {
	testutil.RequireRoot(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for i := range 20 {
		dir := t.TempDir()
		made := make(chan error, 1)
		var sp *Spawner
		go func() {
			var err error
			sp, err = NewSpawner(Spec{UID: 65534, GID: 65534, Workspace: dir, Tmp: dir, Network: NetworkNone})
			made <- err
		}()
		select {
		case err := <-made:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("spawner %d did not come up in 20 s", i)
		}
		cmd := exec.Command("/bin/true")
		cmd.Dir = dir
		if err := sp.Start(cmd, nil); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		sp.Close()
	}
}
