package toolcall

import (
	"encoding/json"
	"strings"
)

// scannedCall is what scanning a call's object found, as far as the text
// went.
type scannedCall struct {
	bad      bool // the text is not a call
	complete bool // the whole object (or the named form's arguments) is there
	end      int  // after the object, when complete
	name     string
	nameDone bool
	// The arguments' value: where it starts (-1: not yet, or absent) and
	// ends (-1: not yet), and whether it is a JSON string.
	argsStart, argsEnd int
	argsString         bool
}

// maxDepth bounds the nesting scanValue follows.
const maxDepth = 128

// scanCall scans the object at pos for the name ("name", or Command R7B's
// "tool_name") and the first of argKeys.
func scanCall(buf string, pos int, argKeys []string) scannedCall {
	c := scannedCall{argsStart: -1, argsEnd: -1}
	if pos >= len(buf) {
		return c
	}
	if buf[pos] != '{' {
		c.bad = true
		return c
	}
	i := skipWS(buf, pos+1)
	if i < len(buf) && buf[i] == '}' {
		c.complete, c.end = true, i+1
		c.bad = true // an empty object names no tool
		return c
	}
	for {
		if i >= len(buf) {
			return c
		}
		if buf[i] != '"' {
			c.bad = true
			return c
		}
		kend, ok, complete := scanString(buf, i)
		if !ok {
			c.bad = true
			return c
		}
		if !complete {
			return c
		}
		var key string
		json.Unmarshal([]byte(buf[i:kend]), &key)
		i = skipWS(buf, kend)
		if i >= len(buf) {
			return c
		}
		if buf[i] != ':' {
			c.bad = true
			return c
		}
		i = skipWS(buf, i+1)
		if i >= len(buf) {
			return c
		}
		vstart := i
		isArgs := c.argsStart < 0 && contains(argKeys, key)
		if isArgs {
			c.argsStart, c.argsString = vstart, buf[vstart] == '"'
		}
		vend, ok, complete := scanValue(buf, vstart, 0)
		if !ok {
			c.bad = true
			return c
		}
		if !complete {
			return c
		}
		if isArgs {
			c.argsEnd = vend
		}
		if key == "name" || key == "tool_name" {
			if json.Unmarshal([]byte(buf[vstart:vend]), &c.name) != nil {
				c.bad = true
				return c
			}
			c.nameDone = true
		}
		i = skipWS(buf, vend)
		if i >= len(buf) {
			return c
		}
		switch buf[i] {
		case ',':
			i = skipWS(buf, i+1)
		case '}':
			c.complete, c.end = true, i+1
			if !c.nameDone {
				c.bad = true
			}
			return c
		default:
			c.bad = true
			return c
		}
	}
}

// scanNamedArgs scans Mistral's later form, name[ARGS]{...}.
func scanNamedArgs(buf string, pos int) scannedCall {
	c := scannedCall{argsStart: -1, argsEnd: -1}
	i := strings.Index(buf[pos:], "[ARGS]")
	if i < 0 {
		if strings.ContainsAny(buf[pos:], "{}[]\" \n") && holdBack(buf[pos:], "[ARGS]") == 0 {
			c.bad = true
		}
		return c
	}
	c.name, c.nameDone = strings.TrimSpace(buf[pos:pos+i]), true
	if !toolNameOK(c.name) {
		c.bad = true
		return c
	}
	a := skipWS(buf, pos+i+len("[ARGS]"))
	if a >= len(buf) {
		return c
	}
	c.argsStart, c.argsString = a, buf[a] == '"'
	end, ok, complete := scanValue(buf, a, 0)
	if !ok {
		c.bad = true
		return c
	}
	if complete {
		c.argsEnd, c.complete, c.end = end, true, end
	}
	return c
}

func toolNameOK(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// scanValue scans the JSON value at buf[i] and returns where it ends,
// whether the text so far is a valid start of one, and whether it is
// whole.
func scanValue(buf string, i, depth int) (end int, ok, complete bool) {
	if depth > maxDepth {
		return i, false, false
	}
	if i >= len(buf) {
		return i, true, false
	}
	switch c := buf[i]; {
	case c == '"':
		return scanString(buf, i)
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		j := skipWS(buf, i+1)
		if j < len(buf) && buf[j] == closer {
			return j + 1, true, true
		}
		for {
			if j >= len(buf) {
				return j, true, false
			}
			if c == '{' {
				if buf[j] != '"' {
					return j, false, false
				}
				k, ok, complete := scanString(buf, j)
				if !ok || !complete {
					return k, ok, false
				}
				j = skipWS(buf, k)
				if j >= len(buf) {
					return j, true, false
				}
				if buf[j] != ':' {
					return j, false, false
				}
				j = skipWS(buf, j+1)
			}
			k, ok, complete := scanValue(buf, j, depth+1)
			if !ok || !complete {
				return k, ok, false
			}
			j = skipWS(buf, k)
			if j >= len(buf) {
				return j, true, false
			}
			switch buf[j] {
			case ',':
				j = skipWS(buf, j+1)
			case closer:
				return j + 1, true, true
			default:
				return j, false, false
			}
		}
	case c == '-' || c >= '0' && c <= '9':
		j := i + 1
		for j < len(buf) && strings.IndexByte("0123456789.eE+-", buf[j]) >= 0 {
			j++
		}
		// A number ends only where something else begins.
		return j, true, j < len(buf)
	default:
		for _, lit := range []string{"true", "false", "null"} {
			switch expect(buf, i, lit) {
			case match:
				return i + len(lit), true, true
			case more:
				return len(buf), true, false
			}
		}
		return i, false, false
	}
}

// scanString scans the JSON string at buf[i] (a quote).
func scanString(buf string, i int) (end int, ok, complete bool) {
	for j := i + 1; j < len(buf); j++ {
		switch c := buf[j]; {
		case c == '\\':
			j++
		case c == '"':
			return j + 1, true, true
		case c < 0x20:
			return j, false, false
		}
	}
	return len(buf), true, false
}
