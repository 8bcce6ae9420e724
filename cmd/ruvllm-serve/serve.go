package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"

	"github.com/ruvllm/ruvllm/api"
	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/backends/gorgonia"
	"github.com/ruvllm/ruvllm/internal/serving"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/hub"
	"github.com/ruvllm/ruvllm/session"
)

func init() {
	register("serve", "serve the OpenAI-compatible HTTP API (the default command)", runServe)
}

// defaultServeCtx is the context per sequence when --ctx is not given,
// capped at the model's trained context: a model trained on 128k tokens
// would otherwise take gigabytes of KV cache per slot.
const defaultServeCtx = serving.DefaultCtx

// maxConfigBytes bounds a --config file.
const maxConfigBytes = 1 << 20

// defaultStoreMax is --store-max when it is not given.
const defaultStoreMax = 20 << 30

// maxAdapterMB bounds --max-adapter-mb, so that the byte count fits an
// int64 with room to spare (1 TiB is no practical bound).
const maxAdapterMB = 1 << 20

// serveConfig is the serve command's configuration, from flags and the
// --config file.
type serveConfig struct {
	// log is the process's logger, which the server and its models log to.
	log zerolog.Logger
	// models are the models to serve, in order (the first is the
	// default), from --model and the --config file's models; finishModels
	// makes it the default model when none is given.
	models          []serving.ModelSpec
	hf              string
	alias           string
	host            string
	port            int
	apiKey, keyFile string
	ctx             int
	ctxSet          bool
	parallel, queue int
	batch           int
	backend         *backendFlags
	kvMemory        int64
	chatTemplate    string
	kv              *kvFlags
	spec            *specFlags
	store           string
	storeMax        int64
	// responseStore is the directory of the Responses API's stored
	// responses ("": in memory).
	responseStore   string
	maxN            int
	maxBody         int64
	corsOrigins     string
	shutdownTimeout time.Duration
	// adapterDir holds the first model's LoRA adapters; with no adapter
	// directory for any model the adapter API is off.
	adapterDir   string
	maxAdapters  int
	maxAdapterMB int64
	// micro configures the MicroLoRA adapters trained from feedback, in
	// the models' adapter directories; feedbackWindow is how long
	// completions are kept for feedback on them.
	micro          microFlags
	feedbackWindow time.Duration
	// maxLoaded bounds the models loaded at once (0: all); keepAlive is
	// how long an idle one stays loaded (negative: until it must make
	// room).
	maxLoaded int
	keepAlive time.Duration
	// route configures the router behind "model": "auto".
	route routeFlags
	// reasoningFormat is how thinking models' reasoning reaches clients
	// (none, auto, deepseek); reasoningBudget 0 turns thinking off unless
	// a request turns it on, -1 leaves it to the template.
	reasoningFormat string
	reasoningBudget int
	// bodyTimeout is how long a request's body may take to arrive.
	bodyTimeout time.Duration
	// publicMetrics serves /metrics without the API key.
	publicMetrics bool
	// noWebUI turns off the chat page at /.
	noWebUI bool
	// pull lets clients download models into the cache (ollama's POST
	// /api/pull).
	pull bool
	// llama are llama-server's flags of its own routes and habits, and
	// llamaCompat its flags that serve's have another meaning or none.
	llama       llamaFlags
	llamaCompat llamaCompat
}

// llamaFlags are llama-server's flags that matter to its routes: the
// server's token limit (-n), default seed and temperature, the /slots
// route and the slot actions' directory, and answering any model name.
type llamaFlags struct {
	nPredict     int
	seed         int64
	seedSet      bool
	temp         float64
	tempSet      bool
	slots        bool
	slotSavePath string
	anyModel     bool
	publicModels bool
	verbose      bool
}

