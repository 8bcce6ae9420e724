package gguf

import (
	"fmt"
	"math"
)

// ValueType is the type tag of a metadata value as GGUF numbers it.
type ValueType uint32

// The GGUF metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("ValueType(%d)", uint32(t))
}

// size is the encoded size of a scalar of type t, 0 for strings and arrays
// (variable) and -1 for an unknown type.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	case TypeString, TypeArray:
		return 0
	}
	return -1
}

// Value is one metadata value. Scalars hold the Go type of the same width
// (uint8 .. float64, bool, string); arrays hold a typed slice ([]uint8 ..
// []float64, []bool, []string) or, for arrays of arrays, []Value.
type Value struct {
	Type ValueType // TypeArray for arrays
	Elem ValueType // element type of an array
	v    any
}

// Any returns the Go value (see Value).
func (v Value) Any() any { return v.v }

// Uint returns an integer value that is not negative, whatever its width.
func (v Value) Uint() (uint64, bool) {
	switch x := v.v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	}
	if i, ok := v.Int(); ok && i >= 0 {
		return uint64(i), true
	}
	return 0, false
}

// Int returns an integer value that fits an int64, whatever its width.
func (v Value) Int() (int64, bool) {
	switch x := v.v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), true
		}
	}
	return 0, false
}

// Float returns a float or integer value as float64.
func (v Value) Float() (float64, bool) {
	switch x := v.v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	if i, ok := v.Int(); ok {
		return float64(i), true
	}
	return 0, false
}

// Bool returns a boolean value.
func (v Value) Bool() (bool, bool) { b, ok := v.v.(bool); return b, ok }

// Str returns a string value.
func (v Value) Str() (string, bool) { s, ok := v.v.(string); return s, ok }

// Strings returns an array of strings.
func (v Value) Strings() ([]string, bool) { s, ok := v.v.([]string); return s, ok }

// Float32s returns an array of float32 (as tokenizer scores are stored).
func (v Value) Float32s() ([]float32, bool) { s, ok := v.v.([]float32); return s, ok }

// Ints returns an integer array of any width as int64s (token types are i32,
// some files store per-layer head counts as u32 or i32 arrays).
func (v Value) Ints() ([]int64, bool) {
	switch x := v.v.(type) {
	case []int8:
		return widen(x), true
	case []uint8:
		return widen(x), true
	case []int16:
		return widen(x), true
	case []uint16:
		return widen(x), true
	case []int32:
		return widen(x), true
	case []uint32:
		return widen(x), true
	case []int64:
		return append([]int64(nil), x...), true
	case []uint64:
		out := make([]int64, len(x))
		for i, u := range x {
			if u > math.MaxInt64 {
				return nil, false
			}
			out[i] = int64(u)
		}
		return out, true
	}
	return nil, false
}

func widen[T int8 | uint8 | int16 | uint16 | int32 | uint32](x []T) []int64 {
	out := make([]int64, len(x))
	for i, e := range x {
		out[i] = int64(e)
	}
	return out
}

// Len is the number of elements of an array value, 0 for a scalar.
func (v Value) Len() int {
	if v.Type != TypeArray {
		return 0
	}
	switch x := v.v.(type) {
	case []uint8:
		return len(x)
	case []int8:
		return len(x)
	case []uint16:
		return len(x)
	case []int16:
		return len(x)
	case []uint32:
		return len(x)
	case []int32:
		return len(x)
	case []uint64:
		return len(x)
	case []int64:
		return len(x)
	case []float32:
		return len(x)
	case []float64:
		return len(x)
	case []bool:
		return len(x)
	case []string:
		return len(x)
	case []Value:
		return len(x)
	}
	return 0
}

// ValueOf makes a Value of a Go value for the writer: the scalar types of
// Value, a typed slice of them, or []Value for nested arrays. int is stored as
// i32 when it fits and i64 otherwise, as writers of llama.cpp's tools do.
func ValueOf(x any) (Value, error) {
	switch y := x.(type) {
	case Value:
		return y, nil
	case uint8:
		return Value{Type: TypeUint8, v: y}, nil
	case int8:
		return Value{Type: TypeInt8, v: y}, nil
	case uint16:
		return Value{Type: TypeUint16, v: y}, nil
	case int16:
		return Value{Type: TypeInt16, v: y}, nil
	case uint32:
		return Value{Type: TypeUint32, v: y}, nil
	case int32:
		return Value{Type: TypeInt32, v: y}, nil
	case uint64:
		return Value{Type: TypeUint64, v: y}, nil
	case int64:
		return Value{Type: TypeInt64, v: y}, nil
	case int:
		if y >= math.MinInt32 && y <= math.MaxInt32 {
			return Value{Type: TypeInt32, v: int32(y)}, nil
		}
		return Value{Type: TypeInt64, v: int64(y)}, nil
	case float32:
		return Value{Type: TypeFloat32, v: y}, nil
	case float64:
		return Value{Type: TypeFloat64, v: y}, nil
	case bool:
		return Value{Type: TypeBool, v: y}, nil
	case string:
		return Value{Type: TypeString, v: y}, nil
	case []uint8:
		return Value{Type: TypeArray, Elem: TypeUint8, v: y}, nil
	case []int8:
		return Value{Type: TypeArray, Elem: TypeInt8, v: y}, nil
	case []uint16:
		return Value{Type: TypeArray, Elem: TypeUint16, v: y}, nil
	case []int16:
		return Value{Type: TypeArray, Elem: TypeInt16, v: y}, nil
	case []uint32:
		return Value{Type: TypeArray, Elem: TypeUint32, v: y}, nil
	case []int32:
		return Value{Type: TypeArray, Elem: TypeInt32, v: y}, nil
	case []uint64:
		return Value{Type: TypeArray, Elem: TypeUint64, v: y}, nil
	case []int64:
		return Value{Type: TypeArray, Elem: TypeInt64, v: y}, nil
	case []float32:
		return Value{Type: TypeArray, Elem: TypeFloat32, v: y}, nil
	case []float64:
		return Value{Type: TypeArray, Elem: TypeFloat64, v: y}, nil
	case []bool:
		return Value{Type: TypeArray, Elem: TypeBool, v: y}, nil
	case []string:
		return Value{Type: TypeArray, Elem: TypeString, v: y}, nil
	case []Value:
		return Value{Type: TypeArray, Elem: TypeArray, v: y}, nil
	}
	return Value{}, fmt.Errorf("gguf: no metadata type for Go type %T", x)
}
