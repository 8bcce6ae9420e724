package tokenizer

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// DecodeOptions says how ids become text. The zero value is llama.cpp's
// detokenize with remove_special and unparse_special off: control tokens
// decode to nothing, and the space the SPM space prefix put before the first
// word is stripped.
type DecodeOptions struct {
	// RemoveSpecial drops a leading BOS and a trailing EOS when the
	// vocabulary adds them. As in llama.cpp, the first word then keeps its
	// leading space.
	RemoveSpecial bool
	// RenderSpecial writes control and unknown tokens as their text
	// (llama.cpp's unparse_special). User-defined tokens are always written.
	RenderSpecial bool
	// Continuation says the ids continue text decoded earlier, as generated
	// tokens continue a prompt: the first token keeps its leading space, so
	// the pieces simply concatenate (what llama.cpp's server streams). Space
	// clean-up (Vocab.CleanSpaces) cannot see across the boundary with the
	// earlier text.
	Continuation bool
	// NoCleanSpaces writes the pieces as they are, without the space
	// clean-up the vocabulary asks for: the bytes a grammar that chose the
	// tokens saw, which the clean-up could change.
	NoCleanSpaces bool
	// Render are control tokens written as their text even without
	// RenderSpecial: the markers a tool-call parser looks for.
	Render []ID
}

// Decode returns the text of ids as llama.cpp's detokenize does with
// remove_special and unparse_special off. Ids outside the vocabulary decode
// to nothing. The result holds raw bytes: ids that end inside a UTF-8
// sequence give invalid UTF-8.
func (t *Tokenizer) Decode(ids []ID) string { return t.DecodeWith(ids, DecodeOptions{}) }

// DecodeWith returns the text of ids decoded with o.
func (t *Tokenizer) DecodeWith(ids []ID, o DecodeOptions) string {
	v := t.vocab
	removeSpace := v.AddSpacePrefix && !o.Continuation
	if o.RemoveSpecial && v.AddBOS && len(ids) > 0 && ids[0] == v.BOS {
		removeSpace = false
		ids = ids[1:]
	}
	if o.RemoveSpecial && v.AddEOS && len(ids) > 0 && ids[len(ids)-1] == v.EOS {
		ids = ids[:len(ids)-1]
	}
	var b []byte
	for _, id := range ids {
		p := t.Written(id, o)
		if removeSpace && strings.HasPrefix(p, " ") {
			p = p[1:]
		}
		removeSpace = false
		b = append(b, p...)
	}
	if v.CleanSpaces && !o.NoCleanSpaces {
		b = cleanSpaces(b)
	}
	return string(b)
}

// Written is what decoding with o writes for id in the middle of a text:
// its piece, or nothing for a control or unknown token that o does not
// render; before the space clean-up and the holding back of unfinished
// UTF-8 characters.
func (t *Tokenizer) Written(id ID, o DecodeOptions) string {
	return t.pieceFor(id, o.RenderSpecial || slices.Contains(o.Render, id))
}

