package chat

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// methods are the Python methods templates call on values. The sandbox
// transformers uses is immutable, so the methods that change a list or dict
// (append, update, pop, ...) are refused as Python refuses them.
var methods = exec.Methods{
	Str:   exec.NewMethodSet(strMethods),
	Dict:  exec.NewMethodSet(dictMethods),
	List:  exec.NewMethodSet(listMethods),
	Bool:  exec.NewMethodSet(map[string]exec.Method[bool]{}),
	Int:   exec.NewMethodSet(map[string]exec.Method[int]{}),
	Float: exec.NewMethodSet(map[string]exec.Method[float64]{}),
}

type strMethod = exec.Method[string]

// strArgs binds a str method's arguments.
func strArgs(name string, args *exec.VarArgs, names ...string) ([]*exec.Value, error) {
	return bindArgs("str."+name, args, names...)
}

func stripMethod(name string, left, right bool) strMethod {
	return func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		a, err := strArgs(name, args, "chars")
		if err != nil {
			return nil, err
		}
		chars, err := optString(name, "chars", a[0])
		if err != nil {
			return nil, err
		}
		return pyStrip(s, chars, left, right), nil
	}
}

func splitMethod(name string, split func(string, *string, int) ([]string, error)) strMethod {
	return func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		a, err := strArgs(name, args, "sep", "maxsplit")
		if err != nil {
			return nil, err
		}
		sep, err := optString(name, "sep", a[0])
		if err != nil {
			return nil, err
		}
		maxsplit, err := intOr(name, "maxsplit", a[1], -1)
		if err != nil {
			return nil, err
		}
		parts, err := split(s, sep, maxsplit)
		if err != nil {
			return nil, err
		}
		return stringsToList(parts), nil
	}
}

func stringsToList(parts []string) pyList {
	out := make(pyList, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out
}

func caseMethod(name string, f func(string) string) strMethod {
	return func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		if _, err := strArgs(name, args); err != nil {
			return nil, err
		}
		return f(s), nil
	}
}

func predicateMethod(name string) strMethod {
	return func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		if _, err := strArgs(name, args); err != nil {
			return nil, err
		}
		return stringPredicate(s, name), nil
	}
}

// affixMethod is startswith / endswith, whose first argument may be a
// tuple of alternatives.
func affixMethod(name string, suffix bool) strMethod {
	return func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		a, err := strArgs(name, args, "prefix", "start", "end")
		if err != nil {
			return nil, err
		}
		if a[0] == nil {
			return nil, fmt.Errorf("%s() takes at least 1 argument (0 given)", name)
		}
		start, err := optInt(name, "start", a[1])
		if err != nil {
			return nil, err
		}
		end, err := optInt(name, "end", a[2])
		if err != nil {
			return nil, err
		}
		var options []*exec.Value
		switch kindOf(a[0]) {
		case kindString:
			options = []*exec.Value{a[0]}
		case kindList:
			options = listItems(a[0])
		default:
			return nil, fmt.Errorf("%s first arg must be str or a tuple of str, not %s", name, typeName(a[0]))
		}
		for _, o := range options {
			if kindOf(o) != kindString {
				return nil, fmt.Errorf("tuple for %s must only contain str, not %s", name, typeName(o))
			}
			if pyAffix(s, o.String(), start, end, suffix) {
				return true, nil
			}
		}
		return false, nil
	}
}

func findMethod(name string, last, mustFind bool) strMethod {
	return func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		a, err := strArgs(name, args, "sub", "start", "end")
		if err != nil {
			return nil, err
		}
		if a[0] == nil || kindOf(a[0]) != kindString {
			return nil, fmt.Errorf("%s() needs a str argument", name)
		}
		start, err := optInt(name, "start", a[1])
		if err != nil {
			return nil, err
		}
		end, err := optInt(name, "end", a[2])
		if err != nil {
			return nil, err
		}
		i := pyFind(s, a[0].String(), start, end, last)
		if i < 0 && mustFind {
			return nil, fmt.Errorf("substring not found")
		}
		return i, nil
	}
}

func padMethod(name string, how byte) strMethod {
	return func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		a, err := strArgs(name, args, "width", "fillchar")
		if err != nil {
			return nil, err
		}
		w, err := optInt(name, "width", a[0])
		if err != nil || w == nil {
			return nil, fmt.Errorf("%s() needs an integer width", name)
		}
		fill := ' '
		if a[1] != nil {
			f := pyStr(a[1])
			if utf8.RuneCountInString(f) != 1 {
				return nil, errors.New("TypeError: The fill character must be exactly one character long")
			}
			fill, _ = utf8.DecodeRuneInString(f)
		}
		return pyPad(s, *w, fill, how), nil
	}
}

