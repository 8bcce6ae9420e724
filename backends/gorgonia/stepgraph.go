package gorgonia

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// Training graphs are compiled once per shape and reused: compiling is
// most of what building a graph costs, and examples of nearby lengths
// share a shape once their sequences are padded (seqInputs). A cached
// graph's inputs are refilled for each example (the embeddings, the rows
// to score, scalars such as DPO's reference margin), and the adapter's
// nodes hold the factors' own tensors, which Adam updates in place.

// termKind is what a term of the loss computes.
type termKind int

const (
	termScore  termKind = iota // the log-probabilities of its sequences
	termSFT                    // scalars[0]·log p: −1/len(completion)·log p
	termDPO                    // softplus(−β·((log p₀ − log p₁) − scalars[0]))
	termKTO                    // 1 − σ(β·scalars[2]·((log p − scalars[0]) − scalars[1]))
	termMargin                 // max(0, scalars[0] − (log p₀ − log p₁))
)

// term is one term of an example's loss: its kind, the sequences (prompt,
// completion) it scores, and the scalar inputs it reads.
type term struct {
	kind    termKind
	seqs    [][2][]tokenizer.ID
	scalars []float32
}

// plan lists the terms of an example's loss under obj.
func (tr *Trainer) plan(obj Objective, ex *Scored) []term {
	switch obj {
	case SFT:
		return []term{{kind: termSFT, seqs: [][2][]tokenizer.ID{{ex.Prompt, ex.Chosen}}, scalars: []float32{-1 / float32(len(ex.Chosen))}}}
	case DPO:
		return []term{{kind: termDPO, seqs: [][2][]tokenizer.ID{{ex.Prompt, ex.Chosen}, {ex.Prompt, ex.Rejected}},
			scalars: []float32{float32(ex.RefChosen - ex.RefRejected)}}}
	case Margin:
		target := tr.opt.Margin + max(0, ex.RefChosen-ex.RefRejected)
		return []term{{kind: termMargin, seqs: [][2][]tokenizer.ID{{ex.Prompt, ex.Chosen}, {ex.Prompt, ex.Rejected}},
			scalars: []float32{float32(target)}}}
	}
	var terms []term
	if ex.Rating >= 0 && len(ex.Chosen) > 0 {
		terms = append(terms, term{kind: termKTO, seqs: [][2][]tokenizer.ID{{ex.Prompt, ex.Chosen}}, scalars: []float32{float32(ex.RefChosen), float32(tr.kl), 1}})
	}
	if ex.Rating <= 0 && len(ex.Rejected) > 0 {
		terms = append(terms, term{kind: termKTO, seqs: [][2][]tokenizer.ID{{ex.Prompt, ex.Rejected}}, scalars: []float32{float32(ex.RefRejected), float32(tr.kl), -1}})
	}
	return terms
}

// shapeKey names the compiled graph of terms.
func shapeKey(terms [][]term, adapter, grad bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v%v", adapter, grad)
	for _, ex := range terms {
		b.WriteByte('|')
		for _, t := range ex {
			b.WriteString(strconv.Itoa(int(t.kind)))
			for _, s := range t.seqs {
				fmt.Fprintf(&b, ":%d/%d", padded(len(s[0])+len(s[1])), padded(len(s[1])))
			}
			b.WriteByte(';')
		}
	}
	return b.String()
}

// stepGraph is a compiled training or scoring graph.
type stepGraph struct {
	vm      G.VM
	outs    []*G.Node // the loss, or each sequence's log p
	nodes   []*G.Node // the adapter's factors, in the trainer's param order
	seqs    []*seqInputs
	scalars []*G.Node
	reads   []*G.Value // the outs' values after a run
	dt      tensor.Dtype
}

// scalar is v as a scalar of the graph's element type.
func (sg *stepGraph) scalar(v float32) any {
	if sg.dt == tensor.Float64 {
		return float64(v)
	}
	return v
}

// maxGraphs bounds the compiled graphs a trainer keeps.
const maxGraphs = 64

