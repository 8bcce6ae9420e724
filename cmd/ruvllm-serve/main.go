// Command ruvllm-serve is ruvllm's one binary: the OpenAI-compatible server
// (the default subcommand) and the tools around it — tokenize, chat-template,
// inspect, generate, perplexity, quantize, synth and bench.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"

	// The backends register themselves by name (backends.Open).
	_ "github.com/ruvllm/ruvllm/backends/gorgonia"
	_ "github.com/ruvllm/ruvllm/backends/native"
)

// version is stamped into responses (system_fingerprint) and logs.
var version = "0.1.0-dev"

// command is one subcommand: run gets the arguments after its name.
type command struct {
	summary string
	run     func(e *env, args []string) error
}

// env is what a command runs with: its output streams and the process's
// logger, which runMain sets up once and hands to the command, so that
// no code reads a logger from a package variable and a test gives each
// command (and each server) a logger of its own.
type env struct {
	stdout, stderr io.Writer
	log            zerolog.Logger
}

var commands = map[string]command{}

func register(name, summary string, run func(e *env, args []string) error) {
	commands[name] = command{summary: summary, run: run}
}

// errUsage marks an error whose message already explains the usage problem;
// the exit status is 2 as flag's own errors are.
var errUsage = errors.New("usage")

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

func runMain(args []string, stdout, stderr io.Writer) int {
	name, implicit := "serve", true
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args, implicit = args[0], args[1:], false
	}
	if len(args) == 1 && implicit {
		// The program's own -h lists the commands (serve -h its flags);
		// --version is the version, as llama-server and ollama take it.
		switch args[0] {
		case "-h", "-help", "--help":
			name = "help"
		case "--version", "-version", "-v":
			name = "version"
		}
	}
	if name == "help" {
		usage(stdout)
		return 0
	}
	if name == "version" {
		fmt.Fprintln(stdout, "ruvllm-serve", version)
		return 0
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "ruvllm-serve: unknown command %q\n", name)
		usage(stderr)
		return 2
	}
	e := &env{stdout: stdout, stderr: stderr, log: newLogger(stderr)}
	if err := cmd.run(e, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "ruvllm-serve %s: %v\n", name, err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

// commandOrder is the order usage lists the commands in: serving and
// using models first, the developer's tools after; a command not listed
// comes last.
var commandOrder = []string{"serve", "run", "pull", "ls", "rm", "health", "loadtest",
	"generate", "tokenize", "chat-template", "inspect", "perplexity", "bench", "quantize", "sparsify", "synth",
	"train-lora", "lora-merge", "route-eval"}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ruvllm-serve [command] [flags]   (the default command is serve)")
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	rank := func(n string) int {
		if i := slices.Index(commandOrder, n); i >= 0 {
			return i
		}
		return len(commandOrder)
	}
	sort.SliceStable(names, func(i, j int) bool {
		if ri, rj := rank(names[i]), rank(names[j]); ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	for i, n := range names {
		if i > 0 && rank(names[i-1]) <= slices.Index(commandOrder, "loadtest") && rank(n) > slices.Index(commandOrder, "loadtest") {
			fmt.Fprintln(w, "developer tools:")
		}
		fmt.Fprintf(w, "  %-14s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "  version        print the version (also --version)")
	fmt.Fprintln(w, "run 'ruvllm-serve COMMAND -h' for a command's flags")
}

// newLogger is the process's logger: human-readable logs on a terminal
// and JSON lines otherwise, so that logs piped into a collector stay
// machine-readable; RUVLLM_LOG sets the level.
func newLogger(stderr io.Writer) zerolog.Logger {
	zerolog.TimeFieldFormat = time.RFC3339Nano
	var out io.Writer = stderr
	if isTerminal(stderr) {
		out = zerolog.ConsoleWriter{Out: stderr, TimeFormat: "15:04:05"}
	}
	level := zerolog.InfoLevel
	if l, err := zerolog.ParseLevel(os.Getenv("RUVLLM_LOG")); err == nil && os.Getenv("RUVLLM_LOG") != "" {
		level = l
	}
	return zerolog.New(out).Level(level).With().Timestamp().Logger()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// flagSet is a subcommand's flags with its synopsis for -h.
type flagSet struct {
	*flag.FlagSet
	synopsis string
}

func newFlags(name, synopsis string) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &flagSet{FlagSet: fs, synopsis: synopsis}
}

// parse parses args allowing flags after positional arguments, as users
// type them ("tokenize --model m 'hello' --special"); "--" ends the flags.
// On -h it prints the flags to stdout and returns flag.ErrHelp.
func (fs *flagSet) parse(args []string, stdout io.Writer) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(stdout, "usage: ruvllm-serve %s %s\n", fs.Name(), fs.synopsis)
				fs.SetOutput(stdout)
				fs.PrintDefaults()
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v (see -h)", errUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// addThreadsFlag registers -t and --threads for the same value.
func addThreadsFlag(fs *flagSet) *int {
	t := fs.Int("threads", 0, "threads for the forward pass (default: all cores)")
	fs.IntVar(t, "t", 0, "same as --threads")
	return t
}
