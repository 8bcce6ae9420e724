// Package serving runs ruvllm's HTTP server over a set of models: the
// serve command's configuration as values (Config), the models' files
// found, pulled and opened (ResolveModelFile, Backend), their engines
// loaded on demand, and the server's life from listening to a graceful
// shutdown (Run). The command line only parses flags into a Config, so
// that a test or another program starts the same server.
package serving

import (
	"errors"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/ruvllm/ruvllm/api"
	"github.com/ruvllm/ruvllm/kvcache"
)

// ErrUsage marks an error in the configuration (a flag or a file's value)
// rather than in the machine: the command exits with status 2 on it.
var ErrUsage = errors.New("usage")

// DefaultCtx is each sequence's context when Config.Ctx is 0 (or the
// model's trained context when that is smaller).
const DefaultCtx = 4096

// Config is what Run serves and how.
type Config struct {
	// Log is the server's logger.
	Log zerolog.Logger
	// API are the HTTP server's options. Run opens its Router (from
	// Route) and ResponseStore (from ResponseStore) itself.
	API api.Options
	// Models are the models to serve, in order; the first is the default.
	// Run serves each that opens and reports the others, unless there is
	// only one.
	Models []ModelSpec
	// Host and Port are where Run listens (port 0 picks a free one).
	Host string
	Port int
	// Ctx is each sequence's context in tokens: 0 takes DefaultCtx (or the
	// trained context when smaller), a negative value the model's trained
	// context.
	Ctx int
	// Parallel sequences are generated at once by each model, Queue
	// requests may wait for a slot, Batch prompt tokens go in one step.
	Parallel, Queue, Batch int
	// Backend chooses what runs the models (a model's own Backend wins).
	Backend Backend
	// ChatTemplate is the template of the models that set none of their
	// own ("": the file's).
	ChatTemplate string
	// KV is the KV cache's precision; KVHot and KVWarm the tiers of
	// kvcache.Tiered; KVMemory the KV memory of the models loaded at once
	// in total (0: room for Parallel × Ctx tokens each).
	KV            kvcache.Precision
	KVHot, KVWarm int
	KVMemory      int64
	// Store is the directory of the models' KV block stores ("": none),
	// StoreMax the disk each may take.
	Store    string
	StoreMax int64
	// ResponseStore is the directory of the Responses API's stored
	// responses ("": in memory).
	ResponseStore string
	// ShutdownTimeout is how long in-flight requests may finish after the
	// context given to Run ends.
	ShutdownTimeout time.Duration
	// MaxAdapters bounds the LoRA adapters each model holds in memory;
	// MaxAdapterBytes an upload.
	MaxAdapters     int
	MaxAdapterBytes int64
	// Micro configures the MicroLoRAs trained from feedback.
	Micro MicroLoRA
	// Route configures the router's store and exploration (its model name
	// and whether adapters are arms are API.RouterName, API.RouteAdapters).
	Route Route
	// LoRA is an adapter every request of the first model runs with unless
	// it names another (llama-server's --lora); "" for none.
	LoRA string
	// Spec configures speculative decoding.
	Spec Spec
}

// ModelSpec is one model to serve: where its file is, and what is set for
// it alone.
type ModelSpec struct {
	// Name is the id clients use; "" takes the file name without .gguf.
	Name string
	// Path or HF is the file: a path, or a Hugging Face name to pull;
	// neither is the default model.
	Path, HF string
	// ChatTemplate overrides Config.ChatTemplate; AdapterDir is the
	// model's adapter directory ("" for none); Backend overrides
	// Config.Backend's name.
	ChatTemplate, AdapterDir, Backend string
}

// ID is the model's id as far as it is known before its file is found: a
// pulled file's name is known once it is pulled.
func (m ModelSpec) ID() string {
	if m.Name != "" || m.Path == "" {
		return m.Name
	}
	return strings.TrimSuffix(filepath.Base(m.Path), ".gguf")
}

// reportedID is the id a model that cannot be opened is reported under.
func (m ModelSpec) reportedID() string {
	switch {
	case m.Name != "":
		return m.Name
	case m.Path != "":
		return strings.TrimSuffix(filepath.Base(m.Path), ".gguf")
	}
	return m.HF
}

// MicroLoRA configures the MicroLoRA adapters trained from feedback in
// the models' adapter directories.
type MicroLoRA struct {
	On bool
	// Rank and Targets (roles, comma-separated, or all) shape new ones.
	Rank    int
	Targets string
	// CPU is the trainer's share of one core.
	CPU float64
	// Objective trains preference pairs (margin or dpo); Margin is the
	// margin objective's γ in nats.
	Objective string
	Margin    float64
	// Max bounds the MicroLoRAs feedback creates, per model.
	Max int
}

// Route configures the router behind API.RouterName.
type Route struct {
	// CostWeight is W: the router maximises quality − W × seconds.
	CostWeight float64
	// Store is the file its trajectories persist in ("": memory only).
	Store string
	// Seed seeds its exploration.
	Seed uint64
}
