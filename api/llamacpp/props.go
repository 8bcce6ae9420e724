package llamacpp

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// settingsOf is llama-server's params object of a slot (its
// generation_settings): the sampling p, the token limit maxTokens (0: none)
// and the rest at what this server does (the samplers it does not have at
// their neutral values).
func settingsOf(p backends.Params, maxTokens int, stop []string, ignoreEOS, stream bool, nProbs int, perTok, post bool) map[string]any {
	seed := int64(llamaDefaultSeed)
	if p.Seed != nil {
		seed = *p.Seed
	}
	nPredict := -1
	if maxTokens > 0 {
		nPredict = maxTokens
	}
	repeatLastN := p.RepeatLastN
	if repeatLastN == 0 {
		repeatLastN = backends.DefaultRepeatLastN
	}
	if stop == nil {
		stop = []string{}
	}
	return map[string]any{
		"n_predict": nPredict, "seed": seed, "temperature": p.Temperature, "dynatemp_range": 0.0, "dynatemp_exponent": 1.0,
		"top_k": p.TopK, "top_p": p.TopP, "min_p": p.MinP, "top_n_sigma": -1.0, "xtc_probability": 0.0, "xtc_threshold": 0.1,
		"typical_p": 1.0, "repeat_last_n": repeatLastN, "repeat_penalty": p.RepeatPenalty, "presence_penalty": p.PresencePenalty,
		"frequency_penalty": p.FrequencyPenalty, "dry_multiplier": 0.0, "dry_base": 1.75, "dry_allowed_length": 2,
		"dry_penalty_last_n": -1, "mirostat": 0, "mirostat_tau": 5.0, "mirostat_eta": 0.1, "stop": stop, "max_tokens": nPredict,
		"n_keep": 0, "n_discard": 0, "ignore_eos": ignoreEOS, "stream": stream, "n_probs": nProbs, "min_keep": 0,
		"grammar": "", "samplers": []string{"penalties", "top_k", "top_p", "min_p", "temperature"},
		"timings_per_token": perTok, "post_sampling_probs": post, "lora": []any{},
	}
}

// model is the served model a request of the server's own routes names in
// ?model= (the default model without it).
func (a *API) model(r *http.Request) (*session.Model, error) {
	t, err := a.Models.Resolve(r.URL.Query().Get("model"), "model")
	if err != nil {
		return nil, err
	}
	return t.Model, nil
}

// slotJSON is llama-server's object of one slot; a slot that has run
// nothing yet shows the server's defaults.
func (a *API) slotJSON(s backends.SlotInfo) map[string]any {
	if !s.Processing && s.PromptTokens == 0 {
		s.Params, s.MaxTokens = a.Models.Sampling(), a.Models.MaxTokens()
	}
	return map[string]any{
		"id":            s.ID,
		"id_task":       -1,
		"n_ctx":         s.MaxLen,
		"speculative":   false,
		"is_processing": s.Processing,
		"params":        settingsOf(s.Params, s.MaxTokens, nil, false, false, 0, false, false),
		"prompt":        "",
		"next_token": map[string]any{
			"has_next_token": s.Processing, "has_new_line": false, "n_remain": -1, "n_decoded": 0, "stopping_word": "",
		},
	}
}

// props serves GET /props: the model, the slots' default settings and the
// server's switches, as llama-server lists them.
func (a *API) props(w http.ResponseWriter, r *http.Request) error {
	m, err := a.model(r)
	if err != nil {
		return err
	}
	var slots []backends.SlotInfo
	if err := a.Models.WithSlots(r.Context(), m, func(se session.SlotEngine) error {
		slots = se.Slots()
		return nil
	}); err != nil {
		return err
	}
	def := backends.SlotInfo{MaxLen: m.Engine.MaxLen()}
	if len(slots) > 0 {
		def.MaxLen = slots[0].MaxLen
	}
	tmpl := ""
	if ts, ok := m.Chat.(interface{ ChatTemplateSource() string }); ok {
		tmpl = ts.ChatTemplateSource()
	}
	v := m.Tokenizer.Vocab()
	piece := func(id tokenizer.ID) string {
		if id < 0 {
			return ""
		}
		return m.Tokenizer.Piece(id)
	}
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]any{
		"default_generation_settings": a.slotJSON(def),
		"total_slots":                 len(slots),
		"model_path":                  m.Path,
		"modalities":                  map[string]bool{"vision": false, "audio": false},
		"endpoint_slots":              a.Slots,
		"endpoint_props":              false,
		"endpoint_metrics":            true,
		"webui":                       a.WebUI,
		"chat_template":               tmpl,
		"bos_token":                   piece(v.BOS),
		"eos_token":                   piece(v.EOS),
		"build_info":                  a.Version,
		"version":                     a.Version,
	})
	return nil
}

