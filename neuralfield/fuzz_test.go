package neuralfield

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// fuzzOptions is a store of two small pages in one 16 KiB segment.
func fuzzOptions(dir string) Options {
	g := geometryFor(100, 4*pageAlign)
	return Options{Dir: dir, PageBytes: 100, MaxBytes: g.fileBytes(), QueuePages: 1}
}

// fuzzSeeds are segment files to start from: a valid one with two pages,
// then it truncated, with bit flips in its header, an entry and a page,
// and with an entry moved to another key.
func fuzzSeeds(f *testing.F) {
	dir := f.TempDir()
	s, err := Open(fuzzOptions(dir))
	if err != nil {
		f.Fatal(err)
	}
	s.Put(keyOf(1), pageOf(1, 100))
	s.Put(keyOf(2), pageOf(2, 60))
	flush(f, s)
	s.Close()
	valid, err := os.ReadFile(filepath.Join(dir, segName(0)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(valid[:headerBytes+200])
	for _, at := range []int{12, headerBytes + 30, headerBytes + entryBytes + 50, 2*pageAlign + 7} {
		b := bytes.Clone(valid)
		b[at] ^= 0x10
		f.Add(b)
	}
	b := bytes.Clone(valid)
	k := keyOf(3)
	copy(b[headerBytes+16:], k[:])
	f.Add(b)
}

// FuzzSegmentFile opens a store whose only segment file is the fuzzer's
// bytes (cut or padded to the segment's size, and as they are) and reads
// every page it indexes: nothing may panic or fault, a page served must
// pass its checksum (Get checks it), and the files must stay within
// MaxBytes. Run it with go test ./neuralfield -fuzz FuzzSegmentFile.
func FuzzSegmentFile(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		o := fuzzOptions(dir)
		for _, exact := range []bool{true, false} {
			file := data
			if exact {
				file = make([]byte, o.MaxBytes)
				copy(file, data)
			}
			if err := os.WriteFile(filepath.Join(dir, segName(0)), file, 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := Open(o)
			if err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			var keys []Key
			for k := range s.index {
				keys = append(keys, k)
			}
			s.mu.Unlock()
			s.Prefetch(keys...)
			for _, k := range keys {
				_ = s.Get(k, func(p []byte) error {
					if len(p) == 0 || len(p) > o.PageBytes {
						t.Fatalf("a page of %d bytes served", len(p))
					}
					return nil
				})
			}
			// A write after a hostile start must land whole.
			s.Put(keyOf(5), pageOf(5, 90))
			flush(t, s)
			got, err := get(s, keyOf(5))
			if err == nil && !bytes.Equal(got, pageOf(5, 90)) {
				t.Fatal("a page written after opening reads back wrong")
			}
			st := s.Stats()
			s.Close()
			if st.Pages > st.Slots || st.Bytes > o.MaxBytes {
				t.Fatalf("stats %+v", st)
			}
			fi, err := os.Stat(filepath.Join(dir, segName(0)))
			if err != nil || fi.Size() > o.MaxBytes {
				t.Fatalf("the segment file is %d bytes (%v)", fi.Size(), err)
			}
		}
	})
}

// FuzzEntry parses hostile entries and headers: no panic, and what parses
// writes back to the same bytes.
func FuzzEntry(f *testing.F) {
	var b [entryBytes]byte
	e := entry{seq: 7, key: keyOf(1), length: 50, crc: 12345}
	e.put(b[:])
	f.Add(b[:])
	var h [headerBytes]byte
	header{pageStride: 4096, slots: 3, segment: 1}.put(h[:])
	f.Add(h[:])
	f.Fuzz(func(t *testing.T, data []byte) {
		if e, ok := parseEntry(data, 1<<20); ok {
			var out [entryBytes]byte
			e.put(out[:])
			if e2, ok := parseEntry(out[:], 1<<20); !ok || e2 != e {
				t.Fatalf("entry %+v does not round-trip", e)
			}
		}
		if h, ok := parseHeader(data); ok {
			var out [headerBytes]byte
			h.put(out[:])
			if h2, ok := parseHeader(out[:]); !ok || h2 != h {
				t.Fatalf("header %+v does not round-trip", h)
			}
		}
	})
}
