package sona

import "math"

// armOutcome is what one arm did on a trajectory's request.
type armOutcome struct {
	arm int32 // index into Router.names
	// quality in [0, 1] counts with weight qweight (0: not known yet).
	quality, qweight float32
	// cost is what the answer cost; negative when not known.
	cost float32
}

// trajectory is one request the router has seen: its features, the arms
// that answered it and how they did. A live request has one arm; a
// trajectory learnt with full information (a trace's train split) has an
// outcome for every arm.
type trajectory struct {
	id string
	// at is when it was recorded, in Unix seconds.
	at   int64
	f    features
	outs []armOutcome
	gen  uint32
}

// posting is a trajectory that has a feature, with the feature's value; gen
// tells a posting of a trajectory since overwritten from a live one.
type posting struct {
	slot, gen uint32
	val       float32
}

// maxScan bounds the postings a search reads per feature.
const maxScan = 256

// neighbour is a trajectory similar to a request.
type neighbour struct {
	slot int
	sim  float32
}

// bank is the ReasoningBank: the most recent trajectories in a ring, with an
// inverted index from each hashed feature to the trajectories that have it,
// so that the k most similar to a request (cosine of their text features)
// are found by touching only the trajectories that share a feature with it.
type bank struct {
	slots []trajectory
	// gens mirrors each slot's gen, so that a search checks its postings
	// against 4 bytes a slot rather than the whole trajectory.
	gens []uint32
	// used is the number of filled slots; next is the slot the next
	// trajectory overwrites once the ring is full.
	used, next int
	postings   [][]posting
	// live and stale count the postings of current and of overwritten
	// trajectories; the index is rebuilt when stale ones outnumber live ones.
	live, stale int
	ids         map[string]int
}

func newBank(capacity, buckets int) *bank {
	return &bank{
		slots:    make([]trajectory, capacity),
		gens:     make([]uint32, capacity),
		postings: make([][]posting, buckets),
		ids:      map[string]int{},
	}
}

// add stores t, overwriting the oldest trajectory when the ring is full, and
// returns its slot.
func (b *bank) add(t trajectory) int {
	slot := b.next
	b.next = (b.next + 1) % len(b.slots)
	if b.used < len(b.slots) {
		b.used++
	}
	old := &b.slots[slot]
	if old.gen > 0 {
		b.stale += len(old.f.text)
		b.live -= len(old.f.text)
		if b.ids[old.id] == slot {
			delete(b.ids, old.id)
		}
	}
	t.gen = old.gen + 1
	*old = t
	b.gens[slot] = t.gen
	for _, tm := range t.f.text {
		b.postings[tm.idx] = append(b.postings[tm.idx], posting{slot: uint32(slot), gen: t.gen, val: tm.val})
	}
	b.live += len(t.f.text)
	if t.id != "" {
		b.ids[t.id] = slot
	}
	if b.stale > b.live {
		b.reindex()
	}
	return slot
}

// reindex drops the postings of overwritten trajectories.
func (b *bank) reindex() {
	for i, ps := range b.postings {
		kept := ps[:0]
		for _, p := range ps {
			if b.gens[p.slot] == p.gen {
				kept = append(kept, p)
			}
		}
		clear(ps[len(kept):])
		b.postings[i] = kept
	}
	b.stale = 0
}

// find returns the slot of the trajectory recorded under id.
func (b *bank) find(id string) (*trajectory, bool) {
	slot, ok := b.ids[id]
	if !ok {
		return nil, false
	}
	return &b.slots[slot], true
}

// searchScratch is what one search writes into, reused across searches.
type searchScratch struct {
	scores  []float32
	touched []int
	top     []neighbour // a min-heap by similarity while searching
	cand    []neighbour
	query   []float32 // the request's features, dense, while scoring
}

func (b *bank) newScratch() *searchScratch {
	return &searchScratch{scores: make([]float32, len(b.slots))}
}

// nearest returns the k trajectories most similar to q (the cosine of
// their text features) with a similarity of at least minSim, most similar
// first, in s.top (valid until s is reused).
//
// To bound its time however large the bank, a search reads at most
// maxScan of the most recent postings of each of q's features: a feature
// most trajectories share (a common word) then costs no more than a rare
// one, and the candidates it finds are the recent ones. Partial sums can
// miss a candidate's older common features, so the best 4k candidates are
// scored again exactly before the k best are kept.
func (b *bank) nearest(q []term, k int, minSim float32, s *searchScratch) []neighbour {
	if len(s.scores) < len(b.slots) {
		s.scores = make([]float32, len(b.slots))
	}
	s.touched = s.touched[:0]
	gens, scores := b.gens, s.scores
	for _, tm := range q {
		ps := b.postings[tm.idx]
		seen := 0
		for i := len(ps) - 1; i >= 0 && seen < maxScan; i-- {
			p := ps[i]
			if gens[p.slot] != p.gen {
				continue
			}
			seen++
			if scores[p.slot] == 0 {
				s.touched = append(s.touched, int(p.slot))
			}
			scores[p.slot] += tm.val * p.val
		}
	}
	// The best 4k by partial sums, scored exactly.
	s.top = s.top[:0]
	for _, slot := range s.touched {
		s.top = offer(s.top, 4*k, neighbour{slot: slot, sim: scores[slot]})
		scores[slot] = 0
	}
	candidates := append(s.cand[:0], s.top...)
	s.cand = candidates
	s.top = s.top[:0]
	// q scattered into a dense vector makes each exact score a gather,
	// without the branches of merging two sorted lists.
	if len(s.query) < len(b.postings) {
		s.query = make([]float32, len(b.postings))
	}
	for _, tm := range q {
		s.query[tm.idx] = tm.val
	}
	for _, c := range candidates {
		var sim float32
		for _, tm := range b.slots[c.slot].f.text {
			sim += s.query[tm.idx] * tm.val
		}
		if sim < minSim || math.IsNaN(float64(sim)) {
			continue
		}
		s.top = offer(s.top, k, neighbour{slot: c.slot, sim: sim})
	}
	for _, tm := range q {
		s.query[tm.idx] = 0
	}
	// Most similar first: pop the min-heap from the back.
	out := s.top
	for i := len(out) - 1; i > 0; i-- {
		out[0], out[i] = out[i], out[0]
		down(out[:i], 0)
	}
	return out
}

// offer adds n to the min-heap h of at most k neighbours, dropping the
// least similar when it is full.
func offer(h []neighbour, k int, n neighbour) []neighbour {
	if len(h) < k {
		h = append(h, n)
		up(h, len(h)-1)
	} else if n.sim > h[0].sim {
		h[0] = n
		down(h, 0)
	}
	return h
}

// up restores the min-heap property (by similarity) of h above i.
func up(h []neighbour, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].sim <= h[i].sim {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

// down restores the min-heap property of h below i.
func down(h []neighbour, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].sim < h[l].sim {
			m = r
		}
		if h[i].sim <= h[m].sim {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
