package tokenizer

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/ruvllm/ruvllm/models/gguf"
)

// TokenType is a token's kind as tokenizer.ggml.token_type stores it.
type TokenType int32

// The token types of tokenizer.ggml.token_type.
const (
	TokenNormal      TokenType = 1
	TokenUnknown     TokenType = 2
	TokenControl     TokenType = 3
	TokenUserDefined TokenType = 4
	TokenUnused      TokenType = 5
	TokenByte        TokenType = 6
)

// Vocab is the tokenizer metadata of a model file, with llama.cpp's defaults
// filled in where a key is absent.
type Vocab struct {
	Model  string      // tokenizer.ggml.model: "llama" (SPM), "gpt2" (BPE), "bert" (WPM), ...
	Pre    string      // tokenizer.ggml.pre ("" when absent)
	Tokens []string    // token texts; an empty text is replaced by "[EMPTY_<id>]" as llama.cpp does
	Scores []float32   // nil when absent
	Types  []TokenType // all TokenNormal when absent
	Merges []string    // "a b" pairs, BPE only

	// Special token ids, -1 when absent. An id outside the vocabulary counts as
	// absent (4294967295 is a common way of writing "none").
	BOS, EOS, EOT, EOM, UNK, PAD, SEP, CLS, MASK ID
	// Fill-in-the-middle token ids, -1 when absent; FIMPad, FIMRep and FIMSep
	// end generation.
	FIMPre, FIMSuf, FIMMid, FIMPad, FIMRep, FIMSep ID

	// What encoding with special tokens adds, and whether SPM prepends a space.
	AddBOS, AddEOS, AddSpacePrefix bool
	// AddSEP is tokenizer.ggml.add_sep_token (BERT-style pairs); WordPiece
	// always ends an encoding with SEP when special tokens are added.
	AddSEP bool
	// CleanSpaces is HF's clean_up_tokenization_spaces: decoding removes the
	// space before ".,!?" and some apostrophes.
	CleanSpaces bool
	// Lowercase and StripAccents are the BERT normalizer options (WordPiece).
	Lowercase, StripAccents bool

	// Name and Arch are general.name and general.architecture: llama.cpp keys
	// a few per-model token attributes on them (Phi-3 strips the spaces after
	// its special tokens).
	Name, Arch string

	IDs map[string]ID // token text -> id
}

// The tokenizer.ggml keys, spelled as llama.cpp writes them ("seperator" too).
const (
	keyModel        = "tokenizer.ggml.model"
	keyPre          = "tokenizer.ggml.pre"
	keyTokens       = "tokenizer.ggml.tokens"
	keyScores       = "tokenizer.ggml.scores"
	keyTypes        = "tokenizer.ggml.token_type"
	keyMerges       = "tokenizer.ggml.merges"
	keyAddBOS       = "tokenizer.ggml.add_bos_token"
	keyAddEOS       = "tokenizer.ggml.add_eos_token"
	keyAddSEP       = "tokenizer.ggml.add_sep_token"
	keyAddPrefix    = "tokenizer.ggml.add_space_prefix"
	keyLowercase    = "tokenizer.ggml.normalizer.lowercase"
	keyStripAccents = "tokenizer.ggml.normalizer.strip_accents"
	keyCLS          = "tokenizer.ggml.cls_token_id"
	keyGeneralName  = "general.name"
	keyGeneralArch  = "general.architecture"
)

// ErrVocab is wrapped by every error about tokenizer metadata.
var ErrVocab = errors.New("tokenizer: invalid vocabulary")

func vocabErr(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrVocab}, a...)...)
}

