package kvcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/ruvllm/ruvllm/kernels"
)

// A table's state is its tokens and their keys and values written out, to
// be read back into a table of a pool of the same geometry later, in this
// process or another (llama-server's slot save and restore):
//
//	header   "RVKVSTAT", then little-endian uint32s: version, layers,
//	         kv heads, head dim, value head dim, element bytes (2: F16,
//	         4: F32), chunk positions, tokens
//	tokens   int32 each
//	chunks   for each run of chunk positions (the last may be shorter),
//	         for each layer: the keys (n, kv_heads, head_dim), then the
//	         values (n, kv_heads, head_dim_v) of its n positions
//
// Elements are F32 for an F32 pool and F16 otherwise: an F16 pool's keys
// and values round-trip exactly; a quantized pool writes each block's most
// exact form, and reading it back quantizes again as a prefill would.

const (
	stateMagic   = "RVKVSTAT"
	stateVersion = 1
	// stateHeader is the header's length in bytes.
	stateHeader = len(stateMagic) + 8*4
)

// ErrState wraps every problem with a state read back: not a state, another
// geometry, truncated.
var ErrState = errors.New("kvcache: bad state")

// stateElem is the bytes of one element the pool writes its state in.
func (p *Pool) stateElem() int {
	if p.opt.Type == F32 {
		return 4
	}
	return 2
}

// WriteState writes the table's tokens and their keys and values to w and
// returns the bytes written. It changes nothing.
func (t *BlockTable) WriteState(w io.Writer) (int64, error) {
	p := t.pool
	n := len(t.tokens)
	elem := p.stateElem()
	var written int64
	put := func(b []byte) error {
		m, err := w.Write(b)
		written += int64(m)
		return err
	}
	hdr := make([]byte, stateHeader, stateHeader+4*n)
	copy(hdr, stateMagic)
	for i, v := range []int{stateVersion, p.opt.Layers, p.opt.KVHeads, p.opt.HeadDim, p.opt.HeadDimV, elem, p.bt, n} {
		binary.LittleEndian.PutUint32(hdr[len(stateMagic)+4*i:], uint32(v))
	}
	for _, tok := range t.tokens {
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(tok))
	}
	if err := put(hdr); err != nil {
		return written, err
	}
	k := make([]float32, p.bt*p.kRow)
	v := make([]float32, p.bt*p.vRows)
	buf := make([]byte, elem*max(len(k), len(v)))
	for pos := 0; pos < n; pos += p.bt {
		m := min(p.bt, n-pos)
		for l := range p.opt.Layers {
			t.readRows(l, pos, m, k[:m*p.kRow], v[:m*p.vRows])
			for _, rows := range [][]float32{k[:m*p.kRow], v[:m*p.vRows]} {
				b := encodeElems(buf, rows, elem)
				if err := put(b); err != nil {
					return written, err
				}
			}
		}
	}
	return written, nil
}

// encodeElems writes x into buf as little-endian F16 (elem 2) or F32 and
// returns the bytes.
func encodeElems(buf []byte, x []float32, elem int) []byte {
	b := buf[:elem*len(x)]
	for i, f := range x {
		if elem == 4 {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
		} else {
			binary.LittleEndian.PutUint16(b[2*i:], kernels.FP32ToFP16(f))
		}
	}
	return b
}