// setProps serves POST /props, which changes nothing here: llama-server
// refuses it too unless started with --props.
func (a *API) setProps(w http.ResponseWriter, r *http.Request) error {
	return notSupported("this server does not support changing global properties")
}

// slots serves GET /slots (with --slots): every slot's state. With
// ?fail_on_no_slot=1 it answers 503 when no slot is free.
func (a *API) slots(w http.ResponseWriter, r *http.Request) error {
	if !a.Slots {
		return notSupported("this server does not support the slots endpoint; start it with --slots")
	}
	m, err := a.model(r)
	if err != nil {
		return err
	}
	var slots []backends.SlotInfo
	if err := a.Models.WithSlots(r.Context(), m, func(se session.SlotEngine) error {
		slots = se.Slots()
		return nil
	}); err != nil {
		return err
	}
	out := make([]any, len(slots))
	free := false
	for i, s := range slots {
		out[i] = a.slotJSON(s)
		free = free || !s.Processing
	}
	if q := r.URL.Query().Get("fail_on_no_slot"); q != "" && q != "0" && q != "false" && !free {
		return &session.Error{Status: http.StatusServiceUnavailable, Type: session.TypeUnavailable, Code: "no_slot_available", Message: "no slot available"}
	}
	jsonhttp.WriteJSON(w, http.StatusOK, out)
	return nil
}

// slotAction serves POST /slots/{id}?action=save|restore|erase (with
// --slot-save-path): a slot's cache written to a file of the directory,
// read back into a slot, or forgotten. Each waits for the slot to be free.
func (a *API) slotAction(w http.ResponseWriter, r *http.Request) error {
	if a.SlotSavePath == "" {
		return notSupported("this server does not support slot actions; start it with --slot-save-path")
	}
	id, err := strconv.Atoi(chi.URLParam(r, "id"))
	if err != nil || id < 0 {
		return session.Invalid("id_slot", session.CodeInvalidValue, "invalid slot id %s", session.Quote(chi.URLParam(r, "id")))
	}
	m, err := a.model(r)
	if err != nil {
		return err
	}
	action := r.URL.Query().Get("action")
	var filename string
	if action == "save" || action == "restore" {
		f, err := jsonhttp.Read(r)
		if err != nil {
			return err
		}
		name, ok, err := f.Str("filename")
		if err != nil {
			return err
		}
		if !ok {
			return session.Invalid("filename", session.CodeMissing, "filename is required")
		}
		if err := f.Unknown(); err != nil {
			return err
		}
		if !validFilename(name) {
			return session.Invalid("filename", session.CodeInvalidValue, "invalid filename %s: give a plain file name, without a directory", session.Quote(name))
		}
		filename = name
	}
	var out map[string]any
	start := time.Now()
	run := func(f func(seq backends.Sequence) error) error {
		err := a.Models.WithSlots(r.Context(), m, func(se session.SlotEngine) error {
			return se.SlotDo(r.Context(), id, f)
		})
		if errors.Is(err, backends.ErrNoSlot) {
			return session.Invalid("id_slot", session.CodeInvalidValue, "invalid slot id %d: %v", id, err)
		}
		return err
	}
	ms := func() float64 { return float64(time.Since(start)) / float64(time.Millisecond) }
	switch action {
	case "save":
		path := filepath.Join(a.SlotSavePath, filename)
		var saved int
		var written int64
		err = run(func(seq backends.Sequence) error {
			ss, ok := seq.(backends.StateSequence)
			if !ok {
				return notSupported("this backend cannot save a slot's cache")
			}
			saved = seq.Len()
			var e error
			written, e = writeSlotFile(path, slotKey(m), ss)
			return e
		})
		if err != nil {
			return err
		}
		out = map[string]any{"id_slot": id, "filename": filename, "n_saved": saved, "n_written": written,
			"timings": map[string]float64{"save_ms": ms()}}
	case "restore":
		path := filepath.Join(a.SlotSavePath, filename)
		var restored int
		var read int64
		err = run(func(seq backends.Sequence) error {
			ss, ok := seq.(backends.StateSequence)
			if !ok {
				return notSupported("this backend cannot restore a slot's cache")
			}
			var e error
			restored, read, e = readSlotFile(path, slotKey(m), ss)
			return e
		})
		if err != nil {
			return err
		}
		out = map[string]any{"id_slot": id, "filename": filename, "n_restored": restored, "n_read": read,
			"timings": map[string]float64{"restore_ms": ms()}}
	case "erase":
		var erased int
		err = run(func(seq backends.Sequence) error {
			erased = seq.Len()
			seq.Reset()
			return nil
		})
		if err != nil {
			return err
		}
		out = map[string]any{"id_slot": id, "n_erased": erased}
	default:
		return session.Invalid("action", session.CodeInvalidValue, "invalid action %s: give save, restore or erase", session.Quote(action))
	}
	jsonhttp.WriteJSON(w, http.StatusOK, out)
	return nil
}

