package jsonhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/ruvllm/ruvllm/session"
)

// Error codes of reading a request body.
const (
	CodeTooLarge  = "request_too_large"
	CodeMediaType = "unsupported_media_type"
)

// Fields are the members of a JSON request object, read one by one so that
// a wrong type is reported with the name of its field. A member whose value
// is null counts as absent, as OpenAI treats it.
type Fields struct {
	m    map[string]json.RawMessage
	used map[string]bool
	// prefix names the object inside the request ("messages[2]."), for
	// error params.
	prefix string
}

// Read reads the request body, which must be one JSON object. A body
// declared as JSON (application/json, any application/*+json), or with no
// Content-Type, is read as JSON; so is a body sent as
// application/x-www-form-urlencoded that parses as a JSON object, which is
// what curl -d sends without -H (llama-server and ollama read it so too).
// Anything else is a 415. A body over the middleware's limit is a 413.
func Read(r *http.Request) (*Fields, error) {
	form, err := jsonContentType(r.Header.Get("Content-Type"))
	if err != nil {
		return nil, err
	}
	body, rerr := io.ReadAll(r.Body)
	if rerr != nil {
		var tooBig *http.MaxBytesError
		if errors.As(rerr, &tooBig) {
			return nil, TooLarge(tooBig.Limit)
		}
		if errors.Is(rerr, os.ErrDeadlineExceeded) {
			return nil, TimedOut()
		}
		return nil, session.Invalid("", session.CodeInvalidJSON, "reading the request body: %v", rerr)
	}
	if form {
		if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' || !json.Valid(t) {
			return nil, mediaType(r.Header.Get("Content-Type"))
		}
	}
	return Parse(body, "")
}

// CodeTimeout is the code of a body that did not arrive in time.
const CodeTimeout = "request_timeout"

// TimedOut is the 408 of a body that did not arrive in time: the client
// sent it too slowly, or stopped.
func TimedOut() *session.Error {
	return &session.Error{Status: http.StatusRequestTimeout, Type: session.TypeInvalidRequest, Code: CodeTimeout,
		Message: "the request body did not arrive in time"}
}

// TooLarge is the 413 of a body over limit bytes.
func TooLarge(limit int64) *session.Error {
	return &session.Error{Status: http.StatusRequestEntityTooLarge, Type: session.TypeInvalidRequest, Code: CodeTooLarge,
		Message: "request body is larger than the limit of " + strconv.FormatInt(limit, 10) + " bytes"}
}

// jsonContentType accepts a JSON media type with any parameters and no
// Content-Type at all, which many clients leave out; a form is accepted if
// its body turns out to be JSON (form is then true); anything else is a
// 415.
func jsonContentType(ct string) (form bool, err error) {
	if ct == "" {
		return false, nil
	}
	mt, _, perr := mime.ParseMediaType(ct)
	switch {
	case perr != nil:
	case mt == "application/json", strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"):
		return false, nil
	case mt == "application/x-www-form-urlencoded":
		return true, nil
	}
	return false, mediaType(ct)
}

func mediaType(ct string) *session.Error {
	return &session.Error{Status: http.StatusUnsupportedMediaType, Type: session.TypeInvalidRequest, Code: CodeMediaType,
		Message: "the request body must be JSON (Content-Type: application/json), not " + session.Quote(ct)}
}

