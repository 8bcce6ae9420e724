package neuralfield

import (
	"encoding/binary"
	"hash/crc32"
)

// The on-disk format of a segment file:
//
//	[0, headerBytes)                      header (below), the rest zeros
//	[headerBytes, headerBytes+tableBytes)  slots entries of entryBytes
//	then slots pages of pageStride bytes
//
// header: magic (8) | version (4) | pageStride (4) | slots (4) | segment
// number (4) | zeros | CRC-32C of bytes [0, 60) at 60.
//
// entry: magic (4) | flags (4, zero) | sequence (8) | key (32) | length (4)
// | page CRC-32C (4, of the key and the page's bytes) | zeros | CRC-32C of
// bytes [0, 124) at 124. An entry whose magic is not entryMagic is an empty
// slot.

const (
	headerBytes  = 4096
	entryBytes   = 128
	pageAlign    = 4096
	formatVer    = 1
	entryMagic   = 0x3150464e // "NFP1"
	headerCRCAt  = 60
	entryCRCAt   = 124
	maxPageBytes = 1 << 30
	maxSlots     = 1 << 24
)

var segMagic = [8]byte{'N', 'F', 'S', 'E', 'G', 0, 0, 1}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// pageChecksum is a page's CRC-32C, of its key and then its bytes: an entry
// whose key was changed no longer matches its page.
func pageChecksum(key *Key, page []byte) uint32 {
	return crc32.Update(crc32.Checksum(key[:], castagnoli), castagnoli, page)
}

// header is a segment file's header.
type header struct {
	pageStride, slots, segment uint32
}

func (h header) put(b []byte) {
	clear(b[:headerBytes])
	copy(b, segMagic[:])
	le := binary.LittleEndian
	le.PutUint32(b[8:], formatVer)
	le.PutUint32(b[12:], h.pageStride)
	le.PutUint32(b[16:], h.slots)
	le.PutUint32(b[20:], h.segment)
	le.PutUint32(b[headerCRCAt:], checksum(b[:headerCRCAt]))
}

// parseHeader reads a segment header; ok is false for anything that is not
// a whole, valid one.
func parseHeader(b []byte) (h header, ok bool) {
	if len(b) < headerBytes || [8]byte(b[:8]) != segMagic {
		return h, false
	}
	le := binary.LittleEndian
	if le.Uint32(b[headerCRCAt:]) != checksum(b[:headerCRCAt]) || le.Uint32(b[8:]) != formatVer {
		return h, false
	}
	h = header{pageStride: le.Uint32(b[12:]), slots: le.Uint32(b[16:]), segment: le.Uint32(b[20:])}
	if h.pageStride == 0 || h.pageStride%pageAlign != 0 || h.pageStride > maxPageBytes || h.slots == 0 || h.slots > maxSlots {
		return h, false
	}
	return h, true
}

// entry is a page's entry.
type entry struct {
	seq    uint64
	key    Key
	length uint32
	crc    uint32
}

func (e *entry) put(b []byte) {
	clear(b[:entryBytes])
	le := binary.LittleEndian
	le.PutUint32(b[0:], entryMagic)
	le.PutUint64(b[8:], e.seq)
	copy(b[16:48], e.key[:])
	le.PutUint32(b[48:], e.length)
	le.PutUint32(b[52:], e.crc)
	le.PutUint32(b[entryCRCAt:], checksum(b[:entryCRCAt]))
}

// parseEntry reads a page's entry; ok is false for an empty slot or
// anything that is not a whole, valid entry of a page of at most maxLen
// bytes.
func parseEntry(b []byte, maxLen uint32) (e entry, ok bool) {
	if len(b) < entryBytes {
		return e, false
	}
	le := binary.LittleEndian
	if le.Uint32(b[0:]) != entryMagic || le.Uint32(b[entryCRCAt:]) != checksum(b[:entryCRCAt]) || le.Uint32(b[4:]) != 0 {
		return e, false
	}
	e = entry{seq: le.Uint64(b[8:]), key: Key(b[16:48]), length: le.Uint32(b[48:]), crc: le.Uint32(b[52:])}
	if e.length == 0 || e.length > maxLen {
		return e, false
	}
	return e, true
}

// geometry is the layout of every segment of a store.
type geometry struct {
	pageStride int64 // a page's bytes, PageBytes rounded up to pageAlign
	slots      int64 // pages a segment holds
}

func (g geometry) tableBytes() int64 {
	return (g.slots*entryBytes + pageAlign - 1) / pageAlign * pageAlign
}
func (g geometry) pagesAt() int64   { return headerBytes + g.tableBytes() }
func (g geometry) fileBytes() int64 { return g.pagesAt() + g.slots*g.pageStride }

// geometryFor fits pages of pageBytes in segments of at most segBytes.
func geometryFor(pageBytes, segBytes int64) geometry {
	g := geometry{pageStride: (pageBytes + pageAlign - 1) / pageAlign * pageAlign}
	g.slots = min(maxSlots, max(0, (segBytes-headerBytes)/(g.pageStride+entryBytes)))
	for g.slots > 0 && g.fileBytes() > segBytes {
		g.slots--
	}
	return g
}
