package neuralfield

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
)

// Key names a page: the caller's hash of whatever the page is about (for
// KV blocks, the chain of tokens up to and including the block, and the
// model, adapter and precision that computed it). Use a cryptographic hash:
// the store trusts a key's page to be the page of that key.
type Key [32]byte

// Errors of a Store, for errors.Is.
var (
	// ErrNotFound means no page has the key.
	ErrNotFound = errors.New("neuralfield: no page of that key")
	// ErrChecksum means the page failed its checksum; it has been dropped.
	ErrChecksum = errors.New("neuralfield: page failed its checksum")
	// ErrInUse means another process has the store open.
	ErrInUse = errors.New("neuralfield: the store is open in another process")
	// ErrClosed means the store was used after Close.
	ErrClosed = errors.New("neuralfield: store is closed")
)

// Options configure a Store. Dir, PageBytes and MaxBytes are required.
type Options struct {
	// Dir is the store's directory, made if missing.
	Dir string
	// PageBytes is the largest payload of a page; pages take PageBytes
	// rounded up to 4 KiB. A store keeps its page size: opening it with
	// another remakes its files, empty.
	PageBytes int
	// MaxBytes is the most the store's files take together.
	MaxBytes int64
	// SegmentBytes is the largest size of one file; 0 means 1 GiB (or
	// MaxBytes, if smaller).
	SegmentBytes int64
	// QueuePages is how many pages Put may queue for the writer; 0 means
	// 16. A Put that finds the queue full drops its page.
	QueuePages int
}

// DefaultSegmentBytes is Options.SegmentBytes when it is 0.
const DefaultSegmentBytes = 1 << 30

// Stats is a store's state and its counters since Open.
type Stats struct {
	Pages     int   // pages held
	Slots     int   // pages the store can hold
	Bytes     int64 // the files' size: what the store takes on disk at most
	PageBytes int64 // the bytes of one page slot
	// Puts counts pages handed to Put, Written those on disk, Dropped those
	// Put could not queue or the writer found no slot for, Duplicates those
	// whose key was stored already.
	Puts, Written, Dropped, Duplicates uint64
	// Gets counts pages served, Misses keys not found, ChecksumFailures
	// pages dropped because they failed their checksum, Evictions pages
	// dropped for room, least recently used first.
	Gets, Misses, ChecksumFailures, Evictions uint64
	// Queued is the pages waiting for the writer.
	Queued int
}

// Store is an open store. Its methods are safe for concurrent use; pages
// are written by a goroutine of the store, behind Put.
type Store struct {
	opt  Options
	geo  geometry
	lock *os.File
	segs []segment

	mu    sync.Mutex
	index map[Key]int32
	slots []slotMeta
	// The valid slots in order of use, most recent first: a list linked
	// through prev and next, whose sentinel is index len(slots).
	prev, next []int32
	free       []int32 // empty slots
	seq        uint64  // the next write's sequence
	closed     bool
	st         Stats

	queue, spare chan *item
	done         chan struct{}
}

// segment is one mapped file.
type segment struct {
	f    *os.File
	data []byte
}

const (
	slotFree uint8 = iota
	slotValid
	slotWriting
	slotDropped // dropped while readers held it: freed when the last one is done
)

type slotMeta struct {
	key    Key
	length uint32
	crc    uint32
	seq    uint64
	pins   int32
	state  uint8
}

// item is a page waiting for the writer.
type item struct {
	key Key
	buf []byte
	n   int
}

