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
// atomically.
func (o *ownerStore) set(id, tenantName string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if tenantName == "" {
		delete(o.m, id)
	} else {
		o.m[id] = tenantName
	}
	if o.path == "" {
		return nil
	}
	b, _ := json.MarshalIndent(o.m, "", "  ")
	if err := os.MkdirAll(filepath.Dir(o.path), 0o700); err != nil {
		return fmt.Errorf("owners file: %w", err)
	}
	tmp := o.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("owners file: %w", err)
	}
	if err := os.Rename(tmp, o.path); err != nil {
		return fmt.Errorf("owners file: %w", err)
	}
	return nil
}