// decodeElems reads little-endian F16 (elem 2) or F32 elements from b into x.
func decodeElems(x []float32, b []byte, elem int) {
	for i := range x {
		if elem == 4 {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		} else {
			x[i] = kernels.FP16ToFP32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	}
}

// readRows reads the keys k (n, kv_heads, head_dim) and values v (n,
// kv_heads, head_dim_v) of positions [pos, pos+n) in layer, widened to F32;
// a tiered block gives its most exact form.
func (t *BlockTable) readRows(layer, pos, n int, k, v []float32) {
	p := t.pool
	o := &p.opt
	for i := range n {
		b, off := t.Locate(pos + i)
		kr, vr := k[i*p.kRow:(i+1)*p.kRow], v[i*p.vRows:(i+1)*p.vRows]
		switch {
		case p.tier != nil:
			for h := range o.KVHeads {
				for c := range o.HeadDim {
					kr[h*o.HeadDim+c] = p.tierAt(b, layer, h, true, c, off)
				}
				for c := range o.HeadDimV {
					vr[h*o.HeadDimV+c] = p.tierAt(b, layer, h, false, off, c)
				}
			}
		case o.Type == F16:
			keys, vals := p.KeysF16(b, layer), p.ValuesF16(b, layer)
			for h := range o.KVHeads {
				at := (h*p.bt + off) * o.HeadDim
				kernels.FP16ToFP32Row(keys[at:at+o.HeadDim], kr[h*o.HeadDim:(h+1)*o.HeadDim])
			}
			for r := range p.vRows {
				vr[r] = kernels.FP16ToFP32(vals[r*p.bt+off])
			}
		default:
			keys, vals := p.KeysF32(b, layer), p.ValuesF32(b, layer)
			for h := range o.KVHeads {
				at := (h*p.bt + off) * o.HeadDim
				copy(kr[h*o.HeadDim:(h+1)*o.HeadDim], keys[at:at+o.HeadDim])
			}
			for r := range p.vRows {
				vr[r] = vals[r*p.bt+off]
			}
		}
	}
}

// ReadState empties the table and fills it from a state WriteState wrote
// from a pool of the same geometry (layers, kv heads, head dims), of any
// precision: it appends the tokens and stores their keys and values a
// chunk at a time, as forward passes would, committing the blocks they
// fill. It returns the tokens restored and the bytes read. On an error
// (wrapping ErrState for a state that does not fit, ErrTableFull or
// ErrPoolFull for one that does not fit now) the table is left empty.
func (t *BlockTable) ReadState(r io.Reader) (tokens int, read int64, err error) {
	t.Release()
	defer func() {
		if err != nil {
			t.Release()
		}
	}()
	p := t.pool
	get := func(b []byte) error {
		m, err := io.ReadFull(r, b)
		read += int64(m)
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: it ends after %d bytes", ErrState, read)
		}
		return err
	}
	hdr := make([]byte, stateHeader)
	if err := get(hdr); err != nil {
		return 0, read, err
	}
	if string(hdr[:len(stateMagic)]) != stateMagic {
		return 0, read, fmt.Errorf("%w: not a KV state", ErrState)
	}
	var f [8]int
	for i := range f {
		f[i] = int(binary.LittleEndian.Uint32(hdr[len(stateMagic)+4*i:]))
	}
	version, layers, heads, hd, hdv, elem, chunk, n := f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]
	switch {
	case version != stateVersion:
		return 0, read, fmt.Errorf("%w: version %d, want %d", ErrState, version, stateVersion)
	case layers != p.opt.Layers || heads != p.opt.KVHeads || hd != p.opt.HeadDim || hdv != p.opt.HeadDimV:
		return 0, read, fmt.Errorf("%w: it holds %d layers of %d kv heads of %d/%d, this cache %d of %d of %d/%d",
			ErrState, layers, heads, hd, hdv, p.opt.Layers, p.opt.KVHeads, p.opt.HeadDim, p.opt.HeadDimV)
	case elem != 2 && elem != 4:
		return 0, read, fmt.Errorf("%w: element size %d", ErrState, elem)
	case chunk < 1 || chunk > maxBlockTokens:
		return 0, read, fmt.Errorf("%w: chunk of %d positions", ErrState, chunk)
	case n > t.maxLen:
		return 0, read, fmt.Errorf("%w: %d tokens do not fit a table of %d", ErrTableFull, n, t.maxLen)
	}
	tb := make([]byte, 4*n)
	if err := get(tb); err != nil {
		return 0, read, err
	}
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32(binary.LittleEndian.Uint32(tb[4*i:]))
	}
	k := make([]float32, chunk*p.kRow)
	v := make([]float32, chunk*p.vRows)
	buf := make([]byte, elem*max(len(k), len(v)))
	for pos := 0; pos < n; pos += chunk {
		m := min(chunk, n-pos)
		if _, err := t.Append(toks[pos : pos+m]); err != nil {
			return 0, read, err
		}
		for l := range layers {
			for _, rows := range [][]float32{k[:m*p.kRow], v[:m*p.vRows]} {
				b := buf[:elem*len(rows)]
				if err := get(b); err != nil {
					return 0, read, err
				}
				decodeElems(rows, b, elem)
			}
			t.Store(l, pos, k[:m*p.kRow], v[:m*p.vRows])
		}
		t.Commit()
	}
	return n, read, nil
}