// run computes terms (one list per example) with the adapter or the base
// model: the mean loss and, with grad, the gradient of each param; or,
// for score terms, each sequence's log p.
func (tr *Trainer) run(terms [][]term, adapter, grad bool) ([]float64, []G.Value, error) {
	key := shapeKey(terms, adapter, grad)
	sg, ok := tr.graphs[key]
	if !ok {
		var err error
		if sg, err = tr.compile(terms, adapter, grad); err != nil {
			return nil, nil, err
		}
		if len(tr.graphs) >= maxGraphs {
			for k, old := range tr.graphs {
				old.vm.Close()
				delete(tr.graphs, k)
			}
		}
		tr.graphs[key] = sg
	}
	si, ci := 0, 0
	for _, ex := range terms {
		for _, t := range ex {
			for _, s := range t.seqs {
				sg.seqs[si].fill(tr.m, s[0], s[1])
				si++
			}
			for _, v := range t.scalars {
				if err := G.Let(sg.scalars[ci], sg.scalar(v)); err != nil {
					return nil, nil, err
				}
				ci++
			}
		}
	}
	sg.vm.Reset()
	if err := sg.vm.RunAll(); err != nil {
		return nil, nil, err
	}
	outs := make([]float64, len(sg.outs))
	for i, v := range sg.reads {
		outs[i] = scalarOf(*v)
	}
	if !grad {
		return outs, nil, nil
	}
	grads := make([]G.Value, len(sg.nodes))
	for i, nd := range sg.nodes {
		g, err := nd.Grad()
		if err != nil {
			return nil, nil, err
		}
		grads[i] = g
	}
	return outs, grads, nil
}

// compile builds and compiles the graph of terms.
func (tr *Trainer) compile(terms [][]term, adapter, grad bool) (*stepGraph, error) {
	gr := newGraphOf(tr.dt)
	sg := &stepGraph{dt: tr.dt}
	var lf map[string]*loraFactors
	if adapter {
		lf, sg.nodes = tr.factors(gr)
	}
	beta := tr.opt.Beta
	scalar := func(v float32) *G.Node {
		gr.inputs++
		n := G.NewScalar(gr.g, tr.dt, G.WithName("s"+strconv.Itoa(gr.inputs)), G.WithValue(sg.scalar(v)))
		sg.scalars = append(sg.scalars, n)
		return n
	}
	var loss *G.Node
	err := build(func() {
		for _, ex := range terms {
			for _, t := range ex {
				lps := make([]*G.Node, len(t.seqs))
				for i, s := range t.seqs {
					in := newSeqInputs(tr.m, padded(len(s[0])+len(s[1])), padded(len(s[1])), tr.dt)
					sg.seqs = append(sg.seqs, in)
					n := newNet(gr, tr.m, in.t, 0, pastKV{})
					n.lora = lf
					lps[i] = n.completionLogp(in)
				}
				sc := make([]*G.Node, len(t.scalars))
				for i, v := range t.scalars {
					sc[i] = scalar(v)
				}
				var l *G.Node
				switch t.kind {
				case termScore:
					sg.outs = append(sg.outs, lps...)
					continue
				case termSFT:
					l = must(G.Mul(lps[0], sc[0]))
				case termDPO:
					z := must(G.Sub(must(G.Sub(lps[0], lps[1])), sc[0]))
					l = must(G.Softplus(must(G.Mul(z, gr.constant(-beta)))))
				case termMargin:
					l = must(G.Rectify(must(G.Sub(sc[0], must(G.Sub(lps[0], lps[1]))))))
				case termKTO:
					d := must(G.Mul(must(G.Sub(must(G.Sub(lps[0], sc[0])), sc[1])), sc[2]))
					l = must(G.Sub(gr.constant(1), must(G.Sigmoid(must(G.Mul(d, gr.constant(beta)))))))
				}
				if loss == nil {
					loss = l
				} else {
					loss = must(G.Add(loss, l))
				}
			}
		}
		if loss != nil {
			loss = must(G.Mul(loss, gr.constant(1/float64(len(terms)))))
			sg.outs = []*G.Node{loss}
		}
		if grad {
			_, err := G.Grad(loss, sg.nodes...)
			must(nil, err)
		}
	})
	if err != nil {
		return nil, err
	}
	// Without TraceExec the machine reuses the memory of intermediate
	// values; the outputs are read through Read ops, the gradients from
	// the factors' nodes.
	sg.reads = make([]*G.Value, len(sg.outs))
	for i, o := range sg.outs {
		sg.reads[i] = new(G.Value)
		G.Read(o, sg.reads[i])
	}
	sg.vm = G.NewTapeMachine(gr.g)
	return sg, nil
}

// scalarOf is a scalar value's float.
func scalarOf(val G.Value) float64 {
	if val == nil {
		return math.NaN()
	}
	switch v := val.Data().(type) {
	case float32:
		return float64(v)
	case []float32:
		return float64(v[0])
	case float64:
		return v
	case []float64:
		return v[0]
	}
	return math.NaN()
}
