package responses

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func testRecord(text string) *record {
	return &record{Response: json.RawMessage(`{"text":` + strconv.Quote(text) + `}`), Items: []json.RawMessage{json.RawMessage(`{}`)}}
}

// TestStoreBounds: the store drops its oldest responses beyond its count
// and its bytes, in memory and on disk, and refuses ids that are not ids.
func TestStoreBounds(t *testing.T) {
	for _, dir := range []string{"", t.TempDir()} {
		s, err := NewStore(StoreOptions{Dir: dir, MaxResponses: 3, MaxBytes: 400})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if err := s.put("resp_"+strconv.Itoa(i), testRecord("x")); err != nil {
				t.Fatal(err)
			}
		}
		if s.Len() != 3 {
			t.Fatalf("dir %q: %d kept, want 3", dir, s.Len())
		}
		for i, want := range []bool{false, false, true, true, true} {
			if _, ok, err := s.get("resp_" + strconv.Itoa(i)); ok != want || err != nil {
				t.Errorf("dir %q: resp_%d kept %v (%v), want %v", dir, i, ok, err, want)
			}
		}
		// A large one pushes out what no longer fits beside it.
		if err := s.put("resp_big", testRecord(strings.Repeat("y", 250))); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.get("resp_2"); ok || s.Len() != 2 {
			t.Errorf("dir %q: bytes bound: %d kept", dir, s.Len())
		}
		if err := s.put("resp_huge", testRecord(strings.Repeat("z", 500))); err == nil {
			t.Errorf("dir %q: a record over the whole bound was kept", dir)
		}
		if dir != "" {
			entries, _ := os.ReadDir(dir)
			if len(entries) != 2 {
				t.Errorf("the directory holds %d files, want 2", len(entries))
			}
		}
		for _, id := range []string{"../resp_3", "resp_3/../resp_4", "resp_3.json", "", "resp_"} {
			if err := s.put(id, testRecord("x")); err == nil {
				t.Errorf("put %q was accepted", id)
			}
			if _, ok, err := s.get(id); ok || err != nil {
				t.Errorf("get %q: %v %v", id, ok, err)
			}
		}
		if ok, err := s.delete("resp_4"); !ok || err != nil {
			t.Errorf("delete: %v %v", ok, err)
		}
		if ok, _ := s.delete("resp_4"); ok {
			t.Error("deleted twice")
		}
	}
}

// TestStoreReopen: a store over a directory keeps the responses already in
// it, oldest first, and clears the files a crash left half-written.
func TestStoreReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := NewStore(StoreOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.put("resp_"+strconv.Itoa(i), testRecord("r"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		// Modification times tell the order after a restart.
		old := time.Now().Add(time.Duration(i-10) * time.Minute)
		os.Chtimes(filepath.Join(dir, "resp_"+strconv.Itoa(i)+".json"), old, old)
	}
	os.WriteFile(filepath.Join(dir, "resp_9.json.tmp"), []byte("{"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a response"), 0o644)
	s2, err := NewStore(StoreOptions{Dir: dir, MaxResponses: 2})
	if err != nil {
		t.Fatal(err)
	}
	if s2.Len() != 2 {
		t.Fatalf("%d kept, want 2", s2.Len())
	}
	if _, ok, _ := s2.get("resp_0"); ok {
		t.Error("the oldest was kept")
	}
	rec, ok, err := s2.get("resp_2")
	if !ok || err != nil || string(rec.Response) != `{"text":"r2"}` {
		t.Errorf("%v %v %s", ok, err, rec.Response)
	}
	if _, err := os.Stat(filepath.Join(dir, "resp_9.json.tmp")); !os.IsNotExist(err) {
		t.Error("a half-written file was left")
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Error("a file that is no response was removed")
	}
}