// Open opens the store in o.Dir, making its files when they are missing or
// not of its geometry, and rebuilds its index from the files' entries.
func Open(o Options) (*Store, error) {
	if o.Dir == "" || o.PageBytes <= 0 || o.PageBytes > maxPageBytes || o.MaxBytes <= 0 || o.SegmentBytes < 0 || o.QueuePages < 0 {
		return nil, fmt.Errorf("neuralfield: a store needs a directory, a page size in 1 … %d and a positive size (got %q, %d, %d)",
			maxPageBytes, o.Dir, o.PageBytes, o.MaxBytes)
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.QueuePages == 0 {
		o.QueuePages = 16
	}
	geo := geometryFor(int64(o.PageBytes), min(o.SegmentBytes, o.MaxBytes))
	if geo.slots == 0 {
		return nil, fmt.Errorf("neuralfield: %d bytes hold no page of %d bytes", min(o.SegmentBytes, o.MaxBytes), o.PageBytes)
	}
	nseg := o.MaxBytes / geo.fileBytes()
	if nseg*geo.slots > 1<<31-2 {
		nseg = (1<<31 - 2) / geo.slots
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("neuralfield: %w", err)
	}
	lock, err := lockDir(o.Dir)
	if err != nil {
		return nil, err
	}
	s := &Store{opt: o, geo: geo, lock: lock, index: map[Key]int32{}}
	fail := func(err error) (*Store, error) {
		s.unmap()
		unlockDir(lock)
		return nil, err
	}
	for i := range int(nseg) {
		seg, err := openSegment(filepath.Join(o.Dir, segName(i)), geo, uint32(i))
		if err != nil {
			return fail(err)
		}
		s.segs = append(s.segs, seg)
	}
	if err := removeExtraSegments(o.Dir, int(nseg)); err != nil {
		return fail(err)
	}
	if err := s.rebuild(); err != nil {
		return fail(err)
	}
	s.queue = make(chan *item, o.QueuePages)
	s.spare = make(chan *item, o.QueuePages)
	for range o.QueuePages {
		s.spare <- &item{buf: make([]byte, o.PageBytes)}
	}
	s.done = make(chan struct{})
	go s.writer()
	return s, nil
}

func segName(i int) string { return fmt.Sprintf("seg-%04d.nf", i) }

// removeExtraSegments removes the segment files numbered n and up, left by
// a store that was larger.
func removeExtraSegments(dir string, n int) error {
	names, err := filepath.Glob(filepath.Join(dir, "seg-*.nf"))
	if err != nil {
		return err
	}
	for _, p := range names {
		var i int
		if _, err := fmt.Sscanf(filepath.Base(p), "seg-%04d.nf", &i); err == nil && i >= n && filepath.Base(p) == segName(i) {
			if err := os.Remove(p); err != nil {
				return fmt.Errorf("neuralfield: %w", err)
			}
		}
	}
	return nil
}

// rebuild makes the index from the segments' entries: every entry that is
// whole and fits the geometry is a page; of two pages of one key the later
// write wins. The order of use starts as the order of writing.
func (s *Store) rebuild() error {
	n := len(s.segs) * int(s.geo.slots)
	s.slots = make([]slotMeta, n)
	s.prev, s.next = make([]int32, n+1), make([]int32, n+1)
	s.prev[n], s.next[n] = int32(n), int32(n)
	var valid []int32
	err := faultSafe(func() {
		for i := range int32(n) {
			e, ok := parseEntry(s.entryBytes(i), uint32(s.opt.PageBytes))
			if !ok {
				continue
			}
			if j, dup := s.index[e.key]; dup {
				if s.slots[j].seq >= e.seq {
					continue
				}
				s.slots[j].state = slotFree
			}
			s.slots[i] = slotMeta{key: e.key, length: e.length, crc: e.crc, seq: e.seq, state: slotValid}
			s.index[e.key] = i
			s.seq = max(s.seq, e.seq+1)
		}
	})
	if err != nil {
		return err
	}
	for i := range int32(n) {
		if s.slots[i].state == slotValid {
			valid = append(valid, i)
		} else {
			s.free = append(s.free, i)
		}
	}
	slices.SortFunc(valid, func(a, b int32) int {
		switch x, y := s.slots[a].seq, s.slots[b].seq; {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	for _, i := range valid {
		s.pushFront(i)
	}
	// Free slots taken lowest first.
	slices.Reverse(s.free)
	s.st.Pages = len(valid)
	return nil
}

// entryBytes and pageBytes are slot i's entry and page in their mapping.
func (s *Store) entryBytes(i int32) []byte {
	seg, j := s.locate(i)
	at := headerBytes + j*entryBytes
	return s.segs[seg].data[at : at+entryBytes]
}

func (s *Store) pageBytes(i int32) []byte {
	seg, j := s.locate(i)
	at := s.geo.pagesAt() + j*s.geo.pageStride
	return s.segs[seg].data[at : at+s.geo.pageStride]
}

func (s *Store) locate(i int32) (seg int, slot int64) {
	return int(int64(i) / s.geo.slots), int64(i) % s.geo.slots
}

// The order of use: pushFront makes slot i the most recent, unlink takes
// it out.
func (s *Store) pushFront(i int32) {
	h := int32(len(s.slots))
	n := s.next[h]
	s.prev[i], s.next[i] = h, n
	s.next[h], s.prev[n] = i, i
}

func (s *Store) unlink(i int32) {
	p, n := s.prev[i], s.next[i]
	s.next[p], s.prev[n] = n, p
}

// Put queues a page of key holding the concatenation of parts for the
// writer and reports whether it did: a page of that key already stored,
// an empty or too large one, a full queue or a closed store drop it. Put
// copies the parts and never blocks on the disk.
func (s *Store) Put(key Key, parts ...[]byte) bool {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	s.mu.Lock()
	s.st.Puts++
	_, have := s.index[key]
	closed := s.closed
	if have {
		s.st.Duplicates++
	}
	s.mu.Unlock()
	if have || closed || n == 0 || n > s.opt.PageBytes {
		return false
	}
	var it *item
	select {
	case it = <-s.spare:
	default:
		s.mu.Lock()
		s.st.Dropped++
		s.mu.Unlock()
		return false
	}
	it.key, it.n = key, 0
	for _, p := range parts {
		it.n += copy(it.buf[it.n:], p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.spare <- it
		return false
	}
	s.queue <- it // never blocks: the queue holds every item
	return true
}

// writer writes the queued pages until Close.
func (s *Store) writer() {
	defer close(s.done)
	for it := range s.queue {
		s.write(it)
		s.spare <- it
	}
}

// write stores one page: it takes a slot (an empty one, else the least
// recently used one nobody reads), clears its entry, copies the page, and
// writes the entry whole with the page's checksum, so that at any instant
// the slot holds a valid page or none.
func (s *Store) write(it *item) {
	s.mu.Lock()
	if _, have := s.index[it.key]; have {
		s.st.Duplicates++
		s.mu.Unlock()
		return
	}
	i := s.take()
	if i < 0 {
		s.st.Dropped++
		s.mu.Unlock()
		return
	}
	e := entry{seq: s.seq, key: it.key, length: uint32(it.n), crc: pageChecksum(&it.key, it.buf[:it.n])}
	s.seq++
	s.mu.Unlock()
	err := faultSafe(func() {
		eb := s.entryBytes(i)
		clear(eb[:4]) // the magic: the slot is empty from here
		copy(s.pageBytes(i), it.buf[:it.n])
		e.put(eb)
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.slots[i].state = slotFree
		s.free = append(s.free, i)
		s.st.Dropped++
		return
	}
	s.slots[i] = slotMeta{key: e.key, length: e.length, crc: e.crc, seq: e.seq, state: slotValid}
	s.index[e.key] = i
	s.pushFront(i)
	s.st.Pages++
	s.st.Written++
}

// take returns a slot for a new page, marked writing: an empty one, else
// the least recently used page that nobody is reading, evicted. It returns
// -1 when there is none. The caller holds mu.
func (s *Store) take() int32 {
	if n := len(s.free); n > 0 {
		i := s.free[n-1]
		s.free = s.free[:n-1]
		s.slots[i].state = slotWriting
		return i
	}
	h := int32(len(s.slots))
	for i := s.prev[h]; i != h; i = s.prev[i] {
		if m := &s.slots[i]; m.pins == 0 {
			s.unlink(i)
			delete(s.index, m.key)
			m.state = slotWriting
			s.st.Pages--
			s.st.Evictions++
			return i
		}
	}
	return -1
}

// Has reports whether a page of key is stored (it may still fail its
// checksum when read).
func (s *Store) Has(key Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.index[key]
	return ok
}

// Get checks the page of key against its checksum and hands it to fill,
// which must copy what it needs before it returns; the page is then the
// most recently used. A page that fails its checksum is dropped and Get
// returns ErrChecksum without calling fill. fill's error is returned.
func (s *Store) Get(key Key, fill func(page []byte) error) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	i, ok := s.index[key]
	if !ok {
		s.st.Misses++
		s.mu.Unlock()
		return ErrNotFound
	}
	m := &s.slots[i]
	m.pins++
	length, crc := m.length, m.crc
	s.mu.Unlock()

	good := false
	var ferr error
	err := faultSafe(func() {
		page := s.pageBytes(i)[:length]
		if good = pageChecksum(&key, page) == crc; good {
			ferr = fill(page)
		}
	})

	s.mu.Lock()
	defer s.mu.Unlock()
	m.pins--
	switch {
	case err != nil || !good:
		s.st.ChecksumFailures++
		s.drop(i)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrChecksum, err)
		}
		return ErrChecksum
	case m.state == slotDropped:
		s.release(i)
		return ferr
	}
	s.st.Gets++
	s.unlink(i)
	s.pushFront(i)
	return ferr
}

// drop takes slot i's page out of the store and clears its entry on disk;
// a slot others still read is freed when the last of them is done. The
// caller holds mu.
func (s *Store) drop(i int32) {
	m := &s.slots[i]
	if m.state != slotValid {
		s.release(i)
		return
	}
	s.unlink(i)
	delete(s.index, m.key)
	s.st.Pages--
	_ = faultSafe(func() { clear(s.entryBytes(i)[:4]) })
	m.state = slotDropped
	s.release(i)
}

// release frees a dropped slot once nobody reads it.
func (s *Store) release(i int32) {
	if m := &s.slots[i]; m.state == slotDropped && m.pins == 0 {
		m.state = slotFree
		s.free = append(s.free, i)
	}
}

// Touch makes the pages of keys the most recently used, as a Get would:
// for pages whose content the caller is using from a copy of its own (KV
// blocks still in RAM), so that the store keeps what is in use.
func (s *Store) Touch(keys ...Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if i, ok := s.index[k]; ok && s.slots[i].state == slotValid {
			s.unlink(i)
			s.pushFront(i)
		}
	}
}

// Prefetch asks the kernel to read the pages of keys ahead (madvise
// WILLNEED), so that a Get soon after finds them in memory.
func (s *Store) Prefetch(keys ...Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for _, k := range keys {
		if i, ok := s.index[k]; ok {
			adviseWillNeed(s.pageBytes(i)[:s.slots[i].length])
		}
	}
}

// PageBytes is the largest payload of a page (Options.PageBytes).
func (s *Store) PageBytes() int { return s.opt.PageBytes }

// Stats reports the store's state.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Slots = len(s.slots)
	st.Bytes = int64(len(s.segs)) * s.geo.fileBytes()
	st.PageBytes = s.geo.pageStride
	if s.queue != nil {
		st.Queued = len(s.queue)
	}
	return st
}

// Close writes the queued pages, unmaps the files and unlocks the
// directory. Put after Close drops its page; Get fails with ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.queue)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.unmap()
	unlockDir(s.lock)
	return err
}

func (s *Store) unmap() error {
	var first error
	for _, seg := range s.segs {
		if err := unmapFile(seg.data); err != nil && first == nil {
			first = err
		}
		if err := seg.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	s.segs = nil
	return first
}

// faultSafe runs f, turning a memory fault on the mapped files (a file cut
// short behind the store's back) into an error rather than a crash.
func faultSafe(f func()) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault {
				panic(r)
			}
			err = fmt.Errorf("neuralfield: memory fault on the store's files: %v", r)
		}
	}()
	f()
	return nil
}