// LoadVocab reads the tokenizer.ggml.* metadata of f. Where a key is absent it
// uses llama.cpp's default for the tokenizer model: SPM adds BOS (1) and a
// space prefix, EOS is 2 and UNK 0; WordPiece uses [CLS] 101 ... [SEP] 102
// with UNK 100; BPE adds BOS only for the pre-tokenizers that want it (Llama 3
// and a few others).
func LoadVocab(f *gguf.File) (*Vocab, error) {
	model, ok := f.GetString(keyModel)
	if !ok {
		return nil, vocabErr("%s is missing", keyModel)
	}
	v := &Vocab{Model: model}
	v.Pre, _ = f.GetString(keyPre)
	v.Name, _ = f.GetString(keyGeneralName)
	v.Arch, _ = f.GetString(keyGeneralArch)
	if model == "no_vocab" || model == "none" {
		return nil, vocabErr("the model has no vocabulary (%s = %q)", keyModel, model)
	}

	tokens, ok := f.GetStrings(keyTokens)
	if !ok {
		return nil, vocabErr("%s is missing or not a string array", keyTokens)
	}
	if len(tokens) == 0 {
		return nil, vocabErr("%s is empty", keyTokens)
	}
	if len(tokens) > math.MaxInt32 {
		return nil, vocabErr("%d tokens is too many", len(tokens))
	}
	n := len(tokens)
	v.Tokens = make([]string, n)
	v.IDs = make(map[string]ID, n)
	for i, t := range tokens {
		if t == "" {
			// An empty special token would match everywhere; llama.cpp names it instead.
			t = "[EMPTY_" + strconv.Itoa(i) + "]"
		}
		v.Tokens[i] = t
		if _, dup := v.IDs[t]; !dup { // the first of duplicate texts wins
			v.IDs[t] = ID(i)
		}
	}

	if val, ok := f.Get(keyScores); ok {
		if val.Type != gguf.TypeArray || val.Len() < n {
			return nil, vocabErr("%s must be an array of at least %d numbers", keyScores, n)
		}
		if fs, ok := val.Float32s(); ok {
			v.Scores = slices.Clone(fs[:n])
		} else if is, ok := val.Ints(); ok && val.Elem == gguf.TypeInt32 {
			v.Scores = make([]float32, n)
			for i := range v.Scores {
				v.Scores[i] = float32(is[i])
			}
		} else {
			return nil, vocabErr("%s has element type %v, want f32 or i32", keyScores, val.Elem)
		}
	}

	v.Types = make([]TokenType, n)
	if val, ok := f.Get(keyTypes); ok {
		is, ok := val.Ints()
		if !ok || len(is) < n {
			return nil, vocabErr("%s must be an integer array of at least %d entries", keyTypes, n)
		}
		for i := range v.Types {
			v.Types[i] = TokenType(int32(is[i]))
		}
	} else {
		for i := range v.Types {
			v.Types[i] = TokenNormal
		}
	}

	if val, ok := f.Get(keyMerges); ok {
		m, ok := val.Strings()
		if !ok {
			return nil, vocabErr("%s must be a string array", keyMerges)
		}
		v.Merges = m
	}

	if err := v.applyDefaults(); err != nil {
		return nil, err
	}
	v.readSpecialIDs(f)
	if x, ok := f.GetBool(keyAddBOS); ok {
		v.AddBOS = x
	}
	if x, ok := f.GetBool(keyAddEOS); ok {
		v.AddEOS = x
	}
	if x, ok := f.GetBool(keyAddSEP); ok {
		v.AddSEP = x
	}
	if x, ok := f.GetBool(keyAddPrefix); ok {
		v.AddSpacePrefix = x
	}
	if x, ok := f.GetBool(keyLowercase); ok {
		v.Lowercase = x
		v.StripAccents = x // HF couples them unless strip_accents is given
	}
	if x, ok := f.GetBool(keyStripAccents); ok {
		v.StripAccents = x
	}
	if v.Pre == "gemma4" || v.Pre == "granite-embed-multi-311m" {
		v.AddBOS = true // llama.cpp overrides a false add_bos_token for Gemma 4
	}
	if v.AddBOS && v.BOS < 0 {
		return nil, vocabErr("%s is true, but there is no BOS token", keyAddBOS)
	}
	if v.AddEOS && v.EOS < 0 {
		return nil, vocabErr("%s is true, but there is no EOS token", keyAddEOS)
	}
	if v.AddSEP && v.SEP < 0 {
		return nil, vocabErr("%s is true, but there is no SEP token", keyAddSEP)
	}
	v.detectSpecialsByText()
	return v, nil
}