// addLlamaFlags registers llama-server's flags, with its spellings.
func addLlamaFlags(fs *flagSet, lf *llamaFlags) {
	fs.IntVar(&lf.nPredict, "n-predict", -1, "most tokens a choice generates, whatever its request asks, and the limit of requests that give none (llama-server's -n); -1: none")
	fs.IntVar(&lf.nPredict, "n", -1, "same as --n-predict")
	fs.Func("seed", "default seed of the requests that give none (llama-server's --seed); -1: a random one for each", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		lf.seed, lf.seedSet = n, n != -1 && n != 0xFFFFFFFF
		return nil
	})
	fs.Func("temp", "default temperature of the requests that give none (llama-server's --temp; default 0.8)", func(v string) error {
		t, err := strconv.ParseFloat(v, 64)
		if err != nil || t < 0 || t > 2 || math.IsNaN(t) {
			return fmt.Errorf("%q is not a temperature in [0, 2]", v)
		}
		lf.temp, lf.tempSet = t, true
		return nil
	})
	lf.slots = true
	fs.BoolVar(&lf.slots, "slots", true, "serve llama-server's GET /slots (the slots' state)")
	fs.BoolFunc("no-slots", "turn GET /slots off (501), as llama-server's --no-slots", func(string) error {
		lf.slots = false
		return nil
	})
	fs.StringVar(&lf.slotSavePath, "slot-save-path", "", "directory where POST /slots/ID?action=save|restore writes and reads slots' KV caches (llama-server's; default: the actions are off)")
	fs.BoolVar(&lf.publicModels, "public-models", false, "serve the model listings (GET /v1/models, /models) without an API key, as llama-server does")
	fs.BoolVar(&lf.verbose, "verbose", false, "log at debug level and add llama-server's \"__verbose\" object (the prompt as the model read it) to whole chat and text completions, as llama-server's --verbose")
	fs.BoolVar(&lf.verbose, "v", false, "same as --verbose")
	fs.BoolVar(&lf.anyModel, "accept-any-model", false, "serve any \"model\" name with the one model served (when it has no adapters) and repeat the name in responses, as llama-server does; without it an unknown name is a 404")
}

// sampling is the server's default sampling: llama-server's, with --seed
// and --temp.
func (lf *llamaFlags) sampling() *backends.Params {
	if !lf.seedSet && !lf.tempSet {
		return nil
	}
	p := backends.DefaultParams()
	if lf.seedSet {
		seed := lf.seed
		p.Seed = &seed
	}
	if lf.tempSet {
		p.Temperature = float32(lf.temp)
	}
	return &p
}

// routeFlags configure the router: the model name that asks for it ("":
// none), W, the file its trajectories persist in, its seed, and whether
// adapters are arms.
type routeFlags struct {
	name       string
	costWeight float64
	store      string
	seed       uint64
	adapters   bool
}

const serveSynopsis = "[--model [NAME=]PATH ... | --hf REPO/FILE] [--alias NAME] [--host 127.0.0.1] [--port 8080] " +
	"[--api-key K | --api-key-file F] [--ctx N] [--parallel N] [--chat-template NAME|FILE|JINJA] [--threads T] [--config FILE.yaml]"

// parseServeArgs reads serve's configuration in a few steps: the flags
// registered by topic, the command line, then the environment and the
// --config file for the options the command line left out, then
// llama-server's spellings and the defaults that depend on the rest, and
// last the checks of the values together.
func parseServeArgs(e *env, args []string) (*serveConfig, error) {
	c := &serveConfig{log: e.log}
	fs := newFlags("serve", serveSynopsis)
	c.addModelFlags(fs)
	c.addHTTPFlags(fs)
	c.addEngineFlags(fs)
	c.addAdapterFlags(fs)
	c.route.addFlags(fs)
	addLlamaFlags(fs, &c.llama)
	config := fs.String("config", "", "YAML (or JSON) file with any of these options by name, and a models: list; flags given on the command line win, then RUVLLM_NAME (and llama-server's LLAMA_ARG_...) environment variables, then the file")
	addLlamaCompat(fs, &c.llamaCompat)
	pos, err := fs.parse(splitFlashAttn(args), e.stdout)
	if err != nil {
		return nil, err
	}
	if err := c.readSources(fs, pos, *config); err != nil {
		return nil, err
	}
	if err := c.finish(fs); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return c, nil
}