// Piece returns the text token id stands for, special tokens rendered: the
// piece with ▁ written as a space (SPM, WordPiece), the bytes of a byte-level
// BPE token or of a <0xNN> byte token. A piece may be part of a UTF-8
// sequence. An id outside the vocabulary gives "".
func (t *Tokenizer) Piece(id ID) string {
	if id < 0 || int(id) >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// pieceFor is Piece, with control and unknown tokens rendered only if render.
func (t *Tokenizer) pieceFor(id ID, render bool) string {
	if id < 0 || int(id) >= len(t.pieces) {
		return ""
	}
	if !render && t.attrs[id]&(attrControl|attrUnknown) != 0 {
		return ""
	}
	return t.pieces[id]
}

// piece computes what token id decodes to, as llama.cpp's token_to_piece
// with special tokens rendered.
func (t *Tokenizer) piece(id ID) string {
	a, text := t.attrs[id], t.vocab.Tokens[id]
	switch {
	case a&(attrUnknown|attrControl|attrUserDefined) != 0:
		return text
	case a&attrNormal != 0:
		if t.kind == kindBPE && !t.escapeSpaces {
			return string(bpeTokenBytes(text))
		}
		return strings.ReplaceAll(text, spaceMark, " ")
	case a&attrByte != 0:
		if b, ok := parseByteToken(text); ok {
			return string([]byte{b})
		}
		return text
	}
	return "" // unused and undefined tokens decode to nothing
}

// parseByteToken reads the byte of a "<0xNN>" token.
func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexDigit(s[3])
	lo, ok2 := hexDigit(s[4])
	return hi<<4 | lo, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// cleanSpaces is HF's clean_up_tokenization as llama.cpp applies it, in three
// passes over the bytes: drop the space before ? ! . ,; turn " ' " into "'";
// drop the space before 's 'm 're 've.
func cleanSpaces(b []byte) []byte {
	if len(b) < 2 {
		return b
	}
	out := make([]byte, 0, len(b))
	out = append(out, b[0])
	for i := 1; i < len(b); i++ {
		x := b[i]
		if b[i-1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') {
			out = out[:len(out)-1]
		}
		out = append(out, x)
	}

	b, out = out, make([]byte, 0, len(out))
	out = append(out, b[0])
	for i := 1; i < len(b); i++ {
		x := b[i]
		if x == '\'' && i+1 < len(b) && b[i-1] == ' ' && b[i+1] == ' ' {
			out = out[:len(out)-1]
			b[i+1] = 0 // llama.cpp blanks the following space in place, so it
			i++        // also no longer counts as a space for the next byte
		}
		out = append(out, x)
	}

	b, out = out, make([]byte, 0, len(out))
	out = append(out, b[0])
	for i := 1; i < len(b); i++ {
		x := b[i]
		if b[i-1] == ' ' && x == '\'' && i+1 < len(b) {
			x1 := b[i+1]
			if x1 == 's' || x1 == 'm' {
				out = out[:len(out)-1]
			} else if i+2 < len(b) {
				x2 := b[i+2]
				if (x1 == 'r' || x1 == 'v') && x2 == 'e' {
					out = out[:len(out)-1]
				}
			}
		}
		out = append(out, x)
	}
	return out
}

// Decoder turns ids into text one token at a time, for streaming. Its
// outputs concatenate to what DecodeWith gives for all the ids (with the same
// options), except that it never emits a broken UTF-8 sequence: bytes of an
// unfinished character are held back until the character is complete, and
// bytes that can never form one come out as U+FFFD.
type Decoder struct {
	t *Tokenizer
	o DecodeOptions

	started     bool
	removeSpace bool // strip one leading space from the next piece
	heldEOS     bool // an EOS dropped if it turns out to be the last id
	raw         []byte
	pending     []byte // bytes of an unfinished UTF-8 character
}

// NewDecoder returns a streaming decoder that decodes as Decode does: for
// whole texts. To stream generated tokens that continue a prompt, use
// NewDecoderWith(DecodeOptions{Continuation: true}), or the first generated
// word loses its leading space.
func (t *Tokenizer) NewDecoder() *Decoder { return t.NewDecoderWith(DecodeOptions{}) }

// NewDecoderWith returns a streaming decoder that decodes as DecodeWith with o.
func (t *Tokenizer) NewDecoderWith(o DecodeOptions) *Decoder {
	return &Decoder{t: t, o: o}
}

// Add decodes one more token and returns the text that became complete.
func (d *Decoder) Add(id ID) string {
	v := d.t.vocab
	if !d.started {
		d.started = true
		d.removeSpace = v.AddSpacePrefix && !d.o.Continuation
		if d.o.RemoveSpecial && v.AddBOS && id == v.BOS {
			d.removeSpace = false
			return ""
		}
	}
	var out []byte
	if d.heldEOS {
		// The held EOS was not the last token after all.
		d.heldEOS = false
		out = d.write(out, v.EOS)
	}
	if d.o.RemoveSpecial && v.AddEOS && id == v.EOS {
		d.heldEOS = true
	} else {
		out = d.write(out, id)
	}
	return d.emit(out, false)
}

// Flush returns the text still held back, with an unfinished UTF-8
// character written as U+FFFD, and drops an EOS held at the end.
func (d *Decoder) Flush() string {
	d.heldEOS = false
	var out []byte
	if len(d.raw) > 0 {
		out = cleanSpaces(d.raw)
		d.raw = d.raw[:0]
	}
	return d.emit(out, true)
}

// write adds the piece of id to out, through the space clean-up when the
// vocabulary wants it.
func (d *Decoder) write(out []byte, id ID) []byte {
	p := d.t.Written(id, d.o)
	if d.removeSpace && strings.HasPrefix(p, " ") {
		p = p[1:]
	}
	d.removeSpace = false
	if !d.t.vocab.CleanSpaces || d.o.NoCleanSpaces {
		return append(out, p...)
	}
	d.raw = append(d.raw, p...)
	if cut := cleanCut(d.raw); cut > 0 {
		out = append(out, cleanSpaces(d.raw[:cut])...)
		d.raw = append(d.raw[:0], d.raw[cut:]...)
	}
	return out
}

// cleanCut returns a position p at which cleanSpaces(b) equals
// cleanSpaces(b[:p]) followed by cleanSpaces(b[p:]), or 0. The clean-up only
// ever drops spaces next to an apostrophe or punctuation, looking at most
// three bytes ahead, so a cut after four bytes and before one byte that are
// neither spaces nor apostrophes is safe.
func cleanCut(b []byte) int {
	for p := len(b) - 1; p >= 4; p-- {
		ok := true
		for _, c := range b[p-4 : p+1] {
			if c == ' ' || c == '\'' {
				ok = false
				break
			}
		}
		if ok {
			return p
		}
	}
	return 0
}

// emit appends b to the held-back bytes and returns the longest prefix that
// ends on a character boundary (everything, if final), as valid UTF-8.
func (d *Decoder) emit(b []byte, final bool) string {
	d.pending = append(d.pending, b...)
	n := len(d.pending)
	if !final {
		n = completeUTF8(d.pending)
	}
	if n == 0 {
		return ""
	}
	s := strings.ToValidUTF8(string(d.pending[:n]), "\uFFFD")
	d.pending = append(d.pending[:0], d.pending[n:]...)
	return s
}

// completeUTF8 returns the length of b without a trailing unfinished (but so
// far valid) UTF-8 sequence.
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}
