package kernels

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countJob counts how often each task ran and checks the worker numbers.
type countJob struct {
	hits    []atomic.Int32
	size    int
	badWork atomic.Int32
}

func (j *countJob) Do(task, worker int) {
	if worker < 0 || worker >= j.size {
		j.badWork.Add(1)
	}
	j.hits[task].Add(1)
}

// check reports whether tasks 0 … n-1 ran once each and no other task
// ran, and resets the counts. It returns an error rather than failing the
// test, so that goroutines other than the test's can call it.
func (j *countJob) check(n int) error {
	for i := range n {
		if h := j.hits[i].Swap(0); h != 1 {
			return fmt.Errorf("task %d of %d ran %d times", i, n, h)
		}
	}
	for i := n; i < len(j.hits); i++ {
		if h := j.hits[i].Load(); h != 0 {
			return fmt.Errorf("task %d beyond %d ran", i, n)
		}
	}
	if b := j.badWork.Load(); b != 0 {
		return fmt.Errorf("%d calls with a worker number outside [0, %d)", b, j.size)
	}
	return nil
}

func TestPoolRunsEveryTaskOnce(t *testing.T) {
	for _, size := range []int{1, 2, 3, 8} {
		t.Run(fmt.Sprintf("threads=%d", size), func(t *testing.T) {
			p := NewPool(size)
			defer p.Close()
			if p.Size() != size {
				t.Fatalf("Size() = %d, want %d", p.Size(), size)
			}
			j := &countJob{hits: make([]atomic.Int32, 200), size: size}
			r := rand.New(rand.NewPCG(uint64(size), 1))
			for range 2000 {
				n := r.IntN(len(j.hits) + 1)
				p.Run(n, j)
				if err := j.check(n); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestPoolAfterParking(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	j := &countJob{hits: make([]atomic.Int32, 64), size: 3}
	for range 3 {
		time.Sleep(20 * time.Millisecond) // long past the spin budget: workers park
		p.Run(64, j)
		if err := j.check(64); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPoolUsesWorkers(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	var seen [2]atomic.Int32
	job := JobFunc(func(_, worker int) {
		seen[worker].Add(1)
		time.Sleep(100 * time.Microsecond)
	})
	for range 20 {
		p.Run(20, job)
		if seen[1].Load() > 0 {
			return
		}
	}
	t.Errorf("worker 1 never ran a task (caller ran %d)", seen[0].Load())
}

func TestPoolConcurrentRuns(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j := &countJob{hits: make([]atomic.Int32, 50), size: 3}
			for i := range 300 {
				n := (i*7 + g) % 51
				p.Run(n, j)
				if err := j.check(n); err != nil {
					// t.Fatal must not be called from this goroutine.
					t.Errorf("goroutine %d, run %d: %v", g, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestPoolNilAndClosed(t *testing.T) {
	var nilPool *Pool
	j := &countJob{hits: make([]atomic.Int32, 10), size: 1}
	nilPool.Run(10, j)
	if err := j.check(10); err != nil {
		t.Fatal(err)
	}
	nilPool.Close()

	p := NewPool(4)
	p.Close()
	p.Close()
	if p.Size() != 1 {
		t.Errorf("closed pool Size() = %d, want 1", p.Size())
	}
	p.Run(10, j)
	if err := j.check(10); err != nil {
		t.Fatal(err)
	}
}

func TestPoolRunDoesNotAllocate(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	j := &countJob{hits: make([]atomic.Int32, 64), size: 2}
	allocs := testing.AllocsPerRun(200, func() {
		p.Run(64, j)
		for i := range j.hits {
			j.hits[i].Store(0)
		}
	})
	if allocs != 0 {
		t.Errorf("Run allocates %v times", allocs)
	}
}

func TestNewPoolDefaultsToNumCPU(t *testing.T) {
	p := NewPool(0)
	defer p.Close()
	if p.Size() != runtime.NumCPU() {
		t.Errorf("Size() = %d, want runtime.NumCPU() = %d", p.Size(), runtime.NumCPU())
	}
}

type nopJob struct{}

func (nopJob) Do(int, int) {}

func BenchmarkPoolRun(b *testing.B) {
	for _, size := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", size), func(b *testing.B) {
			p := NewPool(size)
			defer p.Close()
			for b.Loop() {
				p.Run(16, nopJob{})
			}
		})
	}
}