// addModelFlags registers what is served: the models, their backend,
// their id, template and reasoning.
func (c *serveConfig) addModelFlags(fs *flagSet) {
	fs.Func("model", "GGUF model file to serve: PATH (its id is the file name without .gguf, or --alias) or NAME=PATH; "+
		"repeat for several models, the first is the default (default: pull "+hub.DefaultModel.String()+" on first use)", func(v string) error {
		if v == "" {
			return nil // no file: --hf or the default model, as it always was
		}
		m, err := parseModelFlag(v)
		c.models = append(c.models, m)
		return err
	})
	fs.StringVar(&c.hf, "hf", "", hfHelp)
	c.backend = addBackendFlags(fs, true)
	fs.StringVar(&c.alias, "alias", "", "the model id clients use, when one model is served (default: the file name without .gguf)")
	fs.StringVar(&c.reasoningFormat, "reasoning-format", "auto", "how thinking models' reasoning reaches clients: auto or deepseek (apart: reasoning_content, thinking blocks), none (left in the text)")
	fs.IntVar(&c.reasoningBudget, "reasoning-budget", -1, "0 turns thinking off unless a request turns it on (the template's enable_thinking false, a think block it opens closed); -1 leaves it to the template and the request")
	fs.StringVar(&c.chatTemplate, "chat-template", "", "chat template of every model without its own in --config: a built-in name (llama.cpp's: chatml, llama3, mistral-v7, command-r, ...), a .jinja file, or the Jinja text itself; default: the model's")
}

// addHTTPFlags registers the HTTP server's flags: where it listens, who
// may call it, its limits and pages.
func (c *serveConfig) addHTTPFlags(fs *flagSet) {
	fs.StringVar(&c.host, "host", "127.0.0.1", "address to listen on")
	fs.IntVar(&c.port, "port", 8080, "port to listen on (0 picks a free one)")
	fs.StringVar(&c.apiKey, "api-key", "", "require this key as \"Authorization: Bearer KEY\"")
	fs.StringVar(&c.keyFile, "api-key-file", "", "require one of the keys in this file (one per line)")
	fs.BoolVar(&c.publicMetrics, "metrics-public", false, "serve /metrics without the API key (for a Prometheus on a private network; else give it the key)")
	fs.DurationVar(&c.bodyTimeout, "body-timeout", api.DefaultBodyTimeout, "how long a request's body may take to arrive (408 after it; an adapter upload gets ten times as long); a streamed response is not limited")
	fs.StringVar(&c.responseStore, "response-store", "", "directory where the Responses API keeps its stored responses (store: true), one JSON file each, so that previous_response_id works after a restart (default: in memory, the last 1000)")
	fs.Int64Var(&c.maxBody, "max-body", api.DefaultMaxBodyBytes, "largest request body in bytes (413 beyond)")
	fs.StringVar(&c.corsOrigins, "cors-origins", "*", "comma-separated origins whose pages may call the server from a browser, * for any (as llama-server and vLLM); \"\" turns CORS off. The API key still guards every route")
	fs.BoolVar(&c.noWebUI, "no-webui", false, "do not serve the chat page at / (llama-server's --no-webui)")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "on SIGINT/SIGTERM, how long in-flight requests may finish before they are cancelled")
	fs.BoolVar(&c.pull, "pull", true, "let clients download GGUF files from the Hugging Face Hub into the cache with ollama's POST /api/pull (they are served once a restart names them)")
}