// validFilename accepts a plain file name a client may give for a slot
// file: no directory part, no parent, no hidden file, nothing a shell or
// another file system would read differently.
func validFilename(name string) bool {
	if name == "" || len(name) > 255 || !utf8.ValidString(name) || name != strings.TrimSpace(name) ||
		strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") {
		return false
	}
	for _, r := range name {
		if unicode.IsControl(r) || strings.ContainsRune(`/\:*?"<>|`, r) || r == unicode.ReplacementChar {
			return false
		}
	}
	return filepath.Base(name) == name && filepath.IsLocal(name)
}

// A slot file is a header, then the sequence's state (kvcache's): the
// magic, a format version and a key of the model (its file's path and
// size, or its id), so that a file is never read into another model.
const (
	slotMagic   = "RVLLSLOT"
	slotVersion = 1
)

// slotKey tells m's slot files from other models'.
func slotKey(m *session.Model) [32]byte {
	id := "id:" + m.ID
	if m.Path != "" {
		if abs, err := filepath.Abs(m.Path); err == nil {
			id = "path:" + abs
			if st, err := os.Stat(abs); err == nil {
				id += ":" + strconv.FormatInt(st.Size(), 10)
			}
		}
	}
	return sha256.Sum256([]byte(id))
}

// writeSlotFile writes the slot file of seq to path, through a temporary
// file renamed into place, and returns its size.
func writeSlotFile(path string, key [32]byte, seq backends.StateSequence) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".slot-*")
	if err != nil {
		return 0, session.Internal("saving the slot: %v", err)
	}
	defer os.Remove(tmp.Name())
	hdr := make([]byte, 0, len(slotMagic)+4+len(key))
	hdr = append(hdr, slotMagic...)
	hdr = binary.LittleEndian.AppendUint32(hdr, slotVersion)
	hdr = append(hdr, key[:]...)
	n, err := tmp.Write(hdr)
	if err == nil {
		var m int64
		m, err = seq.SaveState(tmp)
		n += int(m)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return 0, session.Internal("saving the slot: %v", err)
	}
	return int64(n), nil
}

// readSlotFile restores seq from the slot file at path; it returns the
// tokens restored and the bytes read.
func readSlotFile(path string, key [32]byte, seq backends.StateSequence) (int, int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, session.NotFound("filename", "file_not_found", "no slot file %s was saved", session.Quote(filepath.Base(path)))
	}
	if err != nil {
		return 0, 0, session.Internal("restoring the slot: %v", err)
	}
	defer f.Close()
	hdr := make([]byte, len(slotMagic)+4+len(key))
	if _, err := io.ReadFull(f, hdr); err != nil || string(hdr[:len(slotMagic)]) != slotMagic {
		return 0, 0, session.Invalid("filename", session.CodeInvalidValue, "%s is not a slot file of this server", session.Quote(filepath.Base(path)))
	}
	if v := binary.LittleEndian.Uint32(hdr[len(slotMagic):]); v != slotVersion {
		return 0, 0, session.Invalid("filename", session.CodeInvalidValue, "%s is a slot file of version %d; this server reads %d", session.Quote(filepath.Base(path)), v, slotVersion)
	}
	if string(hdr[len(slotMagic)+4:]) != string(key[:]) {
		return 0, 0, session.Invalid("filename", session.CodeInvalidValue, "%s was saved from another model", session.Quote(filepath.Base(path)))
	}
	n, read, err := seq.LoadState(f)
	read += int64(len(hdr))
	switch {
	case errors.Is(err, kvcache.ErrState), errors.Is(err, kvcache.ErrTableFull):
		return 0, read, session.Invalid("filename", session.CodeInvalidValue, "%s cannot be restored: %v", session.Quote(filepath.Base(path)), err)
	case errors.Is(err, kvcache.ErrPoolFull):
		return 0, read, &session.Error{Status: http.StatusServiceUnavailable, Type: session.TypeUnavailable, Code: "kv_cache_full", RetryAfter: 1,
			Message: fmt.Sprintf("the KV cache has no room for %s now: %v", session.Quote(filepath.Base(path)), err)}
	case err != nil:
		return 0, read, session.Internal("restoring the slot: %v", err)
	}
	return n, read, nil
}
