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

// ownerStore remembers which tenant owns each workspace, in a JSON file
// when one is configured, so that ownership survives a restart.
type ownerStore struct {
	mu   sync.Mutex
	path string
	m    map[string]string
}

func loadOwners(path string) (*ownerStore, error) {
	o := &ownerStore{path: path, m: map[string]string{}}
	if path == "" {
		return o, nil
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return o, nil
	case err != nil:
		return nil, fmt.Errorf("broker: owners file: %w", err)
	}
	if err := json.Unmarshal(b, &o.m); err != nil {
		return nil, fmt.Errorf("broker: owners file %s: %w", path, err)
	}
	return o, nil
}

func (o *ownerStore) get(id string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t, ok := o.m[id]
	return t, ok
}

// set records (or with tenant "" forgets) an owner and saves the file
// durably (written, synced, renamed over the old one). When the file
// cannot be saved, the record is as it was before the call.
func (o *ownerStore) set(id, tenantName string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	old, had := o.m[id]
	if tenantName == "" {
		delete(o.m, id)
	} else {
		o.m[id] = tenantName
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
		return fmt.Errorf("owners file: %w", err)
	}
	return nil
}

// save writes the map to a temporary file, syncs it and renames it over
// the file: a crash leaves the old file or the new one, never a torn one.
func (o *ownerStore) save() error {
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