// addEngineFlags registers each model's engine: its context, slots and
// queue, its KV cache and store, and how many models stay loaded.
func (c *serveConfig) addEngineFlags(fs *flagSet) {
	fs.IntVar(&c.ctx, "ctx", 0, fmt.Sprintf("context per sequence in tokens, for each model; 0 = the model's trained context (default: %d, or the trained context if smaller)", defaultServeCtx))
	fs.IntVar(&c.parallel, "parallel", backends.DefaultParallel, "sequences generated at once, by each model; more requests wait in its queue")
	fs.IntVar(&c.queue, "queue", backends.DefaultQueueSize, "requests that may wait for a slot, per model; beyond them clients get 429")
	fs.IntVar(&c.batch, "batch", backends.DefaultBatch, "prompt tokens processed per forward step")
	c.kv = addKVFlags(fs, defaultServeKV)
	c.spec = addSpecFlags(fs, defaultSpec)
	fs.StringVar(&c.store, "store", "", "directory where each model keeps the full KV blocks of its sequences (in a subdirectory per model file), so that prompts starting with them restore them instead of computing them, also after a restart or a crash (default: off)")
	c.storeMax = defaultStoreMax
	fs.Func("store-max", "most disk each model's --store takes, as 20GiB (least recently used blocks are evicted)", func(v string) error {
		n, err := parseByteSize(v)
		if err == nil && n <= 0 {
			err = fmt.Errorf("%q is not a positive size", v)
		}
		c.storeMax = n
		return err
	})
	fs.Func("kv-memory", "KV cache memory of the models loaded at once, in total, as 512MiB or 2GB: each loaded model's pool is it divided by --max-loaded (or by the number of models), shared by its slots (default: each model room for --parallel × --ctx tokens); with less, slots that run out wait and are recomputed", func(v string) error {
		n, err := parseByteSize(v)
		c.kvMemory = n
		return err
	})
	fs.IntVar(&c.maxN, "max-n", session.DefaultMaxN, "most choices (n) one request may ask for")
	fs.IntVar(&c.maxLoaded, "max-loaded", 0, "most models loaded at once (0: all); loading another unloads the least recently used idle one first")
	c.keepAlive = session.KeepForever
	fs.Func("keep-alive", "how long a model stays loaded after its last request, as ollama's keep_alive: 5m, 1h, seconds; 0 unloads at once, negative (the default) keeps it until another needs its place; a request's keep_alive overrides it", func(v string) error {
		d, err := parseKeepAliveFlag(v)
		c.keepAlive = d
		return err
	})
}

// addAdapterFlags registers the LoRA adapters and the MicroLoRAs trained
// from feedback.
func (c *serveConfig) addAdapterFlags(fs *flagSet) {
	fs.StringVar(&c.adapterDir, "adapter-dir", "", "directory of the first model's LoRA adapters: those in it are loaded at start, uploads are stored there; other models' are adapter_dir in --config (default: none)")
	fs.IntVar(&c.maxAdapters, "max-adapters", lora.DefaultMaxResident, "most LoRA adapters held in memory, per model; the least recently used idle one is unloaded first and read again when needed")
	fs.Int64Var(&c.maxAdapterMB, "max-adapter-mb", lora.DefaultMaxUploadBytes>>20, "largest LoRA adapter upload (all its files) in MiB (413 beyond)")
	fs.BoolVar(&c.micro.on, "micro-lora", true, "train MicroLoRA adapters from POST /v1/feedback in each model's adapter directory (needs an adapter directory)")
	fs.IntVar(&c.micro.rank, "micro-lora-rank", 2, "rank of new MicroLoRA adapters")
	fs.StringVar(&c.micro.targets, "micro-lora-targets", "down", "layers new MicroLoRA adapters update: roles of every block (q,k,v,o,gate,up,down) or all")
	fs.IntVar(&c.micro.max, "micro-lora-max", gorgonia.DefaultMaxMicro, "most MicroLoRA adapters feedback may create, per model (those in the adapter directory count); feedback naming a new one beyond it is a 409")
	fs.Float64Var(&c.micro.cpu, "micro-lora-cpu", 0.25, "the MicroLoRA trainer's share of one core (it also runs at the lowest priority)")
	fs.StringVar(&c.micro.objective, "micro-lora-objective", string(gorgonia.Margin), "what MicroLoRAs train preference pairs with: margin (a hinge on the adapter's own margin, --micro-lora-margin) or dpo")
	fs.Float64Var(&c.micro.margin, "micro-lora-margin", 2, "with --micro-lora-objective margin: the nats by which a pair's chosen must win (beyond the base model's margin where the base already prefers it)")
	fs.DurationVar(&c.feedbackWindow, "feedback-window", session.DefaultFeedbackWindow, "how long a completion is kept for feedback on it by completion_id")
}

