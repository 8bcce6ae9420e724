package chat

import (
	"fmt"
	"slices"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// bindArgs binds positional and keyword arguments to parameter names as a
// Python call would. An argument not given is nil in the result.
func bindArgs(fn string, params *exec.VarArgs, names ...string) ([]*exec.Value, error) {
	out := make([]*exec.Value, len(names))
	if params == nil {
		return out, nil
	}
	if len(params.Args) > len(names) {
		return nil, fmt.Errorf("%s() takes at most %d arguments (%d given)", fn, len(names), len(params.Args))
	}
	copy(out, params.Args)
	for k, v := range params.KwArgs {
		i := slices.Index(names, k)
		if i < 0 {
			return nil, fmt.Errorf("%s() got an unexpected keyword argument '%s'", fn, k)
		}
		if out[i] != nil {
			return nil, fmt.Errorf("%s() got multiple values for argument '%s'", fn, k)
		}
		out[i] = v
	}
	return out, nil
}

// given reports whether an optional argument was passed.
func given(v *exec.Value) bool { return v != nil }

// optString reads an optional string argument; None counts as not given.
func optString(fn, name string, v *exec.Value) (*string, error) {
	if v == nil || kindOf(v) == kindNone {
		return nil, nil
	}
	if kindOf(v) != kindString {
		return nil, fmt.Errorf("%s(): %s must be str or None, not %s", fn, name, typeName(v))
	}
	s := v.String()
	return &s, nil
}

// optInt reads an optional integer argument; None counts as not given.
func optInt(fn, name string, v *exec.Value) (*int, error) {
	if v == nil || kindOf(v) == kindNone {
		return nil, nil
	}
	switch kindOf(v) {
	case kindInt:
		n := int(resolvedInt(v))
		return &n, nil
	case kindBool:
		n := int(toFloat(v))
		return &n, nil
	}
	return nil, fmt.Errorf("%s(): %s must be an integer, not %s", fn, name, typeName(v))
}

// intOr reads an integer argument with a default.
func intOr(fn, name string, v *exec.Value, def int) (int, error) {
	n, err := optInt(fn, name, v)
	if err != nil || n == nil {
		return def, err
	}
	return *n, nil
}

// errValue turns an error into the value gonja propagates as a failure.
func errValue(err error) *exec.Value { return exec.AsValue(err) }

// errorf is errValue(fmt.Errorf(...)).
func errorf(format string, args ...any) *exec.Value {
	return exec.AsValue(fmt.Errorf(format, args...))
}
