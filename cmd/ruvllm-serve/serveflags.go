package main

import (
	"flag"

	"fmt"
	"slices"
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
	{"n-predict", "predict"},
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
	}
	return name
}

// finish applies llama-server's flags to c, after the command line, the
// environment and --config: the context per sequence, the Hugging Face
// file, the adapter; and logs that GPU flags do nothing here.
func (lc *llamaCompat) finish(c *serveConfig) error {
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

// loraLoad reads the adapter of --lora for the model.
func loraLoad(path string, m *models.Model) (*lora.Adapter, error) {
	return lora.Load(path, m.Config, m.File)
}
