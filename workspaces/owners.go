package workspaces

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// fileMap is a map from workspace id to V kept in a JSON file when one
// is configured, so that it survives a restart: which tenant owns each
// workspace (ownerStore), each workspace's environment (envStore).
type fileMap[V any] struct {
	mu   sync.Mutex
	path string
	what string // for errors: "owners file"
	m    map[string]V
}

// ownerStore remembers which tenant owns each workspace.
type ownerStore = fileMap[string]

func loadOwners(path string) (*ownerStore, error) { return loadFileMap[string](path, "owners file") }

func loadFileMap[V any](path, what string) (*fileMap[V], error) {
	o := &fileMap[V]{path: path, what: what, m: map[string]V{}}
	if path == "" {
		return o, nil
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return o, nil
	case err != nil:
		return nil, fmt.Errorf("broker: %s: %w", what, err)
	}
	if err := json.Unmarshal(b, &o.m); err != nil {
		return nil, fmt.Errorf("broker: %s %s: %w", what, path, err)
	}
	return o, nil
}

func (o *fileMap[V]) get(id string) (V, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t, ok := o.m[id]
	return t, ok
}

// set records id's value (or with forget, forgets it) and saves the file
// durably (written, synced, renamed over the old one). When the file
// cannot be saved, the record is as it was before the call.
func (o *fileMap[V]) set(id string, v V, forget bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	old, had := o.m[id]
	if forget {
		delete(o.m, id)
	} else {
		o.m[id] = v
	}
	if o.path == "" {
		return nil
	}
	if err := o.save(); err != nil {
		if had {
			o.m[id] = old
		} else {
			delete(o.m, id)
		}
		return fmt.Errorf("%s: %w", o.what, err)
	}
	return nil
}

// save writes the map to a temporary file, syncs it and renames it over
// the file: a crash leaves the old file or the new one, never a torn one.
func (o *fileMap[V]) save() error {
	b, _ := json.MarshalIndent(o.m, "", "  ")
	if err := os.MkdirAll(filepath.Dir(o.path), 0o700); err != nil {
		return err
	}
	tmp := o.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, o.path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
