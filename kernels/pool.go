package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Job is work split into numbered tasks. Do runs task number task (0 ≤ task <
// nTasks) on worker number worker (0 ≤ worker < Pool.Size()); no two calls
// with the same worker number run at once, so a worker may own scratch space.
type Job interface {
	Do(task, worker int)
}

// JobFunc adapts a function to Job. A closure that captures variables is
// allocated on the heap each time it is made; hot loops keep a Job value
// instead.
type JobFunc func(task, worker int)

// Do calls f(task, worker).
func (f JobFunc) Do(task, worker int) { f(task, worker) }

// Pool runs the tasks of a Job on a fixed set of goroutines and the calling
// one. The goroutines start once, in NewPool. A Run publishes the job under a
// new generation number; workers that notice it in time join, and they and
// the caller take tasks from a shared atomic counter until none is left. The
// caller then closes the generation to latecomers and waits only for the
// workers that joined. Idle workers spin for half a millisecond before they
// park, so the Runs of a decode step, with the serial work between them,
// find them awake, and a parked worker that wakes too late costs the Run
// nothing.
//
// A nil *Pool is valid and runs everything on the caller. Run does not
// allocate. Runs on one Pool are serialised; a Job must not call Run on its
// own Pool.
type Pool struct {
	size int

	mu     sync.Mutex // serialises Run and Close
	gen    uint64     // generation of the last Run; guarded by mu
	job    Job
	nTasks int64
	closed atomic.Bool

	_ [64]byte
	// state is gen<<32 | stateClosed | the number of workers in the job.
	state atomic.Uint64
	_     [56]byte
	next  atomic.Int64 // the next task to hand out
	_     [56]byte

	workers []poolWorker
	wg      sync.WaitGroup

	// Jobs of this package's own parallel kernels, kept here so that a call
	// needs no allocation; guarded by mu.
	mat     matJob
	gemm    gemmJob
	prep    prepJob
	quan    quantJob
	packed  packedJob
	inter   interleavedJob
	interMM interleavedMMJob
}

const (
	stateClosed = 1 << 31
	stateCount  = stateClosed - 1
)

type poolWorker struct {
	parked atomic.Bool   // set by the worker before it blocks on wake
	wake   chan struct{} // capacity 1
	_      [48]byte
}

// How long an idle worker spins before it parks, and how often (in polls of
// the state) it yields the processor and looks at the clock meanwhile. The
// serial stretches of a forward pass (a SwiGLU, the rope and the KV stores
// of a batch) last tens of microseconds; a worker that parked in one joined
// the next jobs late, which made the 8-token matrix products after a SwiGLU
// take twice their time. Half a millisecond of spinning after the last job
// costs an idle server nothing worth counting.
const (
	spinFor       = 500 * time.Microsecond
	spinYieldMask = 1<<10 - 1
)

// NewPool starts a pool of n threads of work: the caller of Run and n−1
// goroutines. n ≤ 0 means runtime.NumCPU().
func NewPool(n int) *Pool {
	if n <= 0 {
		n = runtime.NumCPU()
	}
	p := &Pool{size: n, workers: make([]poolWorker, n-1)}
	for i := range p.workers {
		p.workers[i].wake = make(chan struct{}, 1)
	}
	p.wg.Add(n - 1)
	for i := 1; i < n; i++ {
		go p.work(i)
	}
	return p
}

// Size is the number of workers a Job sees, the caller included; 1 for a nil
// or closed Pool.
func (p *Pool) Size() int {
	if p == nil || p.closed.Load() {
		return 1
	}
	return p.size
}

// Run calls job.Do for every task 0 ≤ task < nTasks, spread over the workers,
// and returns when all have returned.
func (p *Pool) Run(nTasks int, job Job) {
	if p == nil {
		runSerial(nTasks, job)
		return
	}
	p.mu.Lock()
	p.run(nTasks, job)
	p.mu.Unlock()
}

func runSerial(nTasks int, job Job) {
	for t := range nTasks {
		job.Do(t, 0)
	}
}

// run is Run with p.mu held.
func (p *Pool) run(nTasks int, job Job) {
	if nTasks <= 0 {
		return
	}
	if p.size == 1 || nTasks == 1 || p.closed.Load() {
		runSerial(nTasks, job)
		return
	}
	p.job, p.nTasks = job, int64(nTasks)
	p.next.Store(0)
	p.gen++
	p.state.Store(p.gen << 32)
	p.wakeAll()
	p.drain(0)
	for {
		s := p.state.Load()
		if p.state.CompareAndSwap(s, s|stateClosed) {
			break
		}
	}
	for i := 0; p.state.Load()&stateCount != 0; i++ {
		if i&spinYieldMask == spinYieldMask {
			runtime.Gosched()
		}
	}
	p.job = nil
}

// drain takes tasks of the current job until none is left.
func (p *Pool) drain(worker int) {
	job, n := p.job, p.nTasks
	for {
		t := p.next.Add(1) - 1
		if t >= n {
			return
		}
		job.Do(int(t), worker)
	}
}

// wakeAll hands a token to every parked worker. A worker sets parked and then
// reads the state; Run stores the state and then clears parked: with
// sequentially consistent atomics one of the two sees the other, so a worker
// either sees the new generation or gets the token.
func (p *Pool) wakeAll() {
	for i := range p.workers {
		w := &p.workers[i]
		if w.parked.Load() && w.parked.CompareAndSwap(true, false) {
			w.wake <- struct{}{}
		}
	}
}

func (p *Pool) work(id int) {
	defer p.wg.Done()
	w := &p.workers[id-1]
	var seen uint64
	for {
		s := p.await(w, seen)
		seen = s >> 32
		if p.closed.Load() {
			return
		}
		// Join the generation unless the caller has closed it already.
		for s>>32 == seen && s&stateClosed == 0 {
			if p.state.CompareAndSwap(s, s+1) {
				p.drain(id)
				p.state.Add(^uint64(0))
				break
			}
			s = p.state.Load()
		}
	}
}

// await returns the state once its generation differs from seen, spinning
// briefly and then parking.
func (p *Pool) await(w *poolWorker, seen uint64) uint64 {
	start := time.Now()
	for i := 0; ; i++ {
		if s := p.state.Load(); s>>32 != seen {
			return s
		}
		if i&spinYieldMask == spinYieldMask {
			runtime.Gosched()
			if time.Since(start) > spinFor {
				break
			}
		}
	}
	for {
		w.parked.Store(true)
		if s := p.state.Load(); s>>32 != seen {
			if !w.parked.CompareAndSwap(true, false) {
				<-w.wake // Run cleared the flag and is sending a token: take it
			}
			return s
		}
		<-w.wake
		if s := p.state.Load(); s>>32 != seen {
			return s
		}
	}
}

// Close stops the goroutines. Later Runs run on the caller alone.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Swap(true) {
		return
	}
	p.gen++
	p.state.Store(p.gen << 32)
	p.wakeAll()
	p.wg.Wait()
}