// Parse decodes one JSON object from b; prefix names it inside the request
// for errors ("" for the body).
func Parse(b []byte, prefix string) (*Fields, error) {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 {
		return nil, session.Invalid("", session.CodeInvalidJSON, "the request body is empty; a JSON object is expected")
	}
	if trimmed[0] != '{' {
		return nil, session.Invalid("", session.CodeInvalidJSON, "the request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil {
		return nil, session.Invalid("", session.CodeInvalidJSON, "malformed JSON in the request body: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, session.Invalid("", session.CodeInvalidJSON, "malformed JSON in the request body: data after the object")
	}
	return newFields(m, prefix), nil
}

// ObjectOf reads v, the value of the request field p, as an object.
func ObjectOf(v json.RawMessage, p string) (*Fields, error) {
	var m map[string]json.RawMessage
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '{' || json.Unmarshal(v, &m) != nil {
		return nil, session.Invalid(p, session.CodeInvalidType, "%s must be an object", p)
	}
	return newFields(m, p+"."), nil
}

func newFields(m map[string]json.RawMessage, prefix string) *Fields {
	for k, v := range m {
		if IsNull(v) {
			delete(m, k)
		}
	}
	return &Fields{m: m, used: make(map[string]bool, len(m)), prefix: prefix}
}

// IsNull reports whether v is JSON's null.
func IsNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// Raw returns the member name, marking it as understood.
func (f *Fields) Raw(name string) (json.RawMessage, bool) {
	f.used[name] = true
	v, ok := f.m[name]
	return v, ok
}

// Peek returns the member name without marking it as understood.
func (f *Fields) Peek(name string) (json.RawMessage, bool) {
	v, ok := f.m[name]
	return v, ok
}

// Has reports whether name is present and not null.
func (f *Fields) Has(name string) bool {
	_, ok := f.m[name]
	return ok
}

// Len is the number of members that are not null.
func (f *Fields) Len() int { return len(f.m) }

// Names are the members' names, sorted.
func (f *Fields) Names() []string {
	names := make([]string, 0, len(f.m))
	for k := range f.m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// Param is the request field of member name, for errors
// ("messages[2].role").
func (f *Fields) Param(name string) string { return f.prefix + name }

// TypeError is the 400 of member name not being want ("a string").
func (f *Fields) TypeError(name, want string) *session.Error {
	return session.Invalid(f.Param(name), session.CodeInvalidType, "%s must be %s", f.Param(name), want)
}

// Str reads a string member.
func (f *Fields) Str(name string) (string, bool, error) {
	v, ok := f.Raw(name)
	if !ok {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false, f.TypeError(name, "a string")
	}
	return s, true, nil
}

// Bool reads a boolean member.
func (f *Fields) Bool(name string) (bool, bool, error) {
	v, ok := f.Raw(name)
	if !ok {
		return false, false, nil
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return false, false, f.TypeError(name, "a boolean")
	}
	return b, true, nil
}

// Number reads a finite number member.
func (f *Fields) Number(name string) (float64, bool, error) {
	v, ok := f.Raw(name)
	if !ok {
		return 0, false, nil
	}
	x, ok := ParseNumber(v)
	if !ok {
		return 0, false, f.TypeError(name, "a number")
	}
	return x, true, nil
}

// ParseNumber reads a finite JSON number (not a quoted one).
func ParseNumber(v json.RawMessage) (float64, bool) {
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil || !isJSONNumber(v) {
		return 0, false
	}
	x, err := n.Float64()
	if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
		return 0, false
	}
	return x, true
}

// isJSONNumber rejects the quoted numbers json.Number would accept.
func isJSONNumber(v json.RawMessage) bool {
	t := bytes.TrimSpace(v)
	return len(t) > 0 && (t[0] == '-' || (t[0] >= '0' && t[0] <= '9'))
}

// Integer reads an integer member; 3.0 is accepted as 3, 3.5 is not.
func (f *Fields) Integer(name string) (int64, bool, error) {
	v, ok := f.Raw(name)
	if !ok {
		return 0, false, nil
	}
	n, ok := ParseInteger(v)
	if !ok {
		return 0, false, f.TypeError(name, "an integer")
	}
	return n, true, nil
}

// ParseInteger reads a JSON integer; a whole float (3.0) is one.
func ParseInteger(v json.RawMessage) (int64, bool) {
	if !isJSONNumber(v) {
		return 0, false
	}
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil {
		return 0, false
	}
	if i, err := n.Int64(); err == nil {
		return i, true
	}
	x, err := n.Float64()
	if err != nil || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		return 0, false
	}
	return int64(x), true
}

// Object reads a member that is a JSON object.
func (f *Fields) Object(name string) (*Fields, bool, error) {
	v, ok := f.Raw(name)
	if !ok {
		return nil, false, nil
	}
	var m map[string]json.RawMessage
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '{' || json.Unmarshal(v, &m) != nil {
		return nil, false, f.TypeError(name, "an object")
	}
	return newFields(m, f.Param(name)+"."), true, nil
}

// Array reads a member that is a JSON array.
func (f *Fields) Array(name string) ([]json.RawMessage, bool, error) {
	v, ok := f.Raw(name)
	if !ok {
		return nil, false, nil
	}
	a, ok := ParseArray(v)
	if !ok {
		return nil, false, f.TypeError(name, "an array")
	}
	return a, true, nil
}

// ParseArray reads a JSON array.
func ParseArray(v json.RawMessage) ([]json.RawMessage, bool) {
	var a []json.RawMessage
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '[' || json.Unmarshal(v, &a) != nil {
		return nil, false
	}
	return a, true
}

// Strings reads a member that is a string or an array of strings.
func (f *Fields) Strings(name string) ([]string, bool, error) {
	v, ok := f.Raw(name)
	if !ok {
		return nil, false, nil
	}
	var one string
	if json.Unmarshal(v, &one) == nil {
		return []string{one}, true, nil
	}
	a, ok := ParseArray(v)
	if !ok {
		return nil, false, f.TypeError(name, "a string or an array of strings")
	}
	out := make([]string, len(a))
	for i, e := range a {
		if err := json.Unmarshal(e, &out[i]); err != nil {
			p := f.Param(name) + "[" + strconv.Itoa(i) + "]"
			return nil, false, session.Invalid(p, session.CodeInvalidType, "%s must be a string", p)
		}
	}
	return out, true, nil
}

// Ignore marks members as understood without reading them: fields a
// protocol accepts and that change nothing here.
func (f *Fields) Ignore(names ...string) {
	for _, n := range names {
		f.used[n] = true
	}
}

// Unknown reports the first member nobody read (in sorted order, so the
// error is the same every time), ignoring the names in ignorable: OpenAI
// rejects unrecognised arguments, and silently ignoring one could change
// what the client gets.
func (f *Fields) Unknown(ignorable ...string) error {
	var names []string
	for k := range f.m {
		if !f.used[k] && !slices.Contains(ignorable, k) {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	return session.Invalid(f.Param(names[0]), session.CodeUnknownParam, "unrecognized request argument supplied: %s", f.Param(names[0]))
}

// EachObject reads member name as an array of at most max objects and
// calls each with every one: its index, its field name ("tools[2]"), its
// members and its raw JSON. It reports whether the member is there.
func (f *Fields) EachObject(name string, max int, each func(i int, p string, o *Fields, raw json.RawMessage) error) (bool, error) {
	raw, ok, err := f.Array(name)
	if err != nil || !ok {
		return ok, err
	}
	if len(raw) > max {
		return true, session.Invalid(f.Param(name), session.CodeInvalidValue, "%s holds %d items; at most %d are allowed", f.Param(name), len(raw), max)
	}
	for i, r := range raw {
		p := f.Param(name) + "[" + strconv.Itoa(i) + "]"
		o, err := ObjectOf(r, p)
		if err != nil {
			return true, err
		}
		if err := each(i, p, o, r); err != nil {
			return true, err
		}
	}
	return true, nil
}
