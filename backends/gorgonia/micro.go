package gorgonia

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"

	"gorgonia.org/tensor"

	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// MicroLoRAs are small adapters (rank 1–2) trained online from users'
// feedback while the server runs. Feedback is queued as it arrives; one
// background trainer takes it in turn, a step on each event (with a few
// earlier events of the adapter replayed beside it), and publishes every
// update into the adapter registry as a new version that requests naming
// the adapter get at once. The trainer's share of the CPU is bounded: its
// thread runs at the lowest priority, and it sleeps after each update so
// that updates take at most CPUShare of one core over time.

// ErrNotMicro is returned for feedback naming an adapter that exists but is
// not trained from feedback (one uploaded or loaded from a file).
var ErrNotMicro = errors.New("the adapter is not a MicroLoRA trained from feedback")

// MicroOptions configure a MicroLoRA manager; the zero value is usable.
type MicroOptions struct {
	// Train configures each adapter's trainer (rank, targets, learning
	// rate, β, penalty); see TrainOptions for the defaults.
	Train TrainOptions
	// CPUShare bounds the trainer's use of one core over time; 0 means
	// 0.25.
	CPUShare float64
	// Replay is how many earlier events of the adapter are trained beside
	// each new one (with the same objective); 0 means none. Each costs as
	// much as the new event (BenchmarkUpdateReplay).
	Replay int
	// ConsolidateEvery is how many updates pass between moves of the
	// penalty's anchor (with a penalty set); 0 means 32.
	ConsolidateEvery int
	// SaveEvery is the most often an adapter's file is rewritten, and the
	// longest an update waits to be saved; 0 means 2 s. The newest version
	// is always in memory, and Close saves all. The file holds the
	// trainer's state too (Trainer.State), from which a restarted server
	// continues.
	SaveEvery time.Duration
	// Queue bounds the events waiting; 0 means 1024. A full queue refuses
	// feedback (ErrBusy).
	Queue int
	// MaxAdapters bounds the MicroLoRAs feedback may create in the
	// registry (those already there count); feedback naming a new one
	// beyond it fails with ErrTooMany. 0 means DefaultMaxMicro. Without a
	// bound, a client naming a new adapter in each request fills the disk
	// and the memory.
	MaxAdapters int
	// MaxTrainers bounds the trainers (factors, Adam's moments, replayed
	// examples) held in memory; the least recently used idle one whose
	// updates are saved is dropped first, and made again from its file
	// (which holds its state) at its next feedback. 0 means the
	// registry's MaxResident.
	MaxTrainers int
}

// DefaultMaxMicro is MicroOptions.MaxAdapters when it is not set.
const DefaultMaxMicro = 16

// ErrTooMany is returned for feedback naming a new adapter when
// MaxAdapters MicroLoRAs exist.
var ErrTooMany = errors.New("too many MicroLoRA adapters")

// ErrBusy is returned when the trainer's queue is full.
var ErrBusy = errors.New("the MicroLoRA trainer's queue is full")

// MicroEvent is one piece of feedback for an adapter.
type MicroEvent struct {
	Adapter   string
	Objective Objective
	Example   Example
}

// MicroStats is an adapter's training state: lora.Training, live.
type MicroStats = lora.Training

// microAdapter is one adapter being trained.
type microAdapter struct {
	name    string
	tr      *Trainer
	stats   lora.Training
	replay  []replayed
	saved   time.Time
	dirty   bool
	pending int    // events queued, not yet trained
	lastUse uint64 // MicroLoRA.clock at the last feedback, for LRU
}

// queued is an event with the trainer it was accepted for: an event whose
// adapter was dropped, or failed to be published, is not trained on a later
// trainer of the same name.
type queued struct {
	ev MicroEvent
	a  *microAdapter
}

type replayed struct {
	obj Objective
	ex  Scored
}

// MicroLoRA trains the MicroLoRAs of one model and publishes them into its
// adapter registry. Its methods are safe for concurrent use.
type MicroLoRA struct {
	file *gguf.File
	cfg  *models.Config
	reg  *lora.Registry
	opt  MicroOptions

	mu       sync.Mutex
	model    *Model // made at the first feedback
	adapters map[string]*microAdapter
	clock    uint64
	queue    chan queued
	done     chan struct{}
	exited   chan struct{}
	closed   bool
}