// addFlags registers the router's flags.
func (rf *routeFlags) addFlags(fs *flagSet) {
	fs.StringVar(&rf.name, "router", session.DefaultRouterName, "the model name that asks the router to choose the model of a chat or text completion (\"\" turns the router off)")
	fs.Float64Var(&rf.costWeight, "route-cost-weight", 0, "W: the router maximises expected quality (0 … 1) − W × expected seconds of generation; a request's route_cost_weight overrides it")
	fs.StringVar(&rf.store, "route-store", "", "file the router's trajectories and ratings persist in, replayed at start so that a restart does not forget (default: memory only)")
	fs.Uint64Var(&rf.seed, "route-seed", 0, "seed of the router's exploration")
	fs.BoolVar(&rf.adapters, "route-adapters", false, "let the router choose the models' LoRA adapters too")
}

// readSources takes vLLM's positional model, then the environment and the
// --config file for what the command line left out.
func (c *serveConfig) readSources(fs *flagSet, pos []string, config string) error {
	// vLLM's "serve MODEL": one argument, the model.
	if len(pos) == 1 && len(c.models) == 0 && c.hf == "" {
		if err := fs.Set("model", pos[0]); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		pos = nil
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q (see -h)", errUsage, pos[0])
	}
	if err := applyEnv(fs, os.Getenv); err != nil {
		return err
	}
	if config != "" {
		models, err := applyServeConfig(fs.FlagSet, config)
		if err != nil {
			return err
		}
		c.models = append(c.models, models...)
	}
	return nil
}

// finish applies llama-server's spellings (-c, -ctk, --hf-file, ...) and
// the defaults that depend on the other options (the models).
func (c *serveConfig) finish(fs *flagSet) error {
	kvGiven := false
	fs.Visit(func(f *flag.Flag) {
		c.ctxSet = c.ctxSet || f.Name == "ctx"
		kvGiven = kvGiven || f.Name == "kv"
	})
	if err := c.llamaCompat.finish(c, kvGiven); err != nil {
		return err
	}
	if c.llama.verbose {
		c.log = c.log.Level(zerolog.DebugLevel)
	}
	return c.finishModels()
}

