package responses

import (
	"cmp"
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Default bounds of a Store: responses kept in memory, and on disk.
const (
	DefaultMemoryResponses = 1000
	DefaultMemoryBytes     = 64 << 20
	DefaultDiskResponses   = 10000
	DefaultDiskBytes       = 1 << 30
)

// idRE is what a stored response's id may be: its file name is the id, so
// a client's id never names anything else.
var idRE = regexp.MustCompile(`^resp_[A-Za-z0-9_-]{1,128}$`)

// StoreOptions configure a Store.
type StoreOptions struct {
	// Dir, when set, keeps each response as one JSON file in this
	// directory, read back after a restart; otherwise responses are kept
	// in memory.
	Dir string
	// MaxResponses and MaxBytes bound what is kept; the oldest responses
	// are dropped first. 0 means the defaults (DefaultMemory... or
	// DefaultDisk...).
	MaxResponses int
	MaxBytes     int64
}

// Store keeps the responses created with store true, bounded by count and
// bytes, the oldest dropped first.
type Store struct {
	dir      string
	maxCount int
	maxBytes int64

	mu    sync.Mutex
	order *list.List               // of *stored, oldest first
	byID  map[string]*list.Element // into order
	bytes int64
}

// stored is one kept response: its record in memory, or its size on disk.
type stored struct {
	id   string
	size int64
	data []byte // nil on disk
}

// record is what is kept of a response: the response as it was sent, and
// the conversation it ends, which previous_response_id continues.
type record struct {
	Response json.RawMessage `json:"response"`
	// Items are the conversation's items: the previous response's items,
	// this response's input items, and its output items.
	Items []json.RawMessage `json:"items"`
	// Input is where this response's input items are in Items.
	Input [2]int `json:"input"`
}

// NewStore opens a store; with a directory, the responses already in it are
// kept (the oldest dropped if they exceed the bounds).
func NewStore(o StoreOptions) (*Store, error) {
	s := &Store{dir: o.Dir, maxCount: o.MaxResponses, maxBytes: o.MaxBytes, order: list.New(), byID: map[string]*list.Element{}}
	defCount, defBytes := DefaultMemoryResponses, int64(DefaultMemoryBytes)
	if s.dir != "" {
		defCount, defBytes = DefaultDiskResponses, DefaultDiskBytes
	}
	if s.maxCount <= 0 {
		s.maxCount = defCount
	}
	if s.maxBytes <= 0 {
		s.maxBytes = defBytes
	}
	if s.dir == "" {
		return s, nil
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	type file struct {
		id   string
		size int64
		mod  int64
	}
	var files []file
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			os.Remove(filepath.Join(s.dir, name)) // a write a crash cut short
			continue
		}
		id, ok := strings.CutSuffix(name, ".json")
		if !ok || !idRE.MatchString(id) || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		files = append(files, file{id: id, size: info.Size(), mod: info.ModTime().UnixNano()})
	}
	slices.SortFunc(files, func(a, b file) int { return cmp.Compare(a.mod, b.mod) })
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range files {
		s.byID[f.id] = s.order.PushBack(&stored{id: f.id, size: f.size})
		s.bytes += f.size
	}
	s.evict()
	return s, nil
}

func (s *Store) path(id string) string { return filepath.Join(s.dir, id+".json") }

// put keeps rec under id, dropping the oldest responses beyond the
// bounds; a record larger than the whole store is not kept.
func (s *Store) put(id string, rec *record) error {
	if !idRE.MatchString(id) {
		return fmt.Errorf("responses: %q is not a response id", id)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	size := int64(len(data))
	if size > s.maxBytes {
		return fmt.Errorf("responses: the response %s takes %d bytes, more than the store's %d", id, size, s.maxBytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &stored{id: id, size: size}
	if s.dir == "" {
		st.data = data
	} else {
		tmp := s.path(id) + ".tmp"
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			os.Remove(tmp)
			return err
		}
		if err := os.Rename(tmp, s.path(id)); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	s.remove(id)
	s.byID[id] = s.order.PushBack(st)
	s.bytes += size
	s.evict()
	return nil
}

// get reads the record of id; ok is false when there is none.
func (s *Store) get(id string) (*record, bool, error) {
	if !idRE.MatchString(id) {
		return nil, false, nil
	}
	s.mu.Lock()
	el, ok := s.byID[id]
	var data []byte
	if ok {
		data = el.Value.(*stored).data
	}
	s.mu.Unlock()
	if !ok {
		return nil, false, nil
	}
	if s.dir != "" {
		var err error
		if data, err = os.ReadFile(s.path(id)); errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		} else if err != nil {
			return nil, false, err
		}
	}
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, false, fmt.Errorf("responses: the stored response %s: %w", id, err)
	}
	return &rec, true, nil
}

// delete drops id; ok is false when it was not kept.
func (s *Store) delete(id string) (bool, error) {
	if !idRE.MatchString(id) {
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byID[id]; !ok {
		return false, nil
	}
	s.remove(id)
	if s.dir != "" {
		if err := os.Remove(s.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return true, err
		}
	}
	return true, nil
}

// remove takes id out of the index (s.mu is held).
func (s *Store) remove(id string) {
	if el, ok := s.byID[id]; ok {
		s.bytes -= el.Value.(*stored).size
		s.order.Remove(el)
		delete(s.byID, id)
	}
}

// evict drops the oldest responses beyond the bounds (s.mu is held).
func (s *Store) evict() {
	for s.order.Len() > 0 && (s.order.Len() > s.maxCount || s.bytes > s.maxBytes) {
		st := s.order.Front().Value.(*stored)
		s.remove(st.id)
		if s.dir != "" {
			os.Remove(s.path(st.id))
		}
	}
}

// Len is the number of responses kept.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}
