package main

import (
	"cmp"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
)

// serveAliases are llama-server's (and vLLM's) spellings of serve's flags,
// so that a command line written for llama-server runs as it is.
var serveAliases = []struct{ name, alias string }{
	{"model", "m"},
	{"alias", "a"},
	{"parallel", "np"},
	{"hf", "hf-repo"},
	{"hf", "hfr"},
	{"n-predict", "predict"},
	{"batch", "batch-size"},
	{"batch", "b"},
	{"chat-template", "chat-template-file"},
	{"model", "model-url"},
	{"model", "mu"},
}

// serveEnv are llama-server's environment variables of the flags serve
// shares with it; every serve flag also reads RUVLLM_NAME (the flag's name
// in capitals, dashes as underscores).
var serveEnv = map[string]string{
	"LLAMA_ARG_MODEL": "model", "LLAMA_ARG_ALIAS": "alias", "LLAMA_ARG_HOST": "host", "LLAMA_ARG_PORT": "port",
	"LLAMA_ARG_CTX_SIZE": "ctx-size", "LLAMA_ARG_N_PARALLEL": "parallel", "LLAMA_ARG_THREADS": "threads",
	"LLAMA_ARG_N_PREDICT": "n-predict", "LLAMA_ARG_HF_REPO": "hf", "LLAMA_ARG_HF_FILE": "hf-file",
	"LLAMA_ARG_API_KEY_FILE": "api-key-file", "LLAMA_API_KEY": "api-key", "LLAMA_ARG_CHAT_TEMPLATE": "chat-template",
	"LLAMA_ARG_CHAT_TEMPLATE_FILE": "chat-template", "LLAMA_ARG_JINJA": "jinja", "LLAMA_ARG_N_GPU_LAYERS": "n-gpu-layers",
	"LLAMA_ARG_FLASH_ATTN": "flash-attn", "LLAMA_ARG_ENDPOINT_METRICS": "metrics", "LLAMA_ARG_ENDPOINT_SLOTS": "slots",
	"LLAMA_ARG_NO_WEBUI": "no-webui", "LLAMA_ARG_LORA": "lora", "LLAMA_ARG_SLOT_SAVE_PATH": "slot-save-path",
	"LLAMA_ARG_BATCH": "batch", "LLAMA_ARG_REASONING_FORMAT": "reasoning-format", "LLAMA_ARG_REASONING_BUDGET": "reasoning-budget",
}

// llamaCompat are llama-server's flags that serve takes with a meaning of
// its own, or accepts because they mean nothing on the CPU.
type llamaCompat struct {
	ctxSize int    // llama-server's -c: the context of all its slots together
	hfFile  string // --hf-file, with --hf-repo
	lora    []string
	gpu     bool // -ngl or -fa was given
	// cacheK, cacheV are -ctk and -ctv, llama-server's KV cache types,
	// which become --kv when they agree.
	cacheK, cacheV string
	// offline is --offline: models come from the cache only.
	offline bool
	// refused are the llama-server flags given that this server does not
	// do, each with why; finish turns the first into the start's error.
	refused []string
}

