package tokenizer

import (
	"slices"
	"strings"

	"github.com/ruvllm/ruvllm/models/gguf"
)

// Tokenizer encodes text into token ids and decodes ids into text, as
// llama.cpp does for the same vocabulary. It is safe for concurrent use.
type Tokenizer struct {
	vocab *Vocab
	kind  modelKind
	enc   encoder
	attrs []tokenAttr
	eog   map[ID]bool

	// special lists the tokens the splitter looks for, longest text first;
	// byFirst1 and byFirst2 index it by the first one or two bytes of the text
	// so that one pass over the input finds which of them occur.
	special  []ID
	byFirst1 [256][]int32
	byFirst2 map[uint16][]int32

	pieces []string // what each token decodes to, special tokens rendered

	// escapeSpaces: BPE vocabularies in SentencePiece style (Gemma 4) write
	// spaces as ▁ rather than through the GPT-2 byte mapping.
	escapeSpaces bool
}

type modelKind int

const (
	kindSPM modelKind = iota
	kindBPE
	kindWPM
)

// tokenAttr is llama.cpp's token attribute bit set.
type tokenAttr uint16

const (
	attrUnknown tokenAttr = 1 << iota
	attrUnused
	attrNormal
	attrControl
	attrUserDefined
	attrByte
	attrLStrip // whitespace before the token is dropped when it is split out
	attrRStrip // whitespace after the token is dropped when it is split out
)

// EncodeOptions says how Encode treats special tokens. The zero value encodes
// plain text: no BOS/EOS, special-token text encoded as ordinary text (as
// llama.cpp's tokenizer tests do).
type EncodeOptions struct {
	// AddSpecial adds the BOS/EOS tokens the vocabulary asks for (WordPiece:
	// [CLS] ... [SEP]).
	AddSpecial bool
	// ParseSpecial splits the text of control tokens (<|im_start|>, </s>, ...)
	// out as those tokens. User-defined tokens are split out either way.
	ParseSpecial bool
}

// FromGGUF builds the tokenizer described by f's metadata.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	v, err := LoadVocab(f)
	if err != nil {
		return nil, err
	}
	return New(v)
}

// New builds a tokenizer for v. It keeps a copy of v whose out-of-range
// special ids are set to -1; v's slices and map are shared, not copied.
func New(v *Vocab) (*Tokenizer, error) {
	n := len(v.Tokens)
	if n == 0 {
		return nil, vocabErr("no tokens")
	}
	if v.Scores != nil && len(v.Scores) != n {
		return nil, vocabErr("%d scores for %d tokens", len(v.Scores), n)
	}
	if v.Types != nil && len(v.Types) != n {
		return nil, vocabErr("%d token types for %d tokens", len(v.Types), n)
	}
	vc := *v
	for _, s := range vc.specialIDs() {
		if !vc.validID(*s.id) {
			*s.id = -1
		}
	}
	if vc.IDs == nil {
		vc.IDs = make(map[string]ID, n)
		for i, tok := range vc.Tokens {
			if _, dup := vc.IDs[tok]; !dup {
				vc.IDs[tok] = ID(i)
			}
		}
	}
	for s, id := range vc.IDs {
		if id < 0 || int(id) >= n {
			return nil, vocabErr("IDs[%q] = %d is outside the %d tokens", s, id, n)
		}
	}
	if vc.AddBOS && vc.BOS < 0 && vc.Model != "bert" {
		return nil, vocabErr("AddBOS is set, but there is no BOS token")
	}
	if vc.AddEOS && vc.EOS < 0 {
		return nil, vocabErr("AddEOS is set, but there is no EOS token")
	}
	t := &Tokenizer{vocab: &vc}

	switch vc.Model {
	case "llama":
		t.kind, t.enc = kindSPM, newSPM(&vc)
	case "bert":
		t.kind, t.enc = kindWPM, newWPM(&vc)
	case "gpt2", "gemma4":
		t.kind = kindBPE
		switch vc.Pre {
		case "gemma4", "granite-embed-multi-311m", "sarvam-moe":
			t.escapeSpaces = true
		}
		enc, err := newBPE(&vc)
		if err != nil {
			return nil, err
		}
		t.enc = enc
	default:
		return nil, vocabErr("unsupported tokenizer model %q", vc.Model)
	}

	t.initAttrs()
	t.initSpecialIndex()
	t.pieces = make([]string, n)
	for id := range n {
		t.pieces[id] = t.piece(ID(id))
	}
	t.applyNameQuirks()
	return t, nil
}

