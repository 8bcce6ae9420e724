package lora

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/ruvllm/ruvllm/models"
)

// Names of the two files of a PEFT adapter directory.
const (
	PEFTConfigFile  = "adapter_config.json"
	PEFTWeightsFile = "adapter_model.safetensors"
)

// PEFTConfig is the part of a PEFT adapter_config.json that says how to
// apply a LoRA adapter.
type PEFTConfig struct {
	PeftType string   `json:"peft_type"` // "LORA"
	R        int      `json:"r"`
	Alpha    *float64 `json:"lora_alpha"` // required: PEFT always writes it
	// TargetModules is a list of module names or one regular expression;
	// informative only, as the tensors present say what is updated.
	TargetModules json.RawMessage `json:"target_modules,omitempty"`
	UseRSLoRA     bool            `json:"use_rslora"`
	UseDoRA       bool            `json:"use_dora"`
	// RankPattern and AlphaPattern override r and lora_alpha for the
	// modules whose name matches a key.
	RankPattern  map[string]int     `json:"rank_pattern,omitempty"`
	AlphaPattern map[string]float64 `json:"alpha_pattern,omitempty"`
	BaseModel    string             `json:"base_model_name_or_path,omitempty"`
	Bias         string             `json:"bias,omitempty"`
}

// ParsePEFTConfig reads adapter_config.json and checks the settings this
// package can honour.
func ParsePEFTConfig(data []byte) (*PEFTConfig, error) {
	var c PEFTConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, invalidf("%s: %v", PEFTConfigFile, err)
	}
	switch {
	case c.PeftType != "" && !strings.EqualFold(c.PeftType, "LORA"):
		return nil, invalidf("%s: peft_type %q is not LORA", PEFTConfigFile, c.PeftType)
	case c.R <= 0:
		return nil, invalidf("%s: r = %d must be positive", PEFTConfigFile, c.R)
	case c.Alpha == nil:
		return nil, invalidf("%s: lora_alpha is missing", PEFTConfigFile)
	case math.IsNaN(*c.Alpha) || math.IsInf(*c.Alpha, 0):
		return nil, invalidf("%s: lora_alpha %v is not finite", PEFTConfigFile, *c.Alpha)
	case c.UseDoRA:
		return nil, invalidf("%s: DoRA (use_dora) adapters are not supported", PEFTConfigFile)
	case c.Bias != "" && c.Bias != "none":
		return nil, invalidf("%s: bias %q is not supported (only \"none\")", PEFTConfigFile, c.Bias)
	}
	for k, r := range c.RankPattern {
		if r <= 0 {
			return nil, invalidf("%s: rank_pattern %q = %d must be positive", PEFTConfigFile, k, r)
		}
	}
	return &c, nil
}

// patternValue finds the key of a PEFT rank_pattern or alpha_pattern that
// matches module, as PEFT does: the key is the module's name or a suffix of
// it after a dot, or else a regular expression matching such a suffix. The
// longest matching key wins, so the choice does not depend on map order.
func patternValue[V any](pattern map[string]V, module string) (V, bool) {
	keys := make([]string, 0, len(pattern))
	for k := range pattern {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return len(keys[i]) > len(keys[j]) || len(keys[i]) == len(keys[j]) && keys[i] < keys[j]
	})
	for _, k := range keys {
		if module == k || strings.HasSuffix(module, "."+k) {
			return pattern[k], true
		}
	}
	for _, k := range keys {
		if re, err := regexp.Compile(`^(.*\.)?(` + k + `)$`); err == nil && re.MatchString(module) {
			return pattern[k], true
		}
	}
	var zero V
	return zero, false
}

// GGUFName maps a Hugging Face module path ("model.layers.3.self_attn.q_proj",
// "lm_head") of a model of architecture a to the GGUF name of its weight
// ("blk.3.attn_q.weight", "output.weight"), as the family names its roles.
func GGUFName(a *models.Architecture, module string) (string, error) {
	r, layer, ok := a.RoleOfModule(module)
	if !ok && strings.Contains(module, ".experts.") {
		return "", errExperts(module)
	}
	if !ok {
		var known []string
		for _, t := range a.Tensors {
			if m := a.Module(t.Role, 0); m != "" {
				known = append(known, strings.TrimPrefix(m, "model.layers.0."))
			}
		}
		return "", invalidf("module %q is not one an adapter can update in a %s model (%s, of model.layers.N or the whole model)", module, a.Name, strings.Join(known, ", "))
	}
	return models.TensorName(r, layer), nil
}

