// Package neuralfield is a memory-mapped, crash-safe page store: fixed-size
// pages in a few large files under one directory, each page found by a
// 32-byte key and checked by a checksum, the least recently used evicted
// when the store is full. kvcache spills KV blocks into it so that prefixes
// outlive RAM limits, restarts and crashes. It imports nothing of the
// project.
//
// # Files and crash safety
//
// A store is a directory of segment files seg-NNNN.nf, each a header, a
// table of 128-byte page entries (key, length, write sequence, the CRC-32C
// of the key and the page, and the entry's own CRC-32C) and the pages,
// mapped shared. A
// page is written in an order that leaves nothing half-valid after a kill
// at any instant: its entry is cleared, the page is copied, then the entry
// is written whole. At Open the index is rebuilt from the entry tables: an
// entry that fails its own checksum, or that does not fit the geometry, is
// dropped. Every read checks the page against its CRC before the caller
// sees it; a page that fails is dropped and counted, never served. A kill
// -9 loses only pages still queued for writing; after a power cut pages
// whose writes the kernel had not flushed fail their checksums and are
// dropped the same way.
//
// The directory is locked (flock) while a store is open, so two processes
// never write one store; the lock goes with the process, however it ends.
// The files never exceed Options.MaxBytes together: they are made at their
// full size (sparse) when the store is created.
package neuralfield