// Vocab returns the vocabulary the tokenizer was built from.
func (t *Tokenizer) Vocab() *Vocab { return t.vocab }

// IsEOG reports whether id ends generation: EOS, EOT, EOM, the FIM pad/repo/
// file-separator tokens, and the tokens llama.cpp recognises by their text
// (<|im_end|>, <|eot_id|>, <|endoftext|>, <end_of_turn>, ...).
func (t *Tokenizer) IsEOG(id ID) bool { return t.eog[id] }

// eogTexts are the token texts llama.cpp treats as end of generation.
// "</s>" is not one of them, as in llama.cpp b4748, our reference: later
// versions added it (for PaddleOCR), which turns Phi-3's user-defined </s>,
// already its EOS, into a control token that plain text no longer matches.
var eogTexts = []string{
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
	"<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
	"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
	"<｜end▁of▁sentence｜>", "[e~[",
}

// initAttrs derives the token attributes and the end-of-generation set from
// the token types and texts, with llama.cpp's corrections for tokens that
// conversion typed wrongly.
func (t *Tokenizer) initAttrs() {
	v := t.vocab
	t.attrs = make([]tokenAttr, len(v.Tokens))
	for id := range t.attrs {
		typ := TokenNormal
		if v.Types != nil {
			typ = v.Types[id]
		}
		switch typ {
		case TokenNormal:
			t.attrs[id] = attrNormal
		case TokenUnknown:
			t.attrs[id] = attrUnknown
		case TokenControl:
			t.attrs[id] = attrControl
		case TokenUserDefined:
			t.attrs[id] = attrUserDefined
		case TokenUnused:
			t.attrs[id] = attrUnused
		case TokenByte:
			t.attrs[id] = attrByte
		}
	}
	textIs := func(id ID, texts []string) bool { return id >= 0 && slices.Contains(texts, v.Tokens[id]) }

	// End-of-turn and FIM tokens found by their text must be control tokens.
	for _, d := range []struct {
		id    ID
		texts []string
	}{
		{v.EOT, eotTexts}, {v.EOM, eomTexts}, {v.FIMPre, fimPreTexts}, {v.FIMSuf, fimSufTexts},
		{v.FIMMid, fimMidTexts}, {v.FIMPad, fimPadTexts}, {v.FIMRep, fimRepTexts}, {v.FIMSep, fimSepTexts},
	} {
		if textIs(d.id, d.texts) {
			t.attrs[d.id] |= attrControl
		}
	}
	for id, a := range t.attrs {
		if a&attrControl != 0 && strings.Contains(v.Tokens[id], "unused") {
			t.attrs[id] |= attrUnused
		}
	}

	t.eog = map[ID]bool{}
	for _, id := range []ID{v.FIMPad, v.FIMRep, v.FIMSep} {
		if id >= 0 {
			t.eog[id] = true
		}
	}
	for _, s := range eogTexts {
		if id, ok := v.IDs[s]; ok {
			t.eog[id] = true
			t.attrs[id] |= attrControl
		}
	}
	// gpt-oss: these structure tokens are always rendered.
	for _, s := range []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"} {
		if id, ok := v.IDs[s]; ok {
			t.attrs[id] = attrUserDefined
		}
	}
	for _, id := range []ID{v.EOS, v.EOT, v.EOM} {
		if id >= 0 {
			t.eog[id] = true
		}
	}
	// gpt-oss and Solar Open end a message with <|end|> but keep generating:
	// their turn ends with <|return|> or <|call|>.
	eogText := func(s string) (ID, bool) {
		id, ok := v.IDs[s]
		return id, ok && t.eog[id]
	}
	endID, hasEnd := eogText("<|end|>")
	_, hasReturn := eogText("<|return|>")
	_, hasCall := eogText("<|call|>")
	_, hasCalls := eogText("<|calls|>")
	_, hasFlush := eogText("<|flush|>")
	if hasEnd && ((hasReturn && (hasCall || hasCalls)) || ((hasCall || hasCalls) && hasFlush)) {
		delete(t.eog, endID)
		t.attrs[endID] = attrUserDefined
	}
}