func partitionMethod(name string, last bool) strMethod {
	return func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		a, err := strArgs(name, args, "sep")
		if err != nil {
			return nil, err
		}
		if a[0] == nil || kindOf(a[0]) != kindString || a[0].String() == "" {
			return nil, fmt.Errorf("%s() needs a non-empty str separator", name)
		}
		sep := a[0].String()
		i := strings.Index(s, sep)
		if last {
			i = strings.LastIndex(s, sep)
		}
		if i < 0 {
			if last {
				return pyTuple{"", "", s}, nil
			}
			return pyTuple{s, "", ""}, nil
		}
		return pyTuple{s[:i], sep, s[i+len(sep):]}, nil
	}
}

var strMethods = map[string]strMethod{
	"strip":       stripMethod("strip", true, true),
	"lstrip":      stripMethod("lstrip", true, false),
	"rstrip":      stripMethod("rstrip", false, true),
	"split":       splitMethod("split", pySplit),
	"rsplit":      splitMethod("rsplit", pyRSplit),
	"lower":       caseMethod("lower", pyLower),
	"upper":       caseMethod("upper", pyUpper),
	"casefold":    caseMethod("casefold", pyCasefold),
	"title":       caseMethod("title", pyTitle),
	"capitalize":  caseMethod("capitalize", pyCapitalize),
	"swapcase":    caseMethod("swapcase", pySwapCase),
	"startswith":  affixMethod("startswith", false),
	"endswith":    affixMethod("endswith", true),
	"find":        findMethod("find", false, false),
	"rfind":       findMethod("rfind", true, false),
	"index":       findMethod("index", false, true),
	"rindex":      findMethod("rindex", true, true),
	"center":      padMethod("center", 'c'),
	"ljust":       padMethod("ljust", 'l'),
	"rjust":       padMethod("rjust", 'r'),
	"partition":   partitionMethod("partition", false),
	"rpartition":  partitionMethod("rpartition", true),
	"isalnum":     predicateMethod("isalnum"),
	"isalpha":     predicateMethod("isalpha"),
	"isascii":     predicateMethod("isascii"),
	"isdecimal":   predicateMethod("isdecimal"),
	"isdigit":     predicateMethod("isdigit"),
	"islower":     predicateMethod("islower"),
	"isnumeric":   predicateMethod("isnumeric"),
	"isprintable": predicateMethod("isprintable"),
	"isspace":     predicateMethod("isspace"),
	"istitle":     predicateMethod("istitle"),
	"isupper":     predicateMethod("isupper"),
	"replace": func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		a, err := strArgs("replace", args, "old", "new", "count")
		if err != nil {
			return nil, err
		}
		if a[0] == nil || a[1] == nil || kindOf(a[0]) != kindString || kindOf(a[1]) != kindString {
			return nil, fmt.Errorf("replace() needs two str arguments")
		}
		count, err := intOr("replace", "count", a[2], -1)
		if err != nil {
			return nil, err
		}
		return strings.Replace(s, a[0].String(), a[1].String(), count), nil
	},
	"count": func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		a, err := strArgs("count", args, "sub", "start", "end")
		if err != nil {
			return nil, err
		}
		if a[0] == nil || kindOf(a[0]) != kindString {
			return nil, fmt.Errorf("count() needs a str argument")
		}
		start, err := optInt("count", "start", a[1])
		if err != nil {
			return nil, err
		}
		end, err := optInt("count", "end", a[2])
		if err != nil {
			return nil, err
		}
		return pyCount(s, a[0].String(), start, end), nil
	},
	"join": func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		a, err := strArgs("join", args, "iterable")
		if err != nil {
			return nil, err
		}
		if a[0] == nil {
			return nil, fmt.Errorf("join() takes exactly one argument (0 given)")
		}
		items, err := iterate(a[0])
		if err != nil {
			return nil, err
		}
		parts := make([]string, len(items))
		for i, e := range items {
			if kindOf(e) != kindString {
				return nil, fmt.Errorf("sequence item %d: expected str instance, %s found", i, typeName(e))
			}
			parts[i] = e.String()
		}
		return strings.Join(parts, s), nil
	},
	"splitlines": func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		a, err := strArgs("splitlines", args, "keepends")
		if err != nil {
			return nil, err
		}
		return stringsToList(pySplitLines(s, given(a[0]) && truthy(a[0]))), nil
	},
	"removeprefix": func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		a, err := strArgs("removeprefix", args, "prefix")
		if err != nil || a[0] == nil {
			return nil, fmt.Errorf("removeprefix() takes exactly one argument")
		}
		return strings.TrimPrefix(s, pyStr(a[0])), nil
	},
	"removesuffix": func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		a, err := strArgs("removesuffix", args, "suffix")
		if err != nil || a[0] == nil {
			return nil, fmt.Errorf("removesuffix() takes exactly one argument")
		}
		return strings.TrimSuffix(s, pyStr(a[0])), nil
	},
	"zfill": func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		a, err := strArgs("zfill", args, "width")
		if err != nil {
			return nil, err
		}
		w, err := optInt("zfill", "width", a[0])
		if err != nil || w == nil {
			return nil, fmt.Errorf("zfill() needs an integer width")
		}
		return pyZFill(s, *w), nil
	},
	"format": func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		return strFormat(s, args)
	},
}

