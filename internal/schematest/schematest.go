// Package schematest is the tests' JSON-schema validator: a well-kept one
// (santhosh-tekuri/jsonschema, which passes the official JSON-Schema test
// suite), so that constrained outputs are checked against outside truth
// rather than against the compiler that produced them. Tests only.
package schematest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Compile compiles schema (JSON text) with format assertions on, failing
// the test if the validator refuses it.
func Compile(tb testing.TB, schema string) *jsonschema.Schema {
	tb.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		tb.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		tb.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		tb.Fatalf("the validator refuses the schema: %v", err)
	}
	return s
}

// Check fails the test unless out is exactly one JSON value valid under s.
func Check(tb testing.TB, s *jsonschema.Schema, out string) {
	tb.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		tb.Fatalf("%q is not one JSON value: %v", out, err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Validate(inst); err != nil {
		tb.Fatalf("%q is not valid: %v", out, err)
	}
}