// check refuses values that are out of range, alone or together, and
// makes the slot directory.
func (c *serveConfig) check() error {
	switch {
	case c.apiKey != "" && c.keyFile != "":
		return fmt.Errorf("%w: give --api-key or --api-key-file, not both", errUsage)
	case c.port < 0 || c.port > 65535:
		return fmt.Errorf("%w: --port %d is outside 0 … 65535", errUsage, c.port)
	case c.ctx < 0 || c.parallel < 1 || c.queue < 1 || c.batch < 1 || *c.backend.threads < 0 || c.maxN < 1 || c.maxBody < 1:
		return fmt.Errorf("%w: --ctx and --threads must not be negative; --parallel, --queue, --batch, --max-n and --max-body must be positive", errUsage)
	case c.shutdownTimeout < 0:
		return fmt.Errorf("%w: --shutdown-timeout must not be negative", errUsage)
	case c.bodyTimeout <= 0:
		return fmt.Errorf("%w: --body-timeout must be positive", errUsage)
	case c.reasoningBudget != 0 && c.reasoningBudget != -1:
		return fmt.Errorf("%w: --reasoning-budget is 0 (thinking off) or -1 (unlimited); a token budget is not supported", errUsage)
	case c.micro.rank < 1 || c.micro.rank > 64 || c.micro.cpu <= 0 || c.micro.cpu > 1 || c.feedbackWindow <= 0 || c.micro.max < 1:
		return fmt.Errorf("%w: --micro-lora-rank must be in 1 … 64, --micro-lora-cpu in (0, 1], --micro-lora-max and --feedback-window positive", errUsage)
	case c.micro.objective != string(gorgonia.Margin) && c.micro.objective != string(gorgonia.DPO) || !(c.micro.margin > 0) || math.IsInf(c.micro.margin, 0):
		return fmt.Errorf("%w: --micro-lora-objective is margin or dpo, and --micro-lora-margin a positive number of nats", errUsage)
	case c.maxLoaded < 0:
		return fmt.Errorf("%w: --max-loaded must not be negative", errUsage)
	case c.route.costWeight < 0 || math.IsNaN(c.route.costWeight) || math.IsInf(c.route.costWeight, 0):
		return fmt.Errorf("%w: --route-cost-weight must be a finite number ≥ 0", errUsage)
	case c.maxAdapters < 1 || c.maxAdapterMB < 1 || c.maxAdapterMB > maxAdapterMB:
		return fmt.Errorf("%w: --max-adapters must be positive and --max-adapter-mb in 1 … %d", errUsage, maxAdapterMB)
	}
	if err := c.kv.check(); err != nil {
		return err
	}
	if err := c.spec.check(); err != nil {
		return err
	}
	if c.llama.nPredict < -1 {
		return fmt.Errorf("%w: --n-predict must be -1 (none) or more", errUsage)
	}
	if d := c.llama.slotSavePath; d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("--slot-save-path: %w", err)
		}
	}
	if c.store != "" && c.kv.precision == kvcache.F32 {
		return fmt.Errorf("%w: --store keeps F16 forms of the blocks; --kv f32 does not spill", errUsage)
	}
	return nil
}

// applyServeConfig sets, from a YAML file of option: value pairs, every
// flag the command line did not set, and returns the file's models: list.
// YAML is a superset of JSON, so a JSON object works too. Lists
// (cors-origins) are joined with commas, but for model, which is given once
// per element. The models are one option: --model or --hf on the command
// line overrides the file's model, models and hf alike.
func applyServeConfig(fs *flag.FlagSet, path string) ([]serving.ModelSpec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	if len(b) > maxConfigBytes {
		return nil, fmt.Errorf("--config %s: larger than %d bytes", path, maxConfigBytes)
	}
	var opts map[string]any
	if err := yaml.Unmarshal(b, &opts); err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[canonicalFlag(f.Name)] = true })
	modelGiven := given["model"] || given["hf"]
	var models []serving.ModelSpec
	if v, ok := opts[modelsKey]; ok {
		delete(opts, modelsKey)
		if _, one := opts["model"]; one {
			return nil, fmt.Errorf("%w: --config %s: give model or models, not both", errUsage, path)
		}
		if !modelGiven {
			if models, err = parseModelList(v, filepath.Dir(path)); err != nil {
				return nil, fmt.Errorf("%w: --config %s: %v", errUsage, path, err)
			}
		}
	}
	for key, v := range opts {
		name := strings.ReplaceAll(key, "_", "-")
		fl := fs.Lookup(name)
		if fl == nil || name == "config" {
			return nil, fmt.Errorf("--config %s: unknown option %q", path, key)
		}
		if given[name] || (modelGiven && (name == "model" || name == "hf")) {
			continue
		}
		values := []any{v}
		if list, ok := v.([]any); ok && name == "model" {
			values = list
		}
		for _, v := range values {
			s, err := configValue(v)
			if err != nil {
				return nil, fmt.Errorf("--config %s: %s: %w", path, key, err)
			}
			if pathOptions[name] || (name == "chat-template" && fileExists(relativeTo(filepath.Dir(path), s))) {
				// The file's paths are the file's: relative ones are taken
				// from its directory, not the working one.
				s = relativeTo(filepath.Dir(path), s)
			}
			if name == "model" {
				// NAME=PATH or PATH; a hub name is no file and stays.
				prefix, file := "", s
				if i := strings.IndexByte(s, '='); i >= 0 {
					prefix, file = s[:i+1], s[i+1:]
				}
				if f := relativeTo(filepath.Dir(path), file); fileExists(f) {
					s = prefix + f
				}
			}
			if err := fs.Set(name, s); err != nil {
				return nil, fmt.Errorf("%w: --config %s: %s: %v", errUsage, path, key, err)
			}
		}
	}
	return models, nil
}