// peftTensorName splits a PEFT tensor name
// ("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight") into
// the module path and "A" or "B". Names saved with the adapter's name
// (".lora_A.default.weight") are accepted too.
func peftTensorName(name string) (module, part string, err error) {
	rest := strings.TrimPrefix(name, "base_model.model.")
	for _, p := range []string{"A", "B"} {
		for _, suffix := range []string{".lora_" + p + ".weight", ".lora_" + p + ".default.weight"} {
			if m, ok := strings.CutSuffix(rest, suffix); ok {
				return m, p, nil
			}
		}
	}
	switch {
	case strings.Contains(name, "lora_magnitude_vector"):
		return "", "", invalidf("tensor %q belongs to a DoRA adapter, which is not supported", name)
	case strings.Contains(name, "lora_embedding_"):
		return "", "", invalidf("tensor %q updates the token embeddings, which is not supported", name)
	case strings.HasSuffix(name, ".bias"):
		return "", "", invalidf("tensor %q is a bias; adapters with trained biases are not supported", name)
	}
	return "", "", invalidf("tensor %q is not a LoRA A or B matrix (full weights saved with modules_to_save are not supported)", name)
}

// ParsePEFT reads a PEFT adapter from the contents of its
// adapter_config.json and adapter_model.safetensors, for the base model
// described by cfg. Module names become GGUF names; for llama, whose GGUF
// conversion reorders the rows of q and k within each head (RoPE pairs
// adjacent dimensions there, halves in Hugging Face), the rows of B of
// q_proj and k_proj are reordered the same way. Shapes are checked against
// cfg; Validate checks them against the base file.
func ParsePEFT(config, weights []byte, cfg *models.Config) (*Adapter, error) {
	pc, err := ParsePEFTConfig(config)
	if err != nil {
		return nil, err
	}
	st, err := ParseSafetensors(weights)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, PEFTWeightsFile, err)
	}
	type pair struct{ a, b *SafeTensor }
	pairs := map[string]*pair{}
	for i := range st.Tensors {
		t := &st.Tensors[i]
		module, part, err := peftTensorName(t.Name)
		if err != nil {
			return nil, err
		}
		p := pairs[module]
		if p == nil {
			p = &pair{}
			pairs[module] = p
		}
		slot := &p.a
		if part == "B" {
			slot = &p.b
		}
		if *slot != nil {
			return nil, invalidf("two lora_%s tensors for %s", part, module)
		}
		*slot = t
	}
	modules := make([]string, 0, len(pairs))
	for m := range pairs {
		modules = append(modules, m)
	}
	sort.Strings(modules) // so that the first error reported does not vary
	var targets []*Target
	for _, module := range modules {
		p := pairs[module]
		if p.a == nil || p.b == nil {
			return nil, invalidf("%s has only one of lora_A and lora_B", module)
		}
		name, err := GGUFName(cfg.Architecture(), module)
		if err != nil {
			return nil, err
		}
		if len(p.a.Shape) != 2 || len(p.b.Shape) != 2 {
			return nil, invalidf("%s: lora_A %v and lora_B %v must be matrices", module, p.a.Shape, p.b.Shape)
		}
		rank, in, out := p.a.Shape[0], p.a.Shape[1], p.b.Shape[0]
		if p.b.Shape[1] != rank {
			return nil, invalidf("%s: rank mismatch: lora_A is %v (r, in) and lora_B %v (out, r)", module, p.a.Shape, p.b.Shape)
		}
		want := pc.R
		if r, ok := patternValue(pc.RankPattern, module); ok {
			want = r
		}
		if rank != want {
			return nil, invalidf("%s: rank mismatch: the tensors have rank %d, %s says r = %d", module, rank, PEFTConfigFile, want)
		}
		if wantIn, wantOut, ok := cfg.LinearShape(name); ok && (in != wantIn || out != wantOut) {
			return nil, invalidf("%s: the update is (out %d, in %d), the base model's %s is (out %d, in %d) (wrong base model?)", module, out, in, name, wantOut, wantIn)
		}
		alpha := *pc.Alpha
		if v, ok := patternValue(pc.AlphaPattern, module); ok {
			alpha = v
		}
		b, err := permuteQK(cfg, name, p.b.Float32s(), out, rank, permuteRoPERows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", module, err)
		}
		t, err := NewTarget(name, in, out, rank, p.a.Float32s(), b, scaleOf(alpha, rank, pc.UseRSLoRA))
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
	}
	return New("", cfg.Arch, float32(*pc.Alpha), pc.UseRSLoRA, FormatPEFT, targets)
}

// permuteQK applies permute to the rows of B (out, rank) of an update of q
// or k in a model whose GGUF conversion reordered q and k for RoPE
// (Architecture.PermutedQK), with the heads of that matrix; other updates
// pass unchanged.
func permuteQK(cfg *models.Config, name string, b []float32, out, rank int, permute func(b []float32, out, rank, heads int) ([]float32, error)) ([]float32, error) {
	if !cfg.Architecture().PermutedQK {
		return b, nil
	}
	switch r, _, _ := models.ParseTensorName(name); r {
	case models.AttnQ:
		return permute(b, out, rank, cfg.Heads)
	case models.AttnK:
		return permute(b, out, rank, cfg.KVHeads)
	}
	return b, nil
}