// addLlamaCompat registers llama-server's flags that are not plain
// aliases, and the aliases of serveAliases.
func addLlamaCompat(fs *flagSet, lc *llamaCompat) {
	for _, a := range serveAliases {
		if f := fs.Lookup(a.name); f != nil {
			fs.Var(f.Value, a.alias, "same as --"+a.name)
		}
	}
	fs.IntVar(&lc.ctxSize, "ctx-size", 0, "llama-server's context size: the tokens of all --parallel sequences together, each getting its share (--ctx is per sequence)")
	fs.IntVar(&lc.ctxSize, "c", 0, "same as --ctx-size")
	fs.StringVar(&lc.hfFile, "hf-file", "", "with --hf OWNER/REPO (llama-server's --hf-repo): the GGUF file of the repository to serve")
	fs.Func("lora", "a LoRA adapter (GGUF file or PEFT directory) every request of the first model runs with unless it names another, as llama-server's --lora (repeatable; only one is supported)", func(v string) error {
		lc.lora = append(lc.lora, v)
		return nil
	})
	gpu := func(string) error { lc.gpu = true; return nil }
	fs.Func("n-gpu-layers", "accepted for llama-server's command lines: this server runs on the CPU", gpu)
	fs.Func("ngl", "same as --n-gpu-layers", gpu)
	fs.Func("gpu-layers", "same as --n-gpu-layers", gpu)
	fs.BoolFunc("flash-attn", "accepted for llama-server's command lines (also -fa on|off|auto): this server runs on the CPU", gpu)
	fs.BoolFunc("fa", "same as --flash-attn", gpu)
	fs.BoolFunc("jinja", "accepted for llama-server's command lines: chat templates are always Jinja here", func(string) error { return nil })
	fs.BoolFunc("metrics", "accepted for llama-server's command lines: /metrics is always served", func(string) error { return nil })
	fs.BoolFunc("cont-batching", "accepted for llama-server's command lines: batching is always continuous", func(string) error { return nil })
	fs.StringVar(&lc.hfFile, "hff", "", "same as --hf-file")
	ubatch := func(v string) error {
		if n, err := strconv.Atoi(v); err != nil || n <= 0 {
			return fmt.Errorf("%q is not a positive number of tokens", v)
		}
		return nil
	}
	fs.Func("ubatch-size", "accepted for llama-server's command lines: a prompt step is --batch tokens, computed as one", ubatch)
	fs.Func("ub", "same as --ubatch-size", ubatch)
	for _, name := range []string{"embedding", "embeddings"} {
		fs.BoolFunc(name, "accepted for llama-server's command lines: /v1/embeddings is always served", func(string) error { return nil })
	}
	fs.BoolVar(&lc.offline, "offline", false, "take models from the cache only, never from the network (llama-server's --offline; HF_HUB_OFFLINE=1 too)")
	for _, name := range []string{"cache-type-k", "ctk"} {
		fs.StringVar(&lc.cacheK, name, "", "llama-server's K cache type: f16, f32, q8_0 or q4_0, the same as -ctv (it becomes --kv)")
	}
	for _, name := range []string{"cache-type-v", "ctv"} {
		fs.StringVar(&lc.cacheV, name, "", "llama-server's V cache type, as -ctk")
	}
	refuse := func(why string) func(string) error {
		return func(string) error { lc.refused = append(lc.refused, why); return nil }
	}
	fs.BoolFunc("context-shift", "refused: a sequence that reaches its context ends (finish_reason length); raise --ctx instead",
		refuse("--context-shift is not supported: a sequence that reaches its context ends with finish_reason \"length\"; give a larger --ctx"))
	fs.BoolFunc("reranking", "refused: there is no rerank endpoint", refuse("--reranking is not supported: this server has no /rerank endpoint"))
	fs.BoolFunc("rerank", "same as --reranking", refuse("--rerank is not supported: this server has no /rerank endpoint"))
	fs.Func("pooling", "llama-server's embedding pooling: only mean, which /v1/embeddings always uses (then normalised)", func(v string) error {
		if v != "mean" {
			lc.refused = append(lc.refused, fmt.Sprintf("--pooling %s is not supported: embeddings are mean-pooled (give --pooling mean or leave it out)", v))
		}
		return nil
	})
	selfExtend := func(v string) error {
		if v != "1" {
			lc.refused = append(lc.refused, "--grp-attn-n/--grp-attn-w (self-extend) are not supported: a sequence's context is --ctx, up to the model's trained context")
		}
		return nil
	}
	for _, name := range []string{"grp-attn-n", "gan", "grp-attn-w", "gaw"} {
		fs.Func(name, "refused unless 1: self-extend is not supported", selfExtend)
	}
	for _, name := range []string{"mmproj", "mm", "mmproj-url", "mmu"} {
		fs.Func(name, "refused: images and audio are not supported (no multimodal projector)",
			func(string) error {
				return refuse("--" + name + " is not supported: this server reads text only (no multimodal projector)")("")
			})
	}
}

// splitFlashAttn turns llama-server's "-fa on|off|auto" (a value after a
// boolean flag, which Go's flag package takes for an argument) into
// "-fa".
func splitFlashAttn(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		out = append(out, args[i])
		if a := strings.TrimLeft(args[i], "-"); (a == "fa" || a == "flash-attn") && i+1 < len(args) &&
			slices.Contains([]string{"on", "off", "auto", "true", "false", "1", "0"}, args[i+1]) {
			i++
		}
	}
	return out
}