// initSpecialIndex lists the tokens the splitter looks for: control,
// user-defined and unknown ones, longest text first (ties by id).
func (t *Tokenizer) initSpecialIndex() {
	for id, a := range t.attrs {
		// An empty text would match everywhere (LoadVocab never makes one).
		if a&(attrControl|attrUserDefined|attrUnknown) != 0 && t.vocab.Tokens[id] != "" {
			t.special = append(t.special, ID(id))
		}
	}
	toks := t.vocab.Tokens
	slices.SortStableFunc(t.special, func(a, b ID) int { return len(toks[b]) - len(toks[a]) })
	t.byFirst2 = map[uint16][]int32{}
	for k, id := range t.special {
		s := toks[id]
		if len(s) == 1 {
			t.byFirst1[s[0]] = append(t.byFirst1[s[0]], int32(k))
		} else {
			key := uint16(s[0])<<8 | uint16(s[1])
			t.byFirst2[key] = append(t.byFirst2[key], int32(k))
		}
	}
}

// applyNameQuirks sets the strip attributes llama.cpp gives some models'
// special tokens by model name.
func (t *Tokenizer) applyNameQuirks() {
	v := t.vocab
	set := func(text string, a tokenAttr, on bool) {
		id, ok := v.IDs[text]
		if !ok {
			return
		}
		if on {
			t.attrs[id] |= a
		} else {
			t.attrs[id] &^= a
		}
	}
	name := strings.ToLower(v.Name)
	switch {
	case containsAny(v.Pre, "jina-v2-de", "jina-v2-es", "jina-v2-code") || containsAny(v.Arch, "nomic-bert-moe", "jina-bert-v3"):
		set("<mask>", attrLStrip, true)
	case containsAny(name, "phi-3", "phi3"):
		for _, id := range t.special {
			t.attrs[id] |= attrRStrip
		}
		set("</s>", attrRStrip, true)
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			set(s, attrRStrip, false)
		}
	case containsAny(name, "modern-bert"):
		set("[MASK]", attrLStrip, true)
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// Encode returns the token ids of text.
func (t *Tokenizer) Encode(text string, o EncodeOptions) []ID {
	v := t.vocab
	frags := t.split(text, o.ParseSpecial)
	out := make([]ID, 0, len(text)/3+2)
	switch t.kind {
	case kindSPM:
		if o.AddSpecial && v.AddBOS {
			out = append(out, v.BOS)
		}
		// llama.cpp prefixes a space to the text at the start and to every
		// text fragment that follows a special token.
		prevSpecial := true
		for _, f := range frags {
			if f.id >= 0 {
				out = append(out, f.id)
				prevSpecial = true
				continue
			}
			s := f.text
			if v.AddSpacePrefix && prevSpecial {
				s = " " + s
			}
			out = t.enc.encode(s, out)
			prevSpecial = false
		}
		if o.AddSpecial && v.AddEOS {
			out = append(out, v.EOS)
		}
	case kindBPE:
		if o.AddSpecial && v.AddBOS {
			out = append(out, v.BOS)
		}
		for _, f := range frags {
			if f.id >= 0 {
				out = append(out, f.id)
				continue
			}
			s := f.text
			if t.escapeSpaces {
				s = strings.ReplaceAll(s, " ", spaceMark)
			}
			out = t.enc.encode(s, out)
		}
		if o.AddSpecial && v.AddEOS {
			out = append(out, v.EOS)
		}
	case kindWPM:
		// WordPiece always brackets with [CLS] ... [SEP], whatever add_bos says.
		if o.AddSpecial && v.BOS >= 0 {
			out = append(out, v.BOS)
		}
		for _, f := range frags {
			if f.id >= 0 {
				out = append(out, f.id)
				continue
			}
			out = t.enc.encode(f.text, out)
		}
		if o.AddSpecial && v.SEP >= 0 {
			out = append(out, v.SEP)
		}
	}
	return out
}

// fragment is a piece of the input: raw text (id < 0) or a special token.
type fragment struct {
	text string
	id   ID
}

// asciiSpace is what C's isspace accepts, which llama.cpp strips around
// tokens with the lstrip/rstrip attributes.
const asciiSpace = " \t\n\v\f\r"

// split cuts the special tokens out of text as llama.cpp's
// tokenizer_st_partition does: each special token in turn, longest first,
// is cut out of every text fragment left by the longer ones. Control and
// unknown tokens are looked for only with parseSpecial.
func (t *Tokenizer) split(text string, parseSpecial bool) []fragment {
	if text == "" {
		return nil
	}
	frags := []fragment{{text: text, id: -1}}
	present := t.presentSpecials(text, parseSpecial)
	if len(present) == 0 {
		return frags
	}
	var next []fragment
	for _, k := range present {
		id := t.special[k]
		tok := t.vocab.Tokens[id]
		a := t.attrs[id]
		next = next[:0]
		for _, f := range frags {
			if f.id >= 0 {
				next = append(next, f)
				continue
			}
			rest := f.text
			for {
				i := strings.Index(rest, tok)
				if i < 0 {
					if rest != "" {
						next = append(next, fragment{text: rest, id: -1})
					}
					break
				}
				left := rest[:i]
				if a&attrLStrip != 0 {
					left = strings.TrimRight(left, asciiSpace)
				}
				if left != "" {
					next = append(next, fragment{text: left, id: -1})
				}
				next = append(next, fragment{id: id})
				rest = rest[i+len(tok):]
				if a&attrRStrip != 0 {
					rest = strings.TrimLeft(rest, asciiSpace)
				}
			}
		}
		frags, next = next, frags
	}
	return frags
}

// presentSpecials returns, in splitting order, the indices into t.special of
// the tokens that occur in text and are eligible.
func (t *Tokenizer) presentSpecials(text string, parseSpecial bool) []int {
	if len(t.special) == 0 {
		return nil
	}
	eligible := func(k int32) bool {
		return parseSpecial || t.attrs[t.special[k]]&(attrControl|attrUnknown) == 0
	}
	var found map[int32]bool
	mark := func(k int32) {
		if found == nil {
			found = map[int32]bool{}
		}
		found[k] = true
	}
	toks := t.vocab.Tokens
	for i := 0; i < len(text); i++ {
		for _, k := range t.byFirst1[text[i]] {
			if eligible(k) {
				mark(k)
			}
		}
		if i+1 < len(text) {
			for _, k := range t.byFirst2[uint16(text[i])<<8|uint16(text[i+1])] {
				if !found[k] && eligible(k) && strings.HasPrefix(text[i:], toks[t.special[k]]) {
					mark(k)
				}
			}
		}
	}
	if len(found) == 0 {
		return nil
	}
	ks := make([]int, 0, len(found))
	for k := range found {
		ks = append(ks, int(k))
	}
	slices.Sort(ks)
	return ks
}

// EncodeContinuation returns the tokens completion adds after prompt,
// whose tokens (encoded with o) are promptIDs: the tokens of prompt +
// completion encoded together past promptIDs when those are their prefix,
// as scoring the joined text under a model splits it; else, when the
// joined text's tokens run across the boundary, completion encoded alone
// without special tokens.
func (t *Tokenizer) EncodeContinuation(promptIDs []ID, prompt, completion string, o EncodeOptions) []ID {
	full := t.Encode(prompt+completion, o)
	if len(full) > len(promptIDs) && slices.Equal(full[:len(promptIDs)], promptIDs) {
		return full[len(promptIDs):]
	}
	o.AddSpecial = false
	return t.Encode(completion, o)
}