// permuteRoPERows reorders the rows of b (out, rank) as llama's GGUF
// conversion reorders q and k: within each of heads heads of d rows, the
// Hugging Face row i·d/2 + j (i ∈ {0, 1}, j < d/2) becomes row 2j + i.
func permuteRoPERows(b []float32, out, rank, heads int) ([]float32, error) {
	if heads <= 0 || out%heads != 0 || (out/heads)%2 != 0 {
		return nil, invalidf("%d rows cannot be split into %d heads of an even size", out, heads)
	}
	d := out / heads
	p := make([]float32, len(b))
	for h := range heads {
		for i := range 2 {
			for j := range d / 2 {
				src, dst := h*d+i*d/2+j, h*d+2*j+i
				copy(p[dst*rank:(dst+1)*rank], b[src*rank:(src+1)*rank])
			}
		}
	}
	return p, nil
}

// unpermuteRoPERows undoes permuteRoPERows, for writing PEFT files.
func unpermuteRoPERows(b []float32, out, rank, heads int) ([]float32, error) {
	if heads <= 0 || out%heads != 0 || (out/heads)%2 != 0 {
		return nil, invalidf("%d rows cannot be split into %d heads of an even size", out, heads)
	}
	d := out / heads
	p := make([]float32, len(b))
	for h := range heads {
		for i := range 2 {
			for j := range d / 2 {
				src, dst := h*d+2*j+i, h*d+i*d/2+j
				copy(p[dst*rank:(dst+1)*rank], b[src*rank:(src+1)*rank])
			}
		}
	}
	return p, nil
}

// WritePEFT writes a as a PEFT adapter directory (adapter_config.json and
// adapter_model.safetensors, F32) for a base model of cfg, creating dir.
// It undoes what ParsePEFT does: GGUF names become module names and, for
// llama, the rows of q and k go back to Hugging Face order. r is the
// largest rank and lora_alpha a.Alpha; updates whose rank or scale differ
// get rank_pattern and alpha_pattern entries.
func (a *Adapter) WritePEFT(dir string, cfg *models.Config) error {
	alpha := float64(a.Alpha)
	pc := PEFTConfig{PeftType: "LORA", R: a.Rank(), Alpha: &alpha, UseRSLoRA: a.RSLoRA, Bias: "none",
		RankPattern: map[string]int{}, AlphaPattern: map[string]float64{}}
	var tensors []SafeTensor
	var modules []string
	for _, t := range a.Targets() {
		module, err := hfModule(cfg.Architecture(), t.Name)
		if err != nil {
			return err
		}
		modules = append(modules, module)
		if t.Rank != pc.R {
			pc.RankPattern[module] = t.Rank
		}
		if t.Scale != scaleOf(alpha, t.Rank, pc.UseRSLoRA) {
			// The alpha that gives Scale: Scale·rank, or Scale·√rank.
			alpha := float64(t.Scale) * float64(t.Rank)
			if pc.UseRSLoRA {
				alpha = float64(t.Scale) * math.Sqrt(float64(t.Rank))
			}
			pc.AlphaPattern[module] = alpha
		}
		b, err := permuteQK(cfg, t.Name, t.B(), t.Out, t.Rank, unpermuteRoPERows)
		if err != nil {
			return err
		}
		prefix := "base_model.model." + module
		tensors = append(tensors,
			SafeTensor{Name: prefix + ".lora_A.weight", DType: "F32", Shape: []int{t.Rank, t.In}, Data: F32Bytes(t.A)},
			SafeTensor{Name: prefix + ".lora_B.weight", DType: "F32", Shape: []int{t.Out, t.Rank}, Data: F32Bytes(b)})
	}
	kinds := map[string]bool{}
	for _, m := range modules {
		kinds[m[strings.LastIndex(m, ".")+1:]] = true
	}
	var list []string
	for k := range kinds {
		list = append(list, k)
	}
	sort.Strings(list)
	pc.TargetModules, _ = json.Marshal(list)
	cj, err := json.MarshalIndent(pc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, PEFTConfigFile), cj, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, PEFTWeightsFile))
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	err = WriteSafetensors(bw, tensors, map[string]string{"format": "pt"})
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// hfModule is the Hugging Face module path of a GGUF weight name in a
// model of architecture a, the inverse of GGUFName.
func hfModule(a *models.Architecture, name string) (string, error) {
	if r, layer, ok := models.ParseTensorName(name); ok {
		if m := a.Module(r, layer); m != "" {
			return m, nil
		}
	}
	return "", invalidf("%s has no Hugging Face module name", name)
}
