package kvcache

import (
	"fmt"
	"math"

	"github.com/ruvllm/ruvllm/kernels"
)

// tileOf is the exact tile of head h of a table's block i in layer, as
// kvOf makes it: the keys (head_dim × block_tokens) or the values
// (block_tokens × head_dim_v), rounded to halves.
func tileOf(tab *BlockTable, i, layer, h int, key bool) []uint16 {
	p := tab.Pool()
	o := p.Options()
	var tile []uint16
	if key {
		tile = make([]uint16, o.HeadDim*p.bt)
	} else {
		tile = make([]uint16, p.bt*o.HeadDimV)
	}
	for t := range min(p.bt, tab.Len()-i*p.bt) {
		k, v := kvOf(o, layer, tab.Namespace(), tab.Tokens()[:i*p.bt+t+1])
		if key {
			for c := range o.HeadDim {
				tile[c*p.bt+t] = kernels.FP32ToFP16(k[h*o.HeadDim+c])
			}
		} else {
			for c := range o.HeadDimV {
				tile[t*o.HeadDimV+c] = kernels.FP32ToFP16(v[h*o.HeadDimV+c])
			}
		}
	}
	return tile
}

// checkTiers verifies a tiered pool against the tables that hold its
// blocks: every slot's state matches its block (pinned while the block is
// being filled, needed while a table's window asks for the form, idle
// otherwise), the lists and counters agree, the tables' need counts add up,
// exact forms hold kvOf's keys and values (near them when the block is
// lossy), and every full block's quantized forms are exactly the
// quantization of kvOf's, so that no sharing, copy or eviction ever hands a
// table another block's or a stale form.
func checkTiers(p *Pool, tables []*BlockTable) error {
	t := p.tier
	halfNeed, warmNeed := make([]int32, p.n), make([]int32, p.n)
	for ti, tab := range tables {
		if tab.hotFrom > len(tab.Blocks()) || tab.warmFrom > len(tab.Blocks()) {
			return fmt.Errorf("table %d: windows %d, %d past its %d blocks", ti, tab.hotFrom, tab.warmFrom, len(tab.Blocks()))
		}
		for i, b := range tab.Blocks() {
			if i >= tab.hotFrom {
				halfNeed[b]++
			}
			if t.warmBlocks > 0 && i >= tab.warmFrom {
				warmNeed[b]++
			}
		}
	}
	sealed := 0
	for b := range p.n {
		m := &p.meta[b]
		if m.halfNeed != halfNeed[b] || m.warmNeed != warmNeed[b] {
			return fmt.Errorf("block %d: needs %d/%d, the tables count %d/%d", b, m.halfNeed, m.warmNeed, halfNeed[b], warmNeed[b])
		}
		if m.sealed {
			sealed++
		}
		if m.ref == 0 && m.id == 0 && (m.half >= 0 || m.warm >= 0 || m.sealed) {
			return fmt.Errorf("free block %d keeps forms (%d, %d, sealed %v)", b, m.half, m.warm, m.sealed)
		}
		if m.ref > 0 && !m.sealed && m.half < 0 {
			return fmt.Errorf("block %d is being filled without an exact form", b)
		}
		if m.id != 0 && !m.sealed {
			return fmt.Errorf("registered block %d is not sealed", b)
		}
	}
	if sealed != p.sealed {
		return fmt.Errorf("%d sealed blocks, the pool counts %d", sealed, p.sealed)
	}
	if err := checkArena(&t.half, "exact", func(b int32) (int32, int32, bool) { return p.meta[b].half, p.meta[b].halfNeed, p.meta[b].sealed }); err != nil {
		return err
	}
	if err := checkArena(&t.warm, "warm", func(b int32) (int32, int32, bool) { return p.meta[b].warm, p.meta[b].warmNeed, true }); err != nil {
		return err
	}
	o := p.Options()
	for ti, tab := range tables {
		for i, b := range tab.Blocks() {
			m := &p.meta[b]
			filled := min(p.bt, tab.Len()-i*p.bt)
			for l := range o.Layers {
				for h := range o.KVHeads {
					for _, key := range []bool{true, false} {
						want := tileOf(tab, i, l, h, key)
						rows, cols := o.HeadDim, p.bt
						if !key {
							rows, cols = p.bt, o.HeadDimV
						}
						if m.half >= 0 {
							// Positions of the table's partial last block past
							// Len are unspecified.
							for r := range rows {
								for c := range cols {
									pos := c
									if !key {
										pos = r
									}
									if pos >= filled {
										continue
									}
									got := p.tierAt(b, l, h, key, r, c)
									w := kernels.FP16ToFP32(want[r*cols+c])
									if got != w && !(m.lossy && math.Abs(float64(got-w)) <= 40) {
										return fmt.Errorf("table %d block %d (%d) layer %d head %d key %v: exact (%d,%d) = %g, want %g (lossy %v)",
											ti, i, b, l, h, key, r, c, got, w, m.lossy)
									}
								}
							}
						}
						if !m.sealed || m.lossy || filled < p.bt {
							continue
						}
						forms := []Form{t.base}
						if m.warm >= 0 {
							forms = append(forms, FormQ8)
						}
						for _, f := range forms {
							q := make([]byte, kernels.KVTileBytes(f.Bits(), rows, cols, key))
							kernels.QuantizeKVTile(q, want, cols, f.Bits(), rows, cols, key)
							got := p.QuantKeys(b, l, h, f)
							if !key {
								got = p.QuantValues(b, l, h, f)
							}
							if string(got) != string(q) {
								return fmt.Errorf("table %d block %d (%d) layer %d head %d key %v: the %v form is not the quantization of its keys and values: got %v want %v (warm %d half %d need %d/%d)",
									ti, i, b, l, h, key, f, got, q, m.warm, m.half, m.halfNeed, m.warmNeed)
							}
						}
					}
				}
			}
		}
	}
	return nil
}

// checkArena checks an arena's slots against their blocks: form gives a
// block's slot, need count and whether it is full.
func checkArena[T uint16 | byte](a *arena[T], name string, form func(b int32) (slot, need int32, sealed bool)) error {
	if a.slots == 0 {
		return nil
	}
	var free, idle, pinned int
	for s := range int32(a.slots) {
		st, b := a.state[s], a.owner[s]
		if st == slotFree {
			if b != -1 {
				return fmt.Errorf("%s slot %d is free but owned by %d", name, s, b)
			}
			free++
			continue
		}
		slot, need, sealed := form(b)
		want := slotIdle
		switch {
		case !sealed:
			want = slotPinned
		case need > 0:
			want = slotNeeded
		}
		if slot != s || st != want {
			return fmt.Errorf("%s slot %d of block %d: state %d, want %d (block's slot %d, need %d, sealed %v)", name, s, b, st, want, slot, need, sealed)
		}
		switch st {
		case slotIdle:
			idle++
		case slotPinned:
			pinned++
		}
	}
	for _, l := range []struct {
		head int32
		n    int
	}{{a.freeHead(), free}, {a.idleHead(), idle}} {
		n := 0
		for s := a.next[l.head]; s != l.head; s = a.next[s] {
			n++
		}
		if n != l.n {
			return fmt.Errorf("%s list has %d slots, want %d", name, n, l.n)
		}
	}
	if free != a.free || idle != a.idle || pinned != a.pinned {
		return fmt.Errorf("%s counts %d free, %d idle, %d pinned; arena says %d, %d, %d", name, free, idle, pinned, a.free, a.idle, a.pinned)
	}
	return nil
}
