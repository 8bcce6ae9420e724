package sona

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Store persists a router's trajectories and feedback as opaque records, in
// order. The router encodes them; a store only keeps them safe: a file
// (FileStore), or later the neuralfield page store.
type Store interface {
	// Load calls fn with every record held, in the order appended.
	Load(fn func(rec []byte) error) error
	// Append adds one record.
	Append(rec []byte) error
	// Compact replaces every record with recs at once: after a crash the
	// store holds either the old records or the new ones.
	Compact(recs [][]byte) error
	// Records is how many records the store holds.
	Records() int
	// Close writes out what is buffered and releases the store.
	Close() error
}

// File store format: a header (magic and version), then records, each its
// payload's length and CRC-32C, then the payload.
const (
	fileMagic   = "RUVLSONA"
	fileVersion = 1
	headerSize  = len(fileMagic) + 4
	// maxRecordBytes bounds one record, so that a corrupt length cannot
	// make Load allocate without bound.
	maxRecordBytes = 1 << 20
	recordHeader   = 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// FileStore is a Store in one append-only file. A crash (even kill -9)
// mid-append leaves a torn last record, which the next open finds by its
// checksum and cuts off; a compaction writes a new file and renames it into
// place. A file that is not a store at all is moved aside, never
// overwritten.
type FileStore struct {
	path    string
	mu      sync.Mutex
	f       *os.File
	records int
	// Repaired says what opening the file had to do: "" when nothing.
	Repaired string
}

// OpenFileStore opens the store at path, creating it when it does not
// exist.
func OpenFileStore(path string) (*FileStore, error) {
	s := &FileStore{path: path}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sona: store: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("sona: store: %w", err)
	}
	if st.Size() > 0 && !hasHeader(f) {
		f.Close()
		aside := path + ".bad-" + strconv.FormatInt(time.Now().Unix(), 10)
		if err := os.Rename(path, aside); err != nil {
			return nil, fmt.Errorf("sona: store %s is not a router store and cannot be moved aside: %w", path, err)
		}
		s.Repaired = "the file was not a router store; it was moved to " + aside
		if f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
			return nil, fmt.Errorf("sona: store: %w", err)
		}
		st, _ = f.Stat()
	}
	if st.Size() == 0 {
		if _, err := f.Write(header()); err != nil {
			f.Close()
			return nil, fmt.Errorf("sona: store: %w", err)
		}
	}
	s.f = f
	end, n, torn, err := s.scan(nil)
	if err != nil {
		f.Close()
		return nil, err
	}
	s.records = n
	if st, err := f.Stat(); err == nil && st.Size() > end {
		if !torn {
			// Damage before the end: keep the whole file aside, so that
			// nothing stored is lost, before cutting it.
			aside := path + ".bad-" + strconv.FormatInt(time.Now().Unix(), 10)
			if err := copyFile(path, aside); err != nil {
				f.Close()
				return nil, fmt.Errorf("sona: store %s is damaged after %d records and cannot be copied aside: %w", path, n, err)
			}
			s.Repaired = fmt.Sprintf("a damaged record after %d records; the file was copied to %s and cut there", n, aside)
		} else {
			s.Repaired = fmt.Sprintf("a torn last record (%d bytes) after %d records was cut off", st.Size()-end, n)
		}
		if err := f.Truncate(end); err != nil {
			f.Close()
			return nil, fmt.Errorf("sona: store: cutting a damaged tail: %w", err)
		}
	}
	if _, err := f.Seek(end, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("sona: store: %w", err)
	}
	return s, nil
}

// copyFile copies src to a new file dst.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return errors.Join(out.Sync(), out.Close())
}

func header() []byte {
	b := make([]byte, headerSize)
	copy(b, fileMagic)
	binary.LittleEndian.PutUint32(b[len(fileMagic):], fileVersion)
	return b
}

func hasHeader(f *os.File) bool {
	b := make([]byte, headerSize)
	if _, err := f.ReadAt(b, 0); err != nil {
		return false
	}
	return string(b[:len(fileMagic)]) == fileMagic && binary.LittleEndian.Uint32(b[len(fileMagic):]) == fileVersion
}

// scan reads the records from the start, calling fn with each when it is
// not nil, and returns where the whole, verified records end, how many
// there are, and whether what follows is a torn last record (one whose
// bytes end before its length says: an append a crash cut short) rather
// than damage.
func (s *FileStore) scan(fn func(rec []byte) error) (end int64, n int, torn bool, err error) {
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, int64(headerSize), 1<<62), 1<<16)
	end = int64(headerSize)
	var hdr [recordHeader]byte
	var buf []byte
	for {
		if k, err := io.ReadFull(r, hdr[:]); err != nil {
			return end, n, k < recordHeader, nil
		}
		size := binary.LittleEndian.Uint32(hdr[:4])
		if size > maxRecordBytes {
			return end, n, false, nil
		}
		if cap(buf) < int(size) {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		if _, err := io.ReadFull(r, buf); err != nil {
			return end, n, true, nil
		}
		if crc32.Checksum(buf, castagnoli) != binary.LittleEndian.Uint32(hdr[4:]) {
			// A torn append can leave a whole-looking last record whose
			// bytes were never all written: damage only if more follows.
			_, err := r.Peek(1)
			return end, n, err != nil, nil
		}
		if fn != nil {
			if err := fn(buf); err != nil {
				return end, n, false, err
			}
		}
		end += recordHeader + int64(size)
		n++
	}
}

// Load calls fn with every record.
func (s *FileStore) Load(fn func(rec []byte) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return os.ErrClosed
	}
	_, _, _, err := s.scan(fn)
	return err
}

// frame is rec with its length and checksum in front.
func frame(rec []byte) []byte {
	b := make([]byte, recordHeader+len(rec))
	binary.LittleEndian.PutUint32(b, uint32(len(rec)))
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(rec, castagnoli))
	copy(b[recordHeader:], rec)
	return b
}

// Append writes one record in one write, so that a crash leaves it whole or
// torn at the end, where the next open cuts it off.
func (s *FileStore) Append(rec []byte) error {
	if len(rec) > maxRecordBytes {
		return fmt.Errorf("sona: store: a record of %d bytes is larger than %d", len(rec), maxRecordBytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return os.ErrClosed
	}
	if _, err := s.f.Write(frame(rec)); err != nil {
		return fmt.Errorf("sona: store: %w", err)
	}
	s.records++
	return nil
}

// Compact writes recs to a new file, syncs it and renames it over the old
// one.
func (s *FileStore) Compact(recs [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return os.ErrClosed
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), filepath.Base(s.path)+".compact-*")
	if err != nil {
		return fmt.Errorf("sona: store: compacting: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 1<<16)
	w.Write(header())
	for _, rec := range recs {
		if len(rec) > maxRecordBytes {
			return fmt.Errorf("sona: store: a record of %d bytes is larger than %d", len(rec), maxRecordBytes)
		}
		w.Write(frame(rec))
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("sona: store: compacting: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("sona: store: compacting: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("sona: store: compacting: %w", err)
	}
	ok = true
	syncDir(filepath.Dir(s.path))
	s.f.Close()
	s.f = tmp
	s.records = len(recs)
	return nil
}

// syncDir makes a rename in dir durable; where directories cannot be
// synced, the rename is still atomic.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// Records is how many records the store holds.
func (s *FileStore) Records() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.records
}

// Close syncs and closes the file.
func (s *FileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := errors.Join(s.f.Sync(), s.f.Close())
	s.f = nil
	return err
}