// bpeNoCleanSpaces lists the BPE pre-tokenizers for which llama.cpp turns
// clean_up_tokenization_spaces off.
var bpeNoCleanSpaces = map[string]bool{
	"deepseek-llm": true, "deepseek-coder": true, "deepseek-v3": true, "spark2_5": true, "youtu": true,
	"sarvam-moe": true, "command-r": true, "qwen2": true, "deepseek-r1-qwen": true, "kormo": true,
	"f2llmv2": true, "qwen35": true, "poro-chat": true, "viking": true, "tekken": true, "smollm": true,
	"chameleon": true, "gpt-4o": true, "llama4": true, "kanana2": true, "talkie": true,
	"granite-embed-multi-97m": true, "tiny_aya": true, "cohere2moe": true, "superbpe": true,
	"trillion": true, "granite-docling": true, "bailingmoe": true, "bailingmoe2": true, "llada-moe": true,
	"seed-coder": true, "hunyuan": true, "hunyuan-dense": true, "hy_v4": true, "joyai-llm": true,
	"kimi-k2": true, "ufakzeka": true, "grok-2": true, "afmoe": true, "laguna": true, "minimax-m2": true,
	"solar-open": true,
}

// bpeAddBOS lists the BPE pre-tokenizers for which llama.cpp adds BOS by default.
var bpeAddBOS = map[string]bool{
	"llama3": true, "llama-v3": true, "llama-bpe": true, "falcon3": true, "falcon-h1": true,
	"pixtral": true, "midm-2.0": true, "lfm2": true, "jina-v5-nano": true, "tekken": true, "chameleon": true,
}

// applyDefaults sets the special ids and flags llama.cpp assumes for the
// tokenizer model before any key is read.
func (v *Vocab) applyDefaults() error {
	v.BOS, v.EOS, v.EOT, v.EOM, v.UNK, v.PAD, v.SEP, v.CLS, v.MASK = -1, -1, -1, -1, -1, -1, -1, -1, -1
	v.FIMPre, v.FIMSuf, v.FIMMid, v.FIMPad, v.FIMRep, v.FIMSep = -1, -1, -1, -1, -1, -1
	switch v.Model {
	case "llama":
		v.BOS, v.EOS, v.UNK = 1, 2, 0
		v.AddBOS, v.AddSpacePrefix = true, true
	case "bert":
		v.BOS, v.CLS, v.UNK, v.SEP, v.PAD, v.MASK = 101, 101, 100, 102, 0, 103
		v.AddBOS, v.AddSEP, v.CleanSpaces = true, true, true
		v.Lowercase, v.StripAccents = true, true
	case "gpt2":
		v.BOS, v.EOS = 11, 11
		v.CleanSpaces = !bpeNoCleanSpaces[v.Pre]
		v.AddBOS = bpeAddBOS[v.Pre]
		switch v.Pre {
		case "jina-v1-en", "jina-v2-code", "roberta-bpe":
			v.AddSEP = true
		case "glm4", "chatglm-bpe":
			v.BOS = -1
		case "whitespace":
			v.Lowercase = false
		}
	case "gemma4":
		v.Pre = "gemma4"
		v.CleanSpaces = true
	case "t5":
		v.EOS, v.UNK, v.PAD = 1, 2, 0
		v.AddEOS = true
	case "rwkv":
	case "plamo2":
		v.BOS, v.EOS, v.UNK, v.PAD = 1, 2, 0, 3
	default:
		return vocabErr("unknown tokenizer model %q", v.Model)
	}
	// A default outside a small vocabulary is no token at all.
	for _, p := range v.specialIDs() {
		if int(*p.id) >= len(v.Tokens) {
			*p.id = -1
		}
	}
	return nil
}

type specialID struct {
	key string
	id  *ID
}