// NewMicroLoRA starts the trainer of the MicroLoRAs of the model in f (cfg
// its hyperparameters), published into reg. The model's weights are
// dequantized for training at the first feedback.
func NewMicroLoRA(f *gguf.File, cfg *models.Config, reg *lora.Registry, o MicroOptions) *MicroLoRA {
	if o.CPUShare <= 0 || o.CPUShare > 1 {
		o.CPUShare = 0.25
	}
	if o.ConsolidateEvery <= 0 {
		o.ConsolidateEvery = 32
	}
	if o.SaveEvery <= 0 {
		o.SaveEvery = 2 * time.Second
	}
	if o.Queue <= 0 {
		o.Queue = 1024
	}
	if o.MaxAdapters <= 0 {
		o.MaxAdapters = DefaultMaxMicro
	}
	if o.MaxTrainers <= 0 {
		o.MaxTrainers = max(reg.MaxResident(), 1)
	}
	o.Train.fill()
	m := &MicroLoRA{file: f, cfg: cfg, reg: reg, opt: o, adapters: map[string]*microAdapter{},
		queue: make(chan queued, o.Queue), done: make(chan struct{}), exited: make(chan struct{})}
	go m.run()
	return m
}

// Submit queues an event for its adapter, creating the adapter (published
// at once as the base model exactly) at its first feedback, or taking over
// a MicroLoRA of that name stored in the registry. It fails with ErrNotMicro
// for another kind of adapter, lora.ErrBadName for a bad name, ErrBusy when
// the queue is full, ErrTooMany for a new adapter beyond MaxAdapters, and
// ErrBadExample for an example it cannot train on. Feedback that fails
// leaves nothing behind: no file, no adapter, no trainer.
func (m *MicroLoRA) Submit(ev MicroEvent) error {
	if err := lora.CheckName(ev.Adapter); err != nil {
		return err
	}
	if err := checkExample(m.cfg, ev.Objective, &ev.Example); err != nil {
		return fmt.Errorf("%w: %w", ErrBadExample, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("gorgonia: the MicroLoRA trainer is closed")
	}
	a, fresh, err := m.adapter(ev.Adapter)
	if err != nil {
		return err
	}
	select {
	case m.queue <- queued{ev, a}:
	default:
		return ErrBusy
	}
	if fresh {
		if a.stats.Version == 0 {
			// A new adapter is the base model exactly until its first
			// update; requests may name it from now on.
			if err := m.publish(a, true); err != nil {
				return err // its queued event is dropped: a is nobody's
			}
		}
		m.adapters[ev.Adapter] = a
	}
	m.clock++
	a.lastUse = m.clock
	a.stats.Feedback++
	a.pending++
	m.dropTrainers()
	return nil
}

// adapter finds the trainer of the adapter named name, or makes one (fresh)
// from the registry's MicroLoRA of that name or for a new adapter, which
// the caller records only once the feedback is accepted; m.mu is held.
func (m *MicroLoRA) adapter(name string) (a *microAdapter, fresh bool, err error) {
	if a, ok := m.adapters[name]; ok {
		return a, false, nil
	}
	old := m.reg.Adapter(name)
	exists := old != nil || m.registered(name)
	if !exists {
		if n := m.micros(); n >= m.opt.MaxAdapters {
			return nil, false, fmt.Errorf("%w: %d MicroLoRA adapters exist, the most feedback may create (--micro-lora-max %d); "+
				"give feedback to one of them, or delete one (DELETE /v1/adapters/NAME)", ErrTooMany, n, m.opt.MaxAdapters)
		}
	}
	if m.model == nil {
		model, err := NewModel(m.file, m.cfg)
		if err != nil {
			return nil, false, err
		}
		m.model = model
	}
	a = &microAdapter{name: name}
	if !exists {
		a.tr, err = NewTrainer(m.model, m.opt.Train)
		return a, true, err
	}
	if old == nil {
		lease, lerr := m.reg.Acquire(name)
		if lerr != nil {
			return nil, false, lerr
		}
		old = lease.Adapter()
		lease.Release()
	}
	if old.Training == nil {
		return nil, false, fmt.Errorf("%w: %q", ErrNotMicro, name)
	}
	if a.tr, err = TrainerFrom(m.model, old, m.opt.Train); errors.Is(err, lora.ErrInvalid) && old.Training.State != nil {
		// A saved trainer state that does not fit the factors: train on
		// with a new optimiser rather than refuse the adapter.
		a.tr, err = trainerFrom(m.model, old, m.opt.Train, tensor.Float32, false)
	}
	if err != nil {
		return nil, false, err
	}
	a.stats = *old.Training
	return a, true, nil
}

// micros counts the MicroLoRAs in the registry, those on disk from earlier
// runs included.
func (m *MicroLoRA) micros() int {
	n := 0
	for _, in := range m.reg.List() {
		if in.Training != nil {
			n++
		}
	}
	return n
}

// dropTrainers drops the least recently used idle trainers whose updates
// are saved until at most MaxTrainers are held; m.mu is held. A trainer
// with events waiting or updates not yet saved stays (the save ticker
// saves it, and a later call drops it).
func (m *MicroLoRA) dropTrainers() {
	if len(m.adapters) <= m.opt.MaxTrainers {
		return
	}
	idle := make([]*microAdapter, 0, len(m.adapters))
	for _, a := range m.adapters {
		if a.pending == 0 && !a.dirty {
			idle = append(idle, a)
		}
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].lastUse < idle[j].lastUse })
	for _, a := range idle {
		if len(m.adapters) <= m.opt.MaxTrainers {
			break
		}
		delete(m.adapters, a.name)
	}
}