type dictMethod = exec.Method[map[string]any]

// refused is how the immutable sandbox answers a method that would change
// its object.
func refused(typ, name string) error {
	return &securityError{fmt.Sprintf("access to attribute '%s' of '%s' object is unsafe.", name, typ)}
}

func refusedDict(name string) dictMethod {
	return func(map[string]any, *exec.Value, *exec.VarArgs) (any, error) { return nil, refused("dict", name) }
}

func refusedList(name string) listMethod {
	return func([]any, *exec.Value, *exec.VarArgs) (any, error) { return nil, refused("list", name) }
}

var dictMethods = map[string]dictMethod{
	"get": func(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
		a, err := bindArgs("dict.get", args, "key", "default")
		if err != nil {
			return nil, err
		}
		if a[0] == nil {
			return nil, fmt.Errorf("get expected at least 1 argument, got 0")
		}
		if v, ok := lookupKey(self, a[0]); ok {
			return v.Interface(), nil
		}
		if a[1] != nil {
			return a[1].Interface(), nil
		}
		return none, nil
	},
	"items": func(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
		if _, err := bindArgs("dict.items", args); err != nil {
			return nil, err
		}
		return dictItems(itemPairs(self)), nil
	},
	"keys": func(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
		if _, err := bindArgs("dict.keys", args); err != nil {
			return nil, err
		}
		pairs := dictPairs(self)
		out := make(dictKeys, len(pairs))
		for i, p := range pairs {
			out[i] = p.Key.Interface()
		}
		return out, nil
	},
	"values": func(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
		if _, err := bindArgs("dict.values", args); err != nil {
			return nil, err
		}
		pairs := dictPairs(self)
		out := make(dictValues, len(pairs))
		for i, p := range pairs {
			out[i] = p.Value.Interface()
		}
		return out, nil
	},
	"copy": func(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
		if _, err := bindArgs("dict.copy", args); err != nil {
			return nil, err
		}
		return &exec.Dict{Pairs: dictPairs(self)}, nil
	},
	"update":     refusedDict("update"),
	"pop":        refusedDict("pop"),
	"popitem":    refusedDict("popitem"),
	"setdefault": refusedDict("setdefault"),
	"clear":      refusedDict("clear"),
}

type listMethod = exec.Method[[]any]

var listMethods = map[string]listMethod{
	"index": func(_ []any, self *exec.Value, args *exec.VarArgs) (any, error) {
		a, err := bindArgs("list.index", args, "value")
		if err != nil || a[0] == nil {
			return nil, fmt.Errorf("index expected 1 argument")
		}
		for i, e := range listItems(self) {
			if pyEqual(e, a[0]) {
				return i, nil
			}
		}
		return nil, fmt.Errorf("%s is not in list", pyRepr(a[0]))
	},
	"count": func(_ []any, self *exec.Value, args *exec.VarArgs) (any, error) {
		a, err := bindArgs("list.count", args, "value")
		if err != nil || a[0] == nil {
			return nil, fmt.Errorf("count expected 1 argument")
		}
		n := 0
		for _, e := range listItems(self) {
			if pyEqual(e, a[0]) {
				n++
			}
		}
		return n, nil
	},
	"copy": func(_ []any, self *exec.Value, args *exec.VarArgs) (any, error) {
		if _, err := bindArgs("list.copy", args); err != nil {
			return nil, err
		}
		return valuesToList(listItems(self)), nil
	},
	"append":  refusedList("append"),
	"extend":  refusedList("extend"),
	"insert":  refusedList("insert"),
	"pop":     refusedList("pop"),
	"remove":  refusedList("remove"),
	"reverse": refusedList("reverse"),
	"sort":    refusedList("sort"),
	"clear":   refusedList("clear"),
}