// pathOptions are the options whose values are paths, which a config file
// gives relative to itself. A model is a path unless it reads as a hub
// name (then it is left alone).
var pathOptions = map[string]bool{"adapter-dir": true, "store": true, "route-store": true, "response-store": true,
	"slot-save-path": true, "api-key-file": true, "lora": true}

// configValue renders a YAML value as the flag's text.
func configValue(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			s, err := configValue(e)
			if err != nil {
				return "", err
			}
			if _, nested := e.([]any); nested {
				return "", errors.New("nested lists are not an option value")
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	}
	return "", fmt.Errorf("a %T is not an option value", v)
}

// apiKeys reads the keys: --api-key, or the non-empty lines of
// --api-key-file that are not # comments.
func (c *serveConfig) apiKeys() ([]string, error) {
	if c.apiKey != "" {
		return []string{c.apiKey}, nil
	}
	if c.keyFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(c.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--api-key-file: %w", err)
	}
	var keys []string
	for line := range strings.Lines(string(b)) {
		if k := strings.TrimSpace(line); k != "" && !strings.HasPrefix(k, "#") {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("--api-key-file %s holds no key", c.keyFile)
	}
	return keys, nil
}

func runServe(e *env, args []string) error {
	c, err := parseServeArgs(e, args)
	if err != nil {
		return err
	}
	if c.llamaCompat.offline {
		// The process's setting, so that every download (the models',
		// ollama's /api/pull) takes the cache only, as hub.Client reads it.
		os.Setenv("HF_HUB_OFFLINE", "1")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve(ctx, c, serving.Hooks{OnSignal: stop})
}

// serve runs the server c configures until ctx ends.
func serve(ctx context.Context, c *serveConfig, hooks serving.Hooks) error {
	sc, err := c.serving()
	if err != nil {
		return err
	}
	return serving.Run(ctx, sc, hooks)
}

// serving is the configuration the server runs with: the flags' values,
// with the API keys read, the origins split and the reasoning format
// parsed.
func (c *serveConfig) serving() (*serving.Config, error) {
	keys, err := c.apiKeys()
	if err != nil {
		return nil, err
	}
	var origins []string
	for o := range strings.SplitSeq(c.corsOrigins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			origins = append(origins, o)
		}
	}
	reasoning, ok := session.ParseReasoningFormat(c.reasoningFormat)
	if !ok {
		return nil, fmt.Errorf("%w: --reasoning-format %q is not one of none, auto, deepseek", errUsage, c.reasoningFormat)
	}
	ctx := c.ctx
	switch {
	case !c.ctxSet:
		ctx = 0
	case ctx == 0:
		ctx = -1 // the trained context
	}
	var lora string
	if len(c.llamaCompat.lora) > 0 {
		lora = c.llamaCompat.lora[0]
	}
	return &serving.Config{
		Log: c.log,
		API: api.Options{
			Version:        version,
			APIKeys:        keys,
			MaxN:           c.maxN,
			MaxBodyBytes:   c.maxBody,
			CORSOrigins:    origins,
			FeedbackWindow: c.feedbackWindow,
			MaxLoaded:      c.maxLoaded,
			KeepAlive:      c.keepAlive,
			RouterName:     c.route.name,
			RouteAdapters:  c.route.adapters,
			Reasoning:      reasoning,
			NoThinking:     c.reasoningBudget == 0,
			BodyTimeout:    c.bodyTimeout,
			PublicMetrics:  c.publicMetrics,
			NoWebUI:        c.noWebUI,
			Pull:           pullFunc(c.pull, c.log),
			Sampling:       c.llama.sampling(),
			MaxTokens:      max(c.llama.nPredict, 0),
			AnyModelName:   c.llama.anyModel,
			Slots:          c.llama.slots,
			SlotSavePath:   c.llama.slotSavePath,
			PublicModels:   c.llama.publicModels,
			Verbose:        c.llama.verbose,
		},
		Models:          c.models,
		Host:            c.host,
		Port:            c.port,
		Ctx:             ctx,
		Parallel:        c.parallel,
		Queue:           c.queue,
		Batch:           c.batch,
		Backend:         c.backend.choice(),
		ChatTemplate:    c.chatTemplate,
		KV:              c.kv.precision,
		KVHot:           c.kv.hot,
		KVWarm:          c.kv.warm,
		KVMemory:        c.kvMemory,
		Store:           c.store,
		StoreMax:        c.storeMax,
		ResponseStore:   c.responseStore,
		ShutdownTimeout: c.shutdownTimeout,
		MaxAdapters:     c.maxAdapters,
		MaxAdapterBytes: c.maxAdapterMB << 20,
		Micro: serving.MicroLoRA{On: c.micro.on, Rank: c.micro.rank, Targets: c.micro.targets, CPU: c.micro.cpu,
			Objective: c.micro.objective, Margin: c.micro.margin, Max: c.micro.max},
		Route: serving.Route{CostWeight: c.route.costWeight, Store: c.route.store, Seed: c.route.seed},
		LoRA:  lora,
	}, nil
}

// parseKeepAliveFlag reads --keep-alive: a duration (5m, 1h30m), or a
// number of seconds; negative means forever, 0 unloads a model as soon as
// it is idle. The server's zero value means its default, so 0 is kept as
// a nanosecond, which unloads just as soon.
func parseKeepAliveFlag(v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		secs, perr := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if perr != nil || math.IsNaN(secs) || math.IsInf(secs, 0) {
			return 0, fmt.Errorf("%q is not a duration such as 5m or a number of seconds", v)
		}
		d = time.Duration(min(secs, 1e9) * float64(time.Second))
	}
	switch {
	case d < 0:
		return session.KeepForever, nil
	case d == 0:
		return time.Nanosecond, nil
	}
	return d, nil
}

// parseByteSize reads a memory size: a number of bytes, or a number with a
// unit, KB/MB/GB/TB (powers of 1000) or KiB/MiB/GiB/TiB (powers of 1024),
// as K/M/G/T alone (powers of 1024, as llama.cpp and ollama read them).
func parseByteSize(v string) (int64, error) {
	v = strings.TrimSpace(v)
	i := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := v, ""
	if i >= 0 {
		num, unit = v[:i], strings.TrimSpace(v[i:])
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || num == "" {
		return 0, fmt.Errorf("%q is not a size such as 512MiB or 2GB", v)
	}
	mult := map[string]float64{
		"": 1, "b": 1,
		"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
		"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	}[strings.ToLower(unit)]
	if mult == 0 {
		return 0, fmt.Errorf("%q: unknown unit %q (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", v, unit)
	}
	if f*mult >= 1<<62 {
		return 0, fmt.Errorf("%q is too large", v)
	}
	return int64(f * mult), nil
}