// specialIDs pairs each special id field with its key. The deprecated
// prefix/suffix/middle keys come last so they override the FIM keys, as in
// llama.cpp.
func (v *Vocab) specialIDs() []specialID {
	const p = "tokenizer.ggml."
	return []specialID{
		{p + "bos_token_id", &v.BOS}, {p + "eos_token_id", &v.EOS}, {p + "eot_token_id", &v.EOT},
		{p + "eom_token_id", &v.EOM}, {p + "unknown_token_id", &v.UNK}, {p + "seperator_token_id", &v.SEP},
		{p + "padding_token_id", &v.PAD}, {keyCLS, &v.CLS}, {p + "mask_token_id", &v.MASK},
		{p + "fim_pre_token_id", &v.FIMPre}, {p + "fim_suf_token_id", &v.FIMSuf},
		{p + "fim_mid_token_id", &v.FIMMid}, {p + "fim_pad_token_id", &v.FIMPad},
		{p + "fim_rep_token_id", &v.FIMRep}, {p + "fim_sep_token_id", &v.FIMSep},
		{p + "prefix_token_id", &v.FIMPre}, {p + "suffix_token_id", &v.FIMSuf},
		{p + "middle_token_id", &v.FIMMid},
	}
}

// readSpecialIDs overrides the defaults with the ids the file gives; an id
// outside the vocabulary keeps the default, as in llama.cpp.
func (v *Vocab) readSpecialIDs(f *gguf.File) {
	for _, s := range v.specialIDs() {
		x, ok := f.GetUint(s.key)
		if !ok || x >= uint64(len(v.Tokens)) {
			continue
		}
		*s.id = ID(x)
	}
	// Older BERT conversions name [CLS] only as cls_token_id; it is the BOS
	// that WordPiece puts first.
	if _, hasBOS := f.GetUint("tokenizer.ggml.bos_token_id"); !hasBOS && v.CLS >= 0 {
		if _, hasCLS := f.GetUint(keyCLS); hasCLS {
			v.BOS = v.CLS
		}
	}
}

// Texts by which llama.cpp recognises special tokens that conversion left
// unnamed.
var (
	eotTexts = []string{
		"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
		"<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>",
	}
	eomTexts    = []string{"<|eom_id|>"}
	fimPreTexts = []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"}
	fimSufTexts = []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"}
	fimMidTexts = []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"}
	// Not "<fim_pad>" and "[PAD]", which later llama.cpp versions added:
	// b4748, our reference, leaves StarCoder's <fim_pad> and BERT's [PAD]
	// as they are, and they do not end generation.
	fimPadTexts = []string{"<|fim_pad|>", "<fim-pad>", "<PAD>"}
	fimRepTexts = []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}
	fimSepTexts = []string{"<|file_sep|>"}
)

// detectSpecialsByText fills EOT, EOM and the FIM ids that the file leaves
// unset from the token texts llama.cpp looks for; of several matches the
// lowest id wins.
func (v *Vocab) detectSpecialsByText() {
	for _, d := range []struct {
		id    *ID
		texts []string
	}{
		{&v.EOT, eotTexts}, {&v.EOM, eomTexts}, {&v.FIMPre, fimPreTexts}, {&v.FIMSuf, fimSufTexts},
		{&v.FIMMid, fimMidTexts}, {&v.FIMPad, fimPadTexts}, {&v.FIMRep, fimRepTexts}, {&v.FIMSep, fimSepTexts},
	} {
		if *d.id >= 0 {
			continue
		}
		for _, t := range d.texts {
			if id, ok := v.IDs[t]; ok && (*d.id < 0 || id < *d.id) {
				*d.id = id
			}
		}
	}
}

// encoder is the algorithm of one tokenizer model: it encodes a fragment of
// raw text that holds no special tokens.
type encoder interface {
	encode(text string, out []ID) []ID // appends ids
}

// validID reports whether id names a token of v.
func (v *Vocab) validID(id ID) bool { return id >= 0 && int(id) < len(v.Tokens) }
