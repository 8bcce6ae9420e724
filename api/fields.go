package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// fields are the members of a JSON request object, read one by one so that
// a wrong type is reported with the name of its field. A member whose value
// is null counts as absent, as OpenAI treats it.
type fields struct {
	m    map[string]json.RawMessage
	used map[string]bool
	// prefix names the object inside the request ("messages[2]."), for
	// error params.
	prefix string
}

// readObject reads the request body, which must be one JSON object. A body
// declared as anything but JSON is refused with 415 before it is read: a
// form or plain text is not parsed as if it were JSON. The body has already
// been limited by the middleware; hitting the limit is a 413.
func readObject(r *http.Request) (*fields, *apiError) {
	if err := jsonContentType(r.Header.Get("Content-Type")); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: codeTooLarge,
				Message: "request body is larger than the limit of " + strconv.FormatInt(tooBig.Limit, 10) + " bytes"}
		}
		return nil, invalid("", codeInvalidJSON, "reading the request body: %v", err)
	}
	return parseObject(body, "")
}

// jsonContentType accepts a JSON media type (application/json, or any
// application/*+json) with any parameters, and no Content-Type at all, which
// many clients leave out; anything else is a 415.
func jsonContentType(ct string) *apiError {
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))) {
		return nil
	}
	return &apiError{Status: http.StatusUnsupportedMediaType, Type: typeInvalidRequest, Code: codeMediaType,
		Message: "the request body must be JSON (Content-Type: application/json), not " + quote(ct)}
}

// parseObject decodes one JSON object from b.
func parseObject(b []byte, prefix string) (*fields, *apiError) {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 {
		return nil, invalid("", codeInvalidJSON, "the request body is empty; a JSON object is expected")
	}
	if trimmed[0] != '{' {
		return nil, invalid("", codeInvalidJSON, "the request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil {
		return nil, invalid("", codeInvalidJSON, "malformed JSON in the request body: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalid("", codeInvalidJSON, "malformed JSON in the request body: data after the object")
	}
	return newFields(m, prefix), nil
}

func newFields(m map[string]json.RawMessage, prefix string) *fields {
	for k, v := range m {
		if isNull(v) {
			delete(m, k)
		}
	}
	return &fields{m: m, used: make(map[string]bool, len(m)), prefix: prefix}
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// raw returns the member name, marking it as understood.
func (f *fields) raw(name string) (json.RawMessage, bool) {
	f.used[name] = true
	v, ok := f.m[name]
	return v, ok
}

// has reports whether name is present and not null.
func (f *fields) has(name string) bool {
	_, ok := f.m[name]
	return ok
}

func (f *fields) param(name string) string { return f.prefix + name }

func (f *fields) typeError(name, want string) *apiError {
	return invalid(f.param(name), codeInvalidType, "%s must be %s", f.param(name), want)
}

// str reads a string member.
func (f *fields) str(name string) (string, bool, *apiError) {
	v, ok := f.raw(name)
	if !ok {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false, f.typeError(name, "a string")
	}
	return s, true, nil
}

// boolean reads a boolean member.
func (f *fields) boolean(name string) (bool, bool, *apiError) {
	v, ok := f.raw(name)
	if !ok {
		return false, false, nil
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return false, false, f.typeError(name, "a boolean")
	}
	return b, true, nil
}

// number reads a finite number member.
func (f *fields) number(name string) (float64, bool, *apiError) {
	v, ok := f.raw(name)
	if !ok {
		return 0, false, nil
	}
	x, ok := parseNumber(v)
	if !ok {
		return 0, false, f.typeError(name, "a number")
	}
	return x, true, nil
}

func parseNumber(v json.RawMessage) (float64, bool) {
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

// integer reads an integer member; 3.0 is accepted as 3, 3.5 is not.
func (f *fields) integer(name string) (int64, bool, *apiError) {
	v, ok := f.raw(name)
	if !ok {
		return 0, false, nil
	}
	n, ok := parseInteger(v)
	if !ok {
		return 0, false, f.typeError(name, "an integer")
	}
	return n, true, nil
}

func parseInteger(v json.RawMessage) (int64, bool) {
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

// object reads a member that is a JSON object.
func (f *fields) object(name string) (*fields, bool, *apiError) {
	v, ok := f.raw(name)
	if !ok {
		return nil, false, nil
	}
	var m map[string]json.RawMessage
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '{' || json.Unmarshal(v, &m) != nil {
		return nil, false, f.typeError(name, "an object")
	}
	return newFields(m, f.param(name)+"."), true, nil
}

// array reads a member that is a JSON array.
func (f *fields) array(name string) ([]json.RawMessage, bool, *apiError) {
	v, ok := f.raw(name)
	if !ok {
		return nil, false, nil
	}
	a, ok := parseArray(v)
	if !ok {
		return nil, false, f.typeError(name, "an array")
	}
	return a, true, nil
}

func parseArray(v json.RawMessage) ([]json.RawMessage, bool) {
	var a []json.RawMessage
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '[' || json.Unmarshal(v, &a) != nil {
		return nil, false
	}
	return a, true
}

// unknown reports the first member nobody read (in sorted order, so the
// error is the same every time), ignoring the names in ignorable: OpenAI
// rejects unrecognised arguments, and silently ignoring one could change
// what the client gets.
func (f *fields) unknown(ignorable ...string) *apiError {
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
	return invalid(f.param(names[0]), codeUnknownParam, "unrecognized request argument supplied: %s", f.param(names[0]))
}

// quote is a short, printable rendering of a client's value for messages.
func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(strings.ToValidUTF8(s, "\uFFFD"))
}