// registered reports whether the registry has an adapter named name.
func (m *MicroLoRA) registered(name string) bool {
	_, err := m.reg.Get(name)
	return err == nil
}

// publish makes the trainer's factors the adapter's next version; with
// persist, its file is written too, with the trainer's state.
func (m *MicroLoRA) publish(a *microAdapter, persist bool) error {
	ad, err := a.tr.Adapter(a.name)
	if err != nil {
		return err
	}
	a.stats.Version++
	st := a.stats
	if persist {
		st.State = a.tr.State()
	}
	ad.Training = &st
	if _, err := m.reg.Publish(a.name, ad, persist); err != nil {
		return err
	}
	if persist {
		a.saved, a.dirty = time.Now(), false
	} else {
		a.dirty = true
	}
	return nil
}

// save writes the file of every adapter with updates not yet saved, as
// the version in memory; m.mu is held.
func (m *MicroLoRA) save() error {
	var errs []error
	for _, a := range m.adapters {
		if a.dirty {
			a.stats.Version-- // the saved version is the one in memory
			errs = append(errs, m.publish(a, true))
		}
	}
	return errors.Join(errs...)
}

// Stats is the live training state of the adapter named name; ok is false
// when this manager has not trained it.
func (m *MicroLoRA) Stats(name string) (MicroStats, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.adapters[name]
	if !ok {
		return MicroStats{}, false
	}
	return a.stats, true
}

// Idle reports whether every queued event has been trained.
func (m *MicroLoRA) Idle() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range m.adapters {
		if a.pending > 0 {
			return false
		}
	}
	return true
}

// Close stops the trainer after the update it is running and saves every
// adapter with unsaved updates. Events still queued are dropped.
func (m *MicroLoRA) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	close(m.done)
	<-m.exited
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.save()
}

// run is the background trainer: one goroutine on a thread of the lowest
// priority, sleeping after each update for its CPU share.
func (m *MicroLoRA) run() {
	defer close(m.exited)
	// The trainer takes a P of its own, so that it never holds one of the
	// Ps serving goroutines run on: the kernel, which runs its thread only
	// when the serving threads leave a CPU idle (lowerPriority), decides.
	procs := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(procs + 1)
	defer runtime.GOMAXPROCS(procs)
	runtime.LockOSThread()
	lowerPriority()
	// Updates not saved yet are saved once SaveEvery has passed, also when
	// no later feedback comes, so that a server killed then loses none.
	tick := time.NewTicker(m.opt.SaveEvery)
	defer tick.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-tick.C:
			m.mu.Lock()
			m.save()
			m.dropTrainers()
			m.mu.Unlock()
		case q := <-m.queue:
			start := time.Now()
			m.train(q)
			busy := time.Since(start)
			rest := time.Duration(float64(busy) * (1/m.opt.CPUShare - 1))
			select {
			case <-m.done:
				return
			case <-time.After(rest):
			}
		}
	}
}

// train takes one update on q's event and publishes it.
func (m *MicroLoRA) train(q queued) {
	ev := q.ev
	m.mu.Lock()
	a := m.adapters[ev.Adapter]
	m.mu.Unlock()
	if a != q.a {
		return // refused after it was queued
	}
	// The trainer is used by this goroutine only; the lock guards stats.
	s, err := a.tr.Prepare(ev.Objective, ev.Example)
	loss, steps := 0.0, a.tr.Steps
	if err == nil {
		batch := []Scored{s}
		for i := len(a.replay) - 1; i >= 0 && len(batch) <= m.opt.Replay && m.opt.Replay > 0; i-- {
			if a.replay[i].obj == ev.Objective {
				batch = append(batch, a.replay[i].ex)
			}
		}
		loss, err = a.tr.Step(ev.Objective, batch)
		a.replay = append(a.replay, replayed{ev.Objective, s})
		if len(a.replay) > 64 {
			a.replay = a.replay[len(a.replay)-64:]
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	a.pending--
	if err != nil {
		return
	}
	a.stats.Updates++
	a.stats.Loss = loss
	if a.tr.opt.Penalty != NoPenalty && a.stats.Updates%int64(m.opt.ConsolidateEvery) == 0 {
		a.tr.Consolidate()
	}
	if a.tr.Steps == steps {
		// No step (the pairs met their targets): the factors, so the
		// version, are as they were.
		return
	}
	m.publish(a, time.Since(a.saved) >= m.opt.SaveEvery)
}