// applyEnv sets, from the environment, every flag the command line left
// out: RUVLLM_NAME for any flag, llama-server's LLAMA_ARG_… for the flags
// it shares. The command line wins, and the environment wins over
// --config (which applyServeConfig applies after).
func applyEnv(fs *flagSet, getenv func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[canonicalFlag(f.Name)] = true })
	set := func(name, env, v string) error {
		name = canonicalFlag(name)
		if given[name] || fs.Lookup(name) == nil {
			return nil
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("%w: %s=%q: %v", errUsage, env, v, err)
		}
		given[name] = true
		return nil
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	for _, n := range names {
		env := "RUVLLM_" + strings.ToUpper(strings.ReplaceAll(n, "-", "_"))
		if v := getenv(env); v != "" {
			if err := set(n, env, v); err != nil {
				return err
			}
		}
	}
	envs := make([]string, 0, len(serveEnv))
	for env := range serveEnv {
		envs = append(envs, env)
	}
	slices.Sort(envs)
	for _, env := range envs {
		if v := getenv(env); v != "" {
			if err := set(serveEnv[env], env, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// canonicalFlag is the name of the flag an alias stands for.
func canonicalFlag(name string) string {
	for _, a := range serveAliases {
		if a.alias == name {
			return a.name
		}
	}
	switch name {
	case "c":
		return "ctx-size"
	case "ngl", "gpu-layers":
		return "n-gpu-layers"
	case "fa":
		return "flash-attn"
	case "t":
		return "threads"
	case "n":
		return "n-predict"
	case "hff":
		return "hf-file"
	case "ctk":
		return "cache-type-k"
	case "ctv":
		return "cache-type-v"
	}
	return name
}

// finish applies llama-server's flags to c, after the command line, the
// environment and --config: the context per sequence, the Hugging Face
// file, the adapter; and logs that GPU flags do nothing here.
func (lc *llamaCompat) finish(c *serveConfig, kvGiven bool) error {
	if len(lc.refused) > 0 {
		return fmt.Errorf("%w: %s", errUsage, lc.refused[0])
	}
	if err := lc.cacheTypes(c, kvGiven); err != nil {
		return err
	}
	if lc.ctxSize < 0 {
		return fmt.Errorf("%w: --ctx-size must not be negative", errUsage)
	}
	if lc.ctxSize > 0 {
		if c.ctxSet {
			return fmt.Errorf("%w: give --ctx (per sequence) or --ctx-size (all sequences), not both", errUsage)
		}
		c.ctx, c.ctxSet = max(lc.ctxSize/c.parallel, 1), true
	}
	if lc.hfFile != "" {
		if c.hf == "" {
			return fmt.Errorf("%w: --hf-file needs --hf-repo (or --hf) OWNER/REPO", errUsage)
		}
		c.hf = strings.TrimSuffix(c.hf, "/") + "/" + lc.hfFile
	}
	if len(lc.lora) > 1 {
		return fmt.Errorf("%w: --lora is given %d times; one adapter for every request is supported (serve more with --adapter-dir)", errUsage, len(lc.lora))
	}
	if lc.gpu {
		c.log.Info().Msg("--n-gpu-layers and --flash-attn are accepted and ignored: this server runs on the CPU")
	}
	return nil
}

// cacheTypes turns -ctk/-ctv into --kv: this server keeps K and V at one
// precision, so the two must agree (either alone leaves the other at
// llama-server's default, f16).
func (lc *llamaCompat) cacheTypes(c *serveConfig, kvGiven bool) error {
	if lc.cacheK == "" && lc.cacheV == "" {
		return nil
	}
	if kvGiven {
		return fmt.Errorf("%w: give --kv or -ctk/-ctv, not both", errUsage)
	}
	kinds := map[string]string{"f16": "f16", "f32": "f32", "q8_0": "q8", "q4_0": "q4"}
	k, v := cmp.Or(lc.cacheK, "f16"), cmp.Or(lc.cacheV, "f16")
	kk, okK := kinds[strings.ToLower(k)]
	vv, okV := kinds[strings.ToLower(v)]
	switch {
	case !okK:
		return fmt.Errorf("%w: -ctk %s is not supported: the cache types are f16, f32, q8_0 and q4_0 (or --kv tiered)", errUsage, k)
	case !okV:
		return fmt.Errorf("%w: -ctv %s is not supported: the cache types are f16, f32, q8_0 and q4_0 (or --kv tiered)", errUsage, v)
	case kk != vv:
		return fmt.Errorf("%w: -ctk %s and -ctv %s differ: K and V are kept at one precision here (give both the same, or --kv)", errUsage, k, v)
	}
	c.kv.kv = kk
	return nil
}

// loraLoad reads the adapter of --lora for the model.
func loraLoad(path string, m *models.Model) (*lora.Adapter, error) {
	return lora.Load(path, m.Config, m.File)
}
