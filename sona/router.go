package sona

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of Options.
const (
	// DefaultNeighbours is Options.Neighbours when it is 0.
	DefaultNeighbours = 64
	// DefaultBankSize is Options.BankSize when it is 0.
	DefaultBankSize = 16384
	// DefaultPriorStrength is Options.PriorStrength when it is 0.
	DefaultPriorStrength = 8
	// DefaultExploreZ is Options.ExploreZ when it is 0.
	DefaultExploreZ = 2
	// DefaultImplicitWeight is Options.ImplicitWeight when it is 0.
	DefaultImplicitWeight = 0.25
	// DefaultMaxPrecision is Options.MaxPrecision when it is 0.
	DefaultMaxPrecision = 1000
	// DefaultMinSimilarity is Options.MinSimilarity when it is 0.
	DefaultMinSimilarity = 0.1
	// DefaultExploreRate is Options.ExploreRate when it is 0.
	DefaultExploreRate = 0.05
)

// Limits.
const (
	// MaxArms bounds the distinct arms a router learns about: each holds
	// two linear models over the hashed features (2 MiB at the default
	// FeatureBits).
	MaxArms = 32
	// maxPending bounds the decisions waiting for their outcome; the
	// oldest is forgotten beyond it (its request never reported back).
	maxPending = 8192
	// maxRating bounds a rating's magnitude.
	maxRating = 1
	// maxPendingRatings bounds the ratings kept for a decision whose
	// outcome has not come yet.
	maxPendingRatings = 8
	// minQuality keeps an estimated quality inside (0, 1).
	minQuality = 1e-3
	// minCost is the least cost whose logarithm is taken.
	minCost = 1e-9
	// noisePrior is the variance of ln cost around the cost model
	// assumed before any cost is seen (costs within about a factor of 1.6
	// of the prediction), worth noisePriorWeight observed costs.
	noisePrior       = 0.25
	noisePriorWeight = 4
)

// Errors of the router.
var (
	// ErrNoArms means Decide was given no arm to choose from.
	ErrNoArms = errors.New("sona: no arm to route to")
	// ErrUnknownCompletion means feedback named a completion the router
	// never routed or has forgotten.
	ErrUnknownCompletion = errors.New("sona: unknown completion")
	// ErrTooManyArms means more than MaxArms distinct arms were offered.
	ErrTooManyArms = errors.New("sona: too many arms")
)

// Options configure a Router; the zero value routes by quality alone,
// explores, and remembers in memory only.
type Options struct {
	// CostWeight is W: the router maximises expected quality (in [0, 1])
	// − W × expected cost, cost in the units outcomes report it in
	// (seconds of generation in the server, dollars in a trace). 0 routes
	// by quality alone; a request may set its own.
	CostWeight float64
	// FeatureBits sizes the hashed feature space: 2^FeatureBits buckets
	// (8 … 22); 0 means DefaultFeatureBits.
	FeatureBits int
	// Neighbours is k, the past trajectories most similar to a request
	// that inform its decision; 0 means DefaultNeighbours.
	Neighbours int
	// MinSimilarity is the least cosine similarity of a neighbour; 0
	// means DefaultMinSimilarity.
	MinSimilarity float64
	// BankSize is how many trajectories the ReasoningBank keeps (the most
	// recent); 0 means DefaultBankSize.
	BankSize int
	// PriorStrength is how many neighbours' outcomes the linear models'
	// estimate is worth at most when the two are combined; 0 means
	// DefaultPriorStrength.
	PriorStrength float64
	// MaxPrecision caps each weight's precision, so that the models keep
	// learning at a rate of at least 1/MaxPrecision and follow arms whose
	// quality changes; 0 means DefaultMaxPrecision.
	MaxPrecision float64
	// NoExplore always takes the arm of the best expected score.
	NoExplore bool
	// ExploreRate is the share of decisions that may explore once every
	// arm that may be best is well known for such requests; the others
	// take the arm of the best expected score. 0 means DefaultExploreRate.
	ExploreRate float64
	// ExploreZ is how many standard deviations of its estimate an arm's
	// score may be below the best arm's and still be explored (Thompson
	// sampling among the arms that may be best); 0 means DefaultExploreZ.
	ExploreZ float64
	// ImplicitWeight is how much an answer's outcome without a rating
	// counts (finished: good, cut at max tokens: middling), against a
	// rating's 1; 0 means DefaultImplicitWeight.
	ImplicitWeight float64
	// Seed seeds exploration, so that a run can be repeated.
	Seed uint64
	// Store, when not nil, persists trajectories and feedback: the router
	// replays it when it opens, so that a restart does not forget.
	Store Store
}

