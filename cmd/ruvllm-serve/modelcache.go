package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/ruvllm/ruvllm/models/hub"
)

func init() {
	register("ls", "list the models in the cache ($RUVLLM_CACHE): name, size, modified", runList)
	register("rm", "delete models from the cache (NAME as ls shows it, OWNER/REPO[:QUANT], or a cached file's path)", runRemove)
}

// runList shows what pull (and --model, --hf, run with a Hugging Face
// name) put in the cache, with the names that run, serve --model and rm
// take.
func runList(e *env, args []string) error {
	fs := newFlags("ls", "[--paths]")
	paths := fs.Bool("paths", false, "show where each file is")
	pos, err := fs.parse(args, e.stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q (see -h)", errUsage, pos[0])
	}
	c := &hub.Client{}
	files, err := c.Cached()
	if err != nil {
		return err
	}
	if len(files) == 0 {
		dir, _ := hub.DefaultCacheDir()
		fmt.Fprintf(e.stderr, "the cache (%s) holds no model; fetch one with: ruvllm-serve pull OWNER/REPO[:QUANT]\n", dir)
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 3, ' ', 0)
	header := "NAME\tSIZE\tMODIFIED"
	if *paths {
		header += "\tPATH"
	}
	fmt.Fprintln(tw, header)
	for _, f := range files {
		name := f.Ref.String()
		if f.Partial {
			name += " (partial download)"
		}
		line := fmt.Sprintf("%s\t%s\t%s", name, humanBytes(uint64(f.Size)), f.Modified.Local().Format("2006-01-02 15:04"))
		if *paths {
			line += "\t" + f.Path
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// runRemove deletes cached models: every file a name matches (a file at
// each revision the cache holds it, the files with a quantization tag),
// except that a bare repository with several cached files must be made
// precise. Paths outside the cache are refused: rm never deletes a user's
// own files.
func runRemove(e *env, args []string) error {
	fs := newFlags("rm", "NAME ...   (as ls shows it: OWNER/REPO/FILE.gguf; or OWNER/REPO[:QUANT], or a cached file's path)")
	names, err := fs.parse(args, e.stdout)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("%w: name the model to delete (see ruvllm-serve ls)", errUsage)
	}
	c := &hub.Client{}
	var failed error
	for _, name := range names {
		if err := removeCached(c, name, e.stdout); err != nil {
			fmt.Fprintf(e.stderr, "ruvllm-serve rm: %v\n", err)
			failed = errors.New("some models were not deleted")
		}
	}
	return failed
}

// removeCached deletes the files name matches and says which.
func removeCached(c *hub.Client, name string, stdout io.Writer) error {
	found, err := c.FindCached(name)
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return fmt.Errorf("%s: no such model in the cache (see ruvllm-serve ls)", name)
	}
	if ref, err := hub.ParseRef(name); err == nil && ref.File == "" && ref.Quant == "" && distinctFiles(found) > 1 {
		msg := fmt.Sprintf("%s matches %d cached files; name the one to delete:", name, len(found))
		for _, f := range found {
			msg += "\n  " + f.Ref.String()
		}
		return errors.New(msg)
	}
	for _, f := range found {
		if err := c.Remove(f); err != nil {
			return err
		}
		what := "deleted"
		if f.Partial {
			what = "deleted the partial download of"
		}
		fmt.Fprintf(stdout, "%s %s\n", what, f.Ref.String())
	}
	return nil
}

// distinctFiles counts the files among found, a file and its partial
// download being one.
func distinctFiles(found []hub.CachedFile) int {
	seen := map[string]bool{}
	for _, f := range found {
		seen[f.Ref.String()] = true
	}
	return len(seen)
}
