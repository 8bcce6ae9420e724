package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/ruvllm/ruvllm/internal/serving"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

func init() {
	register("inspect", "print a GGUF file's architecture, hyperparameters, tokenizer, template and tensors", runInspect)
}

type inspectTensor struct {
	Name  string   `json:"name"`
	Type  string   `json:"type"`
	Shape []uint64 `json:"shape"`
	Bytes uint64   `json:"bytes"`
}

// inspectLayout is one role of the architecture's description and how the
// file's tensors fit it.
type inspectLayout struct {
	Tensor   string `json:"tensor"` // the role's name, "attn_q.weight"
	Block    bool   `json:"per_block"`
	Shape    []int  `json:"shape"` // row-major, as the description wants it
	Optional bool   `json:"optional"`
	Present  int    `json:"present"`
	// ChannelMajor are the present tensors a sparsified file stores
	// input-channel-major, with their thresholds.
	ChannelMajor int      `json:"channel_major,omitempty"`
	Missing      int      `json:"missing"`
	Wrong        []string `json:"wrong_shape,omitempty"`
}

type inspectReport struct {
	Path         string          `json:"path"`
	Version      uint32          `json:"gguf_version"`
	Architecture string          `json:"architecture"`
	Config       *models.Config  `json:"hyperparameters,omitempty"`
	ConfigError  string          `json:"hyperparameters_error,omitempty"`
	Layout       []inspectLayout `json:"layout,omitempty"`
	MoE          *inspectMoE     `json:"mixture_of_experts,omitempty"`
	Unused       []string        `json:"unused_tensors,omitempty"`
	Tokenizer    map[string]any  `json:"tokenizer"`
	ChatTemplate string          `json:"chat_template,omitempty"`
	Metadata     map[string]any  `json:"metadata"`
	Tensors      []inspectTensor `json:"tensors"`
	TotalBytes   uint64          `json:"tensor_bytes"`
}