func (o *Options) fill() error {
	if o.CostWeight < 0 || math.IsNaN(o.CostWeight) || math.IsInf(o.CostWeight, 0) {
		return fmt.Errorf("sona: cost weight %g must be finite and not negative", o.CostWeight)
	}
	if o.FeatureBits == 0 {
		o.FeatureBits = DefaultFeatureBits
	}
	if o.FeatureBits < minFeatureBits || o.FeatureBits > maxFeatureBits {
		return fmt.Errorf("sona: feature bits %d outside %d … %d", o.FeatureBits, minFeatureBits, maxFeatureBits)
	}
	defaults := []struct {
		v   *float64
		def float64
	}{
		{&o.MinSimilarity, DefaultMinSimilarity},
		{&o.PriorStrength, DefaultPriorStrength},
		{&o.MaxPrecision, DefaultMaxPrecision},
		{&o.ExploreZ, DefaultExploreZ},
		{&o.ImplicitWeight, DefaultImplicitWeight},
		{&o.ExploreRate, DefaultExploreRate},
	}
	for _, d := range defaults {
		if *d.v < 0 || math.IsNaN(*d.v) || math.IsInf(*d.v, 0) {
			return fmt.Errorf("sona: option value %g must be finite and not negative", *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if o.ExploreRate > 1 {
		return fmt.Errorf("sona: explore rate %g is more than 1", o.ExploreRate)
	}
	if o.Neighbours < 0 || o.BankSize < 0 {
		return fmt.Errorf("sona: neighbours %d and bank size %d must not be negative", o.Neighbours, o.BankSize)
	}
	if o.Neighbours == 0 {
		o.Neighbours = DefaultNeighbours
	}
	if o.BankSize == 0 {
		o.BankSize = DefaultBankSize
	}
	return nil
}

// Arm is one choice a decision may take, with what its engine's state adds
// to its cost now.
type Arm struct {
	// Name is the arm as requests name it: a model id, "MODEL:ADAPTER".
	Name string
	// CostScale multiplies the arm's expected cost: 1 (or 0) when its
	// engine is idle, more when requests queue for it. Observed costs are
	// divided by it, so that what is learnt is the cost of the request.
	CostScale float64
	// ExtraCost is added to the arm's expected cost: the time to load a
	// model that is not loaded.
	ExtraCost float64
}

// Decision is the arm chosen for a request and why.
type Decision struct {
	Arm string
	// Quality and Cost are the chosen arm's expected quality and cost (its
	// load included), Score = Quality − CostWeight × Cost.
	Quality, Cost, Score float64
	CostWeight           float64
	// Explore is set when the arm is not the one of the best expected
	// score: exploration picked it because it may be better.
	Explore bool
	// Neighbours is how many similar past trajectories informed it.
	Neighbours int
}

// Header renders d for the X-Route response header: the arm, then its
// numbers as name=value pairs.
func (d Decision) Header() string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	explore := "0"
	if d.Explore {
		explore = "1"
	}
	return strings.Join([]string{d.Arm, "score=" + f(d.Score), "quality=" + f(d.Quality), "cost=" + f(d.Cost),
		"cost_weight=" + strconv.FormatFloat(d.CostWeight, 'g', -1, 64), "explore=" + explore,
		"neighbours=" + strconv.Itoa(d.Neighbours)}, "; ")
}

// Outcome is how an arm's answer turned out.
type Outcome struct {
	// Quality in [0, 1] is known when Rated: a trace's label, or what a
	// caller measured.
	Quality float64
	Rated   bool
	// Finish is a served answer's finish reason ("stop", "length"), and
	// Failed says it failed: without a rating these are the evidence of
	// its quality (Options.ImplicitWeight).
	Finish string
	Failed bool
	// Cost is what the answer cost (≥ 0); negative when not known.
	Cost float64
}

// armStats is what the router knows of one arm beside its weights: the
// running mean of the squared residual of its ln cost model, and how many
// costs it has seen.
type armStats struct {
	noise float64
	costs float64
}

// pending is a decision waiting for its outcome, and the ratings that
// came before it (a client may rate a stream before it ends).
type pending struct {
	f       features
	arm     int32
	scale   float64
	at      time.Time
	ratings []float64
}

// Router routes requests among arms as a contextual bandit. Its methods are
// safe for concurrent use; decisions run in parallel with each other.
type Router struct {
	opt Options
	x   extractor

	mu    sync.RWMutex
	names []string
	index map[string]int32
	// model predicts each arm's chance of a good answer and its ln cost.
	model *linear
	arms  []armStats
	bank  *bank
	// pending holds decisions until their outcome; order is their ids in
	// arrival order, to forget the oldest.
	pending map[string]*pending
	order   []string
	closed  bool
	// storeErr stops persisting after the store failed; replaySkipped
	// counts the stored records that could not be used.
	storeErr      error
	replaySkipped int

	scratch sync.Pool // *decideScratch
	rngMu   sync.Mutex
	rng     *rand.Rand
}

// decideScratch is the memory of one decision, reused across decisions.
type decideScratch struct {
	search *searchScratch
	pos    []int // arm index → position in the decision's arms, or -1
	est    []estimate
	// qm and cm are every arm's linear predictions for one request.
	qm, cm []float64
}

// New returns a router; with a Store it first replays what the store
// holds.
func New(o Options) (*Router, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	x := newExtractor(o.FeatureBits)
	r := &Router{
		opt:     o,
		x:       x,
		index:   map[string]int32{},
		bank:    newBank(o.BankSize, x.buckets()),
		model:   newLinear(x.buckets(), o.MaxPrecision),
		pending: map[string]*pending{},
		rng:     rand.New(rand.NewPCG(o.Seed, 0x50a4)),
	}
	r.scratch.New = func() any { return &decideScratch{search: r.bank.newScratch()} }
	if o.Store != nil {
		if err := r.replay(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// armIndex returns the index of the arm named name, adding it when it is
// new. The caller holds mu for writing.
func (r *Router) armIndex(name string) (int32, error) {
	if i, ok := r.index[name]; ok {
		return i, nil
	}
	if len(r.names) >= MaxArms {
		return 0, fmt.Errorf("%w: at most %d", ErrTooManyArms, MaxArms)
	}
	i := int32(len(r.names))
	r.names = append(r.names, name)
	r.index[name] = i
	r.model.addArm()
	r.arms = append(r.arms, armStats{noise: noisePrior})
	return i, nil
}

// Register makes the named arms known before the first decision offers
// them, so that no request waits while an arm's weights are laid out (a
// few milliseconds at the default FeatureBits). Arms already known are
// left as they are.
func (r *Router) Register(names ...string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range names {
		if name == "" {
			return errors.New("sona: an arm without a name")
		}
		if _, err := r.armIndex(name); err != nil {
			return err
		}
	}
	return nil
}

// indexes maps arms to their indexes, adding the new ones. An arm without
// a name, or offered twice, is refused.
func (r *Router) indexes(arms []Arm) ([]int32, error) {
	for i, a := range arms {
		if a.Name == "" {
			return nil, errors.New("sona: an arm without a name")
		}
		for _, b := range arms[:i] {
			if b.Name == a.Name {
				return nil, fmt.Errorf("sona: the arm %q is offered twice", a.Name)
			}
		}
	}
	ids := make([]int32, len(arms))
	r.mu.RLock()
	missing := false
	for i, a := range arms {
		id, ok := r.index[a.Name]
		if !ok {
			missing = true
			break
		}
		ids[i] = id
	}
	r.mu.RUnlock()
	if !missing {
		return ids, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, a := range arms {
		id, err := r.armIndex(a.Name)
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	return ids, nil
}

// estimate is what the router expects of one arm for one request.
type estimate struct {
	quality float64
	// strength is how many observations the quality estimate is worth.
	strength float64
	cost     float64
	hasCost  bool
}

// sd is the standard deviation of the quality estimate.
func (e estimate) sd() float64 {
	return math.Sqrt(e.quality * (1 - e.quality) / (e.strength + 1))
}

// estimateArms fills s.est with each arm's estimate for f: what the linear
// models predict (what every trajectory taught, through the features f
// shares with them), corrected by how far that prediction missed on f's
// nearest past trajectories. The linear models are additive in the
// features and cannot represent every interaction (a word that makes one
// kind of request hard and leaves another as it was); the neighbours'
// residuals correct that where similar requests have been seen, without
// pulling the estimate towards neighbours that merely share words (their
// residuals are near zero when the model already tells them apart). The
// caller holds mu for reading.
func (r *Router) estimateArms(f *features, ids []int32, s *decideScratch) int {
	nbrs := r.bank.nearest(f.text, r.opt.Neighbours, float32(r.opt.MinSimilarity), s.search)
	n := len(r.names)
	if cap(s.pos) < n {
		s.pos, s.qm, s.cm = make([]int, n), make([]float64, n), make([]float64, n)
	}
	s.pos, s.qm, s.cm = s.pos[:n], s.qm[:n], s.cm[:n]
	for i := range s.pos {
		s.pos[i] = -1
	}
	for i, id := range ids {
		s.pos[id] = i
	}
	// Per arm: the weighted residuals of quality, of ln cost and of its
	// square, and their weights.
	type sums struct{ q, qn, c, c2, cn float64 }
	acc := make([]sums, len(ids))
	for _, nb := range nbrs {
		w := float64(nb.sim)
		t := &r.bank.slots[nb.slot]
		predicted := false
		for _, o := range t.outs {
			i := s.pos[o.arm]
			if i < 0 {
				continue
			}
			if !predicted {
				r.model.means(&t.f, s.qm, s.cm)
				predicted = true
			}
			if o.qweight > 0 {
				acc[i].q += w * float64(o.qweight) * (float64(o.quality) - sigmoid(s.qm[o.arm]))
				acc[i].qn += w * float64(o.qweight)
			}
			if o.cost >= 0 {
				res := math.Log(max(float64(o.cost), minCost)) - s.cm[o.arm]
				acc[i].c += w * res
				acc[i].c2 += w * res * res
				acc[i].cn += w
			}
		}
	}
	r.model.means(f, s.qm, s.cm)
	s.est = s.est[:0]
	for i, id := range ids {
		st := &r.arms[id]
		m, v := r.model.predict(f, int(id), headQuality)
		p0 := sigmoid(m)
		// The linear estimate's worth in outcomes, from its variance: a
		// Beta of mean p0 and variance (p0(1−p0))²v has p0(1−p0)/var − 1.
		m0 := min(r.opt.PriorStrength, max(0, 1/(p0*(1-p0)*v)-1))
		e := estimate{strength: m0 + acc[i].qn}
		e.quality = max(minQuality, min(1-minQuality, p0+acc[i].q/(acc[i].qn+r.opt.PriorStrength)))
		if st.costs > 0 {
			e.hasCost = true
			cm, noise := s.cm[id], st.noise
			if n := acc[i].cn; n > 0 {
				cm += acc[i].c / (n + r.opt.PriorStrength)
				// The local spread of ln cost, shrunk towards the arm's.
				local := max(0, acc[i].c2/n-(acc[i].c/n)*(acc[i].c/n))
				noise = min(maxNoise, (n*local+r.opt.PriorStrength*noise)/(n+r.opt.PriorStrength))
			}
			e.cost = math.Exp(cm + noise/2)
		}
		s.est = append(s.est, e)
	}
	return len(nbrs)
}

// Decide picks the arm for request q among arms, and, when q.ID is set,
// keeps the decision until Observe reports its outcome.
func (r *Router) Decide(q Request, arms []Arm) (Decision, error) {
	if len(arms) == 0 {
		return Decision{}, ErrNoArms
	}
	w := r.opt.CostWeight
	if q.CostWeight != nil {
		w = *q.CostWeight
		if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			return Decision{}, fmt.Errorf("sona: cost weight %g must be finite and not negative", w)
		}
	}
	ids, err := r.indexes(arms)
	if err != nil {
		return Decision{}, err
	}
	f := r.x.extract(q)
	s := r.scratch.Get().(*decideScratch)
	defer r.scratch.Put(s)
	r.mu.RLock()
	nbrs := r.estimateArms(&f, ids, s)
	r.mu.RUnlock()

	// Arms that have never been seen to cost anything are given the mean
	// cost of those that have, so that they neither win nor lose on cost.
	var known, sum float64
	for _, e := range s.est {
		if e.hasCost {
			known++
			sum += e.cost
		}
	}
	scores := make([]float64, len(arms))
	costs := make([]float64, len(arms))
	best := 0
	for i, e := range s.est {
		c := e.cost
		if !e.hasCost && known > 0 {
			c = sum / known
		}
		scale := arms[i].CostScale
		if scale <= 0 {
			scale = 1
		}
		costs[i] = c*scale + arms[i].ExtraCost
		scores[i] = e.quality - w*costs[i]
		if scores[i] > scores[best] {
			best = i
		}
	}
	chosen := best
	if !r.opt.NoExplore && len(arms) > 1 {
		chosen = r.explore(scores, s.est, best)
	}
	d := Decision{Arm: arms[chosen].Name, Quality: s.est[chosen].quality, Cost: costs[chosen], Score: scores[chosen],
		CostWeight: w, Explore: chosen != best, Neighbours: nbrs}
	if q.ID != "" {
		scale := arms[chosen].CostScale
		if scale <= 0 {
			scale = 1
		}
		r.remember(q.ID, &pending{f: f, arm: ids[chosen], scale: scale, at: time.Now()})
	}
	return d, nil
}

// explore is Thompson sampling among the arms that may be best: those
// whose score, ExploreZ standard deviations up, reaches the best arm's
// ExploreZ deviations down. Each draws a score from its estimate; the
// highest draw wins. Arms known to be worse are never tried. While one of
// those arms is little known for such requests (its estimate is worth less
// than PriorStrength outcomes) every decision samples; once all are known,
// only ExploreRate of them do, and the rest take the best arm.
func (r *Router) explore(scores []float64, est []estimate, best int) int {
	z := r.opt.ExploreZ
	floor := scores[best] - z*est[best].sd()
	plausible, unknown := 0, false
	for i, sc := range scores {
		if i != best && sc+z*est[i].sd() >= floor {
			plausible++
			unknown = unknown || est[i].strength < r.opt.PriorStrength
		}
	}
	if plausible == 0 {
		return best
	}
	r.rngMu.Lock()
	defer r.rngMu.Unlock()
	if !unknown && r.rng.Float64() >= r.opt.ExploreRate {
		return best
	}
	chosen, top := best, math.Inf(-1)
	for i, sc := range scores {
		sd := est[i].sd()
		if sc+z*sd < floor {
			continue
		}
		if draw := sc + sd*r.rng.NormFloat64(); draw > top {
			chosen, top = i, draw
		}
	}
	return chosen
}

// remember keeps a decision until its outcome, forgetting the oldest
// beyond maxPending.
func (r *Router) remember(id string, p *pending) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.pending[id]; !dup {
		r.order = append(r.order, id)
	}
	r.pending[id] = p
	for len(r.pending) > maxPending && len(r.order) > 0 {
		delete(r.pending, r.order[0])
		r.order = r.order[1:]
	}
	if len(r.order) > 2*maxPending {
		kept := r.order[:0]
		for _, id := range r.order {
			if _, ok := r.pending[id]; ok {
				kept = append(kept, id)
			}
		}
		r.order = kept
	}
}

// take removes and returns the pending decision id.
func (r *Router) take(id string) (*pending, bool) {
	p, ok := r.pending[id]
	if ok {
		delete(r.pending, id)
	}
	return p, ok
}

// Abandon forgets the decision of request id without learning from it: its
// client left, which says nothing about the arm.
func (r *Router) Abandon(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.take(id)
}

// qualityOf is the quality o shows and how much it counts.
func (r *Router) qualityOf(o Outcome) (q, w float64) {
	switch {
	case o.Rated:
		return max(0, min(1, o.Quality)), 1
	case o.Failed:
		return 0, 1
	case o.Finish == "stop":
		return 1, r.opt.ImplicitWeight
	case o.Finish == "length":
		return 0.5, r.opt.ImplicitWeight
	}
	return 0, 0
}

// Observe reports the outcome of the decision made for request id: the
// router learns from it and keeps the trajectory. It reports whether the
// decision was known.
func (r *Router) Observe(id string, o Outcome) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.take(id)
	if !ok || r.closed {
		return false
	}
	q, w := r.qualityOf(o)
	cost := o.Cost
	if cost >= 0 {
		cost /= p.scale
	}
	out := armOutcome{arm: p.arm, quality: float32(q), qweight: float32(w), cost: float32(cost)}
	if cost < 0 || math.IsNaN(cost) {
		out.cost = -1
	}
	t := trajectory{id: id, at: p.at.Unix(), f: p.f, outs: []armOutcome{out}}
	r.learn(&t)
	r.persist(&t)
	for _, rating := range p.ratings {
		if r.applyFeedback(id, rating) == nil {
			r.persistFeedback(id, rating)
		}
	}
	return true
}

// Learn teaches the router a request whose outcome is known for several
// arms at once (full information, as a trace's train split has).
func (r *Router) Learn(q Request, outcomes map[string]Outcome) error {
	f := r.x.extract(q)
	r.mu.Lock()
	defer r.mu.Unlock()
	t := trajectory{id: q.ID, at: time.Now().Unix(), f: f}
	for name, o := range outcomes {
		id, err := r.armIndex(name)
		if err != nil {
			return err
		}
		qu, w := r.qualityOf(o)
		c := float32(o.Cost)
		if o.Cost < 0 || math.IsNaN(o.Cost) {
			c = -1
		}
		t.outs = append(t.outs, armOutcome{arm: id, quality: float32(qu), qweight: float32(w), cost: c})
	}
	r.learn(&t)
	r.persist(&t)
	return nil
}

// learn updates the arms' models with t and adds it to the bank. The
// caller holds mu for writing.
func (r *Router) learn(t *trajectory) {
	for _, o := range t.outs {
		r.learnOutcome(&t.f, o)
	}
	r.bank.add(*t)
}

// learnOutcome updates one arm's models with one outcome.
func (r *Router) learnOutcome(f *features, o armOutcome) {
	st := &r.arms[o.arm]
	if o.qweight > 0 {
		r.model.updateLogistic(f, int(o.arm), float64(o.quality), float64(o.qweight))
	}
	if o.cost >= 0 {
		y := math.Log(max(float64(o.cost), minCost))
		r.model.updateGaussian(f, int(o.arm), y, 1, st.noise)
		// The noise variance is the mean squared residual left after
		// learning, starting from a prior worth noisePriorWeight costs,
		// over a window of about 100 costs once that many are seen.
		m, _ := r.model.predict(f, int(o.arm), headCost)
		res := y - m
		st.costs++
		rate := max(1/(st.costs+noisePriorWeight), 0.01)
		st.noise = max(minNoise, min(maxNoise, st.noise+rate*(res*res-st.noise)))
	}
}

// Feedback reports a user's rating of the answer to request id, from −1
// (bad) to 1 (good): the router learns it as quality (rating+1)/2, counted
// fully, on top of what the answer's outcome taught.
func (r *Router) Feedback(id string, rating float64) error {
	if math.IsNaN(rating) || rating < -maxRating || rating > maxRating {
		return fmt.Errorf("sona: rating %g outside [-1, 1]", rating)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrUnknownCompletion
	}
	if p, ok := r.pending[id]; ok {
		if len(p.ratings) < maxPendingRatings {
			p.ratings = append(p.ratings, rating)
		}
		return nil
	}
	if err := r.applyFeedback(id, rating); err != nil {
		return err
	}
	r.persistFeedback(id, rating)
	return nil
}

// applyFeedback learns a rating of trajectory id. The caller holds mu for
// writing.
func (r *Router) applyFeedback(id string, rating float64) error {
	t, ok := r.bank.find(id)
	if !ok || len(t.outs) != 1 {
		return fmt.Errorf("%w %q", ErrUnknownCompletion, id)
	}
	q := (rating + 1) / 2
	o := &t.outs[0]
	r.learnOutcome(&t.f, armOutcome{arm: o.arm, quality: float32(q), qweight: 1, cost: -1})
	// In the bank, the rating replaces what the outcome alone suggested.
	o.quality, o.qweight = float32(q), 1
	return nil
}