func runInspect(e *env, args []string) error {
	fs := newFlags("inspect", "--model PATH [--json]")
	model := fs.String("model", "", "GGUF file")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := fs.parse(args, e.stdout)
	if err != nil {
		return err
	}
	if *model == "" && len(pos) == 1 {
		*model = pos[0]
	}
	if *model == "" {
		return fmt.Errorf("%w: --model PATH is required", errUsage)
	}
	if *model, err = serving.ResolveModelFile(context.Background(), e.log, *model, ""); err != nil {
		return err
	}
	f, err := gguf.Open(*model)
	if err != nil {
		return err
	}
	defer f.Close()
	r := inspectReport{Path: *model, Version: f.Version, Metadata: map[string]any{}, Tokenizer: map[string]any{}}
	r.Architecture, _ = f.GetString("general.architecture")
	if c, err := models.ReadConfig(f); err == nil {
		r.Config = c
		r.Layout, r.Unused = layoutOf(f, c)
		r.MoE = moeOf(f, c)
	} else {
		r.ConfigError = err.Error()
	}
	r.ChatTemplate, _ = f.GetString("tokenizer.chat_template")
	for _, kv := range f.KV {
		switch {
		case kv.Key == "tokenizer.chat_template":
		case strings.HasPrefix(kv.Key, "tokenizer.ggml."):
			k := strings.TrimPrefix(kv.Key, "tokenizer.ggml.")
			if kv.Value.Len() > 0 {
				r.Tokenizer[k] = fmt.Sprintf("[%d × %v]", kv.Value.Len(), kv.Value.Elem)
			} else {
				r.Tokenizer[k] = kv.Value.Any()
			}
		case kv.Value.Len() > 16:
			r.Metadata[kv.Key] = fmt.Sprintf("[%d × %v]", kv.Value.Len(), kv.Value.Elem)
		default:
			r.Metadata[kv.Key] = kv.Value.Any()
		}
	}
	for _, t := range f.Tensors {
		r.Tensors = append(r.Tensors, inspectTensor{Name: t.Name, Type: t.Type.String(), Shape: t.Dims, Bytes: t.Size})
		r.TotalBytes += t.Size
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	printInspect(e.stdout, f, &r)
	return nil
}

func printInspect(w io.Writer, f *gguf.File, r *inspectReport) {
	fmt.Fprintf(w, "file:          %s (GGUF v%d, %d metadata keys, %d tensors, %s of tensor data)\n",
		r.Path, r.Version, len(f.KV), len(r.Tensors), humanBytes(r.TotalBytes))
	fmt.Fprintf(w, "architecture:  %s\n", r.Architecture)
	if c := r.Config; c != nil {
		fmt.Fprintf(w, "hyperparameters:\n")
		fmt.Fprintf(w, "  context %d, dim %d, layers %d, ffn %d, heads %d, kv heads %d, head dim %d, vocab %d\n",
			c.ContextLength, c.Dim, c.Layers, c.FFN, c.Heads, c.KVHeads, c.HeadDim, c.VocabSize)
		fmt.Fprintf(w, "  rms eps %g, rope %s base %g dims %d scale %g, tied output %v, attention scale %g\n",
			c.NormEps, c.Rope, c.RopeBase, c.RopeDim, c.RopeScale, c.TiedOutput, c.AttnScale)
		if c.RopeFactors != nil {
			fmt.Fprintf(w, "  rope frequency factors (llama3 scaling from the rope.scaling keys) %v\n", c.RopeFactors)
		}
		if c.EmbedScale != 0 || c.AttnSoftCap != 0 || c.FinalSoftCap != 0 {
			fmt.Fprintf(w, "  embedding scale %g, attention soft-cap %g, logit soft-cap %g\n", c.EmbedScale, c.AttnSoftCap, c.FinalSoftCap)
		}
		if c.SlidingWindow > 0 {
			var windowed []string
			for l := range c.Layers {
				if c.Windowed(l) {
					windowed = append(windowed, strconv.Itoa(l))
				}
			}
			fmt.Fprintf(w, "  sliding window %d in layers %s, their rope base %g scale %g\n",
				c.SlidingWindow, strings.Join(windowed, " "), c.RopeBaseSWA, c.RopeScaleSWA)
		}
		if m := r.MoE; m != nil {
			fmt.Fprintf(w, "  mixture of experts: %d experts of ffn %d, %d active per token (%s%s)\n",
				m.Experts, m.ExpertFFN, m.ExpertsUsed, m.Gating, map[bool]string{true: ", weights renormalised"}[m.NormTopK])
			fmt.Fprintf(w, "  parameters %s, active per token %s; bytes read per token %s (experts %s of %s, the rest %s)\n",
				humanCount(m.Parameters), humanCount(m.ActiveParameters), humanBytes(m.BytesPerToken),
				humanBytes(m.ExpertBytes*uint64(m.ExpertsUsed)/uint64(m.Experts)), humanBytes(m.ExpertBytes), humanBytes(m.BytesPerToken-m.ExpertBytes*uint64(m.ExpertsUsed)/uint64(m.Experts)))
		}
		fmt.Fprintf(w, "layout (what the %s description names; per-block tensors counted over %d blocks):\n", c.Arch, c.Layers)
		for _, e := range r.Layout {
			fmt.Fprintf(w, "  %-24s %-14s %s\n", e.Tensor, fmt.Sprint(e.Shape), e.status())
			for _, s := range e.Wrong {
				fmt.Fprintf(w, "    %s\n", s)
			}
		}
		if len(r.Unused) > 0 {
			fmt.Fprintf(w, "  not in the description (unused): %s\n", strings.Join(r.Unused, ", "))
		}
	} else {
		fmt.Fprintf(w, "hyperparameters: %s\n", r.ConfigError)
	}
	fmt.Fprintf(w, "tokenizer:\n")
	keys := make([]string, 0, len(r.Tokenizer))
	for k := range r.Tokenizer {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %-24s %v\n", k, r.Tokenizer[k])
	}
	if r.ChatTemplate != "" {
		first, _, _ := strings.Cut(r.ChatTemplate, "\n")
		if len(first) > 100 {
			first = first[:100] + "…"
		}
		fmt.Fprintf(w, "chat template: %d bytes: %s\n", len(r.ChatTemplate), first)
	} else {
		fmt.Fprintf(w, "chat template: none (ChatML is used)\n")
	}
	fmt.Fprintf(w, "metadata:\n")
	for _, kv := range f.KV {
		if v, ok := r.Metadata[kv.Key]; ok {
			fmt.Fprintf(w, "  %-40s %v\n", kv.Key, v)
		}
	}
	fmt.Fprintf(w, "tensors:\n  %-32s %-8s %-20s %s\n", "name", "type", "shape", "bytes")
	for _, t := range r.Tensors {
		fmt.Fprintf(w, "  %-32s %-8s %-20s %d\n", t.Name, t.Type, fmt.Sprint(t.Shape), t.Bytes)
	}
}

// inspectMoE is what a mixture of experts reads per token: its experts,
// how many a token is routed to, and the bytes of the file one token's
// forward pass reads (every tensor but the token embeddings, of which it
// reads one row, and of the experts' tensors the active experts' slices).
type inspectMoE struct {
	Experts          int    `json:"experts"`
	ExpertsUsed      int    `json:"experts_used"`
	ExpertFFN        int    `json:"expert_ffn"`
	Gating           string `json:"gating"`
	NormTopK         bool   `json:"norm_topk_prob"`
	Parameters       int64  `json:"parameters"`
	ActiveParameters int64  `json:"active_parameters"`
	ExpertBytes      uint64 `json:"expert_bytes"`
	BytesPerToken    uint64 `json:"bytes_read_per_token"`
}

// moeOf measures f's mixture of experts; nil for a dense model.
func moeOf(f *gguf.File, c *models.Config) *inspectMoE {
	if !c.IsMoE() {
		return nil
	}
	m := &inspectMoE{Experts: c.Experts, ExpertsUsed: c.ExpertsUsed, ExpertFFN: c.ExpertFFN, NormTopK: c.NormTopK,
		Gating: "softmax over all experts", ActiveParameters: c.ActiveParameters(c.Architecture())}
	if c.Gating == models.GatingSoftmaxChosen {
		m.Gating = "softmax over the chosen"
	}
	var rest uint64
	for _, t := range f.Tensors {
		elems := int64(1)
		for _, d := range t.Dims {
			elems *= int64(d)
		}
		m.Parameters += elems
		r, _, known := models.ParseTensorName(t.Name)
		switch {
		case known && r.Spec().Experts:
			m.ExpertBytes += t.Size
		case t.Name == models.TensorName(models.TokenEmbd, -1) && len(t.Dims) == 2 && t.Dims[1] > 0:
			rest += t.Size / t.Dims[1] // one row
			if c.TiedOutput {
				rest += t.Size - t.Size/t.Dims[1] // the output projection reads it whole
			}
		default:
			rest += t.Size
		}
	}
	m.BytesPerToken = rest + m.ExpertBytes*uint64(c.ExpertsUsed)/uint64(c.Experts)
	return m
}

// humanCount is n in billions or millions.
func humanCount(n int64) string {
	if n >= 1e9 {
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	}
	return fmt.Sprintf("%.2fM", float64(n)/1e6)
}

func humanBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// layoutOf checks f's tensors against the description of c's architecture.
func layoutOf(f *gguf.File, c *models.Config) ([]inspectLayout, []string) {
	names := make([]string, len(f.Tensors))
	for i, t := range f.Tensors {
		names[i] = t.Name
	}
	lay := c.Architecture().Layout(c, names, func(n string) ([]uint64, bool) {
		if ti, ok := f.Tensor(n); ok {
			return ti.Dims, true
		}
		return nil, false
	})
	out := make([]inspectLayout, len(lay.Entries))
	for i, e := range lay.Entries {
		out[i] = inspectLayout{Tensor: e.Role.String(), Block: e.Role.Spec().Block, Shape: e.Shape, Optional: e.Optional,
			Present: e.Present, ChannelMajor: e.ChannelMajor, Missing: e.Missing, Wrong: e.Wrong}
	}
	return out, lay.Unused
}

// status says in a few words how the file holds the role's tensors.
func (e inspectLayout) status() string {
	total := e.Present + e.Missing + len(e.Wrong)
	switch {
	case len(e.Wrong) > 0:
		return fmt.Sprintf("WRONG SHAPE (%d of %d)", len(e.Wrong), total)
	case e.Missing == 0 && e.ChannelMajor > 0:
		return fmt.Sprintf("ok (%d, %d channel-major)", e.Present, e.ChannelMajor)
	case e.Missing == 0:
		return fmt.Sprintf("ok (%d)", e.Present)
	case e.Optional && e.Present == 0:
		return "absent (optional)"
	}
	return fmt.Sprintf("MISSING %d of %d", e.Missing, total)
}
