package grammar

import (
	"slices"
	"strings"
)

// keyRules are what an object schema says of its property names besides
// naming them: propertyNames (Pydantic's dict[Literal[...], V] and dict
// keys with constraints) and patternProperties (dict[constr(pattern=...),
// V]).
type keyRules struct {
	c *schemaCompiler
	// names is the quoted keys propertyNames allows (nil: any), and
	// finite those keys when they are few (non-nil: no others).
	names  *Expr
	finite []string
	namesG *Grammar
	// patterns are patternProperties', in order.
	patterns []patternProp
}

// patternProp is one of patternProperties: its pattern as JSON schema
// reads it (found anywhere in a key), the keys written for it (quoted:
// those that match it and no other pattern, which would add its schema;
// nil: none), and the schema of the values.
type patternProp struct {
	search *fa
	key    *Expr
	schema any
	path   string
}

func (c *schemaCompiler) objectKeys(o *object, path string) (*keyRules, error) {
	k := &keyRules{c: c}
	if pn, ok := o.get("propertyNames"); ok {
		if err := k.readNames(pn, path+"/propertyNames"); err != nil {
			return nil, err
		}
	}
	pp, ok := o.get("patternProperties")
	if !ok {
		return k, nil
	}
	po, isObj := pp.(*object)
	if !isObj {
		return nil, schemaErr(path+"/patternProperties", "patternProperties must be an object")
	}
	lim := &faBuild{}
	for _, p := range po.keys {
		at := path + "/patternProperties/" + escapePointer(p)
		search, err := patternFA(p, true, lim)
		if err != nil {
			return nil, schemaErr(at, "%v", err)
		}
		k.patterns = append(k.patterns, patternProp{search: search, schema: po.vals[p], path: at})
	}
	for i := range k.patterns {
		keys := k.patterns[i].search
		for j, other := range k.patterns {
			if j == i || keys.empty() {
				continue
			}
			not, err := other.search.complement(lim)
			if err == nil {
				keys, err = intersect(keys, not, lim)
			}
			if err != nil {
				return nil, schemaErr(k.patterns[i].path, "%v", err)
			}
		}
		if !keys.empty() && k.patterns[i].schema != false {
			k.patterns[i].key = Seq(Lit(`"`), keys.expr(c.b.rules, c.ruleName, jsonCharExpr), Lit(`"`))
		}
	}
	return k, nil
}

// readNames reads propertyNames: a schema of the keys, as strings.
func (k *keyRules) readNames(s any, path string) error {
	c := k.c
	switch s {
	case true:
		return nil
	case false:
		k.finite = []string{}
		k.names = Alt()
		return nil
	}
	if vals, ok := c.finiteValues(s, 0); ok {
		k.finite = []string{}
		var alts []*Expr
		for _, v := range vals {
			if str, ok := v.(string); ok {
				k.finite = append(k.finite, str)
				alts = append(alts, Lit(quoteJSON(str)))
			}
		}
		k.names = Alt(alts...)
		return nil
	}
	o, ok := s.(*object)
	for depth := 0; ok && depth < maxNesting; depth++ {
		r, isRef := o.get("$ref")
		rs, _ := r.(string)
		if !isRef || len(constraining(o, "$ref")) > 0 || !strings.HasPrefix(rs, "#") {
			break
		}
		t, err := c.resolve(rs[1:])
		if err != nil {
			return schemaErr(path+"/$ref", "%v", err)
		}
		o, ok = t.(*object)
	}
	if !ok {
		return schemaErr(path, "propertyNames must be a schema")
	}
	if other := constraining(o, "type", "minLength", "maxLength", "pattern", "format"); len(other) > 0 {
		return schemaErr(path, "propertyNames with %s is not supported", strings.Join(other, ", "))
	}
	types, err := typesOf(o, path)
	if err != nil {
		return err
	}
	if len(types) > 0 && !slices.Contains(types, "string") {
		k.finite = []string{} // no key is of those types
		k.names = Alt()
		return nil
	}
	e, err := c.str(o, path)
	if err != nil {
		return err
	}
	k.names = e
	return nil
}

// allows reports whether propertyNames allows the key.
func (k *keyRules) allows(key string) bool {
	switch {
	case k.finite != nil:
		return slices.Contains(k.finite, key)
	case k.names == nil:
		return true
	}
	if k.namesG == nil {
		g, err := Compile(k.names, k.c.b.rules)
		if err != nil {
			return false
		}
		k.namesG = g
	}
	return k.namesG.matches(quoteJSON(key))
}

// check refuses a named property that a pattern of patternProperties
// matches too, with a schema of its own: the value would have to satisfy
// both.
func (k *keyRules) check(key, path string) error {
	for _, p := range k.patterns {
		if p.search.matches(key) && !trivial(p.schema) {
			return schemaErr(p.path, "the property %q is named and matches this pattern too, which is not supported", key)
		}
	}
	return nil
}

// trivial reports whether schema s allows every value.
func trivial(s any) bool {
	o, ok := s.(*object)
	return s == true || (ok && len(constraining(o)) == 0)
}

// mapMembers is the members of an object with no properties named, after
// the required ones (any, when hasReq): keys of propertyNames, or of
// patternProperties' patterns, with their values, from moreMin to moreMax
// of them (moreMax < 0: no limit). Keys that JSON schema counts once
// however often they are written (a key twice is one property) must be
// kept apart for a minimum above one: so they are, when propertyNames
// lists them, and otherwise such a minimum is refused.
func (c *schemaCompiler) mapMembers(keys *keyRules, addl any, req []string, moreMin, moreMax int, hasReq bool, path string) (*Expr, error) {
	sep := Seq(Ref(ruleWS), Lit(","), Ref(ruleWS))
	moreMax = min(moreMax, MaxRepeat)
	if moreMax >= 0 && moreMin > moreMax {
		return nil, schemaErr(path, "minProperties exceeds maxProperties")
	}
	var members []*Expr
	switch {
	case len(keys.patterns) > 0:
		if keys.names != nil {
			return nil, schemaErr(path, "propertyNames with patternProperties is not supported")
		}
		for _, p := range keys.patterns {
			if p.key == nil {
				continue
			}
			v, err := c.schema(p.schema, p.path)
			if err != nil {
				return nil, err
			}
			members = append(members, Seq(p.key, Ref(ruleWS), Lit(":"), Ref(ruleWS), c.newRule(v)))
		}
	case addl == false:
	case keys.finite != nil:
		v, err := c.schema(addl, path+"/additionalProperties")
		if err != nil {
			return nil, err
		}
		v = c.newRule(v)
		var items []*Expr
		for _, k := range keys.finite {
			if !slices.Contains(req, k) {
				items = append(items, c.newRule(Seq(Lit(quoteJSON(k)), Ref(ruleWS), Lit(":"), Ref(ruleWS), v)))
			}
		}
		if moreMin > len(items) {
			return nil, schemaErr(path, "minProperties needs more properties than propertyNames allows")
		}
		if len(items) <= maxAnyOrder {
			return c.anyOrder(items, moreMin, moreMax, sep, !hasReq), nil
		}
		return c.inOrder(items, moreMin, moreMax, sep, !hasReq, path)
	default:
		v, err := c.schema(addl, path+"/additionalProperties")
		if err != nil {
			return nil, err
		}
		key := keys.names
		if key == nil {
			key = Ref(ruleString)
		}
		members = append(members, Seq(key, Ref(ruleWS), Lit(":"), Ref(ruleWS), c.newRule(v)))
	}
	if len(members) == 0 || moreMax == 0 {
		if moreMin > 0 {
			return nil, schemaErr(path, "minProperties needs more properties than may be written")
		}
		return Empty(), nil
	}
	if moreMin > 1 || (moreMin == 1 && hasReq) {
		return nil, schemaErr(path+"/minProperties", "minProperties above the required properties is supported only for keys propertyNames lists, or a single free key")
	}
	m := c.newRule(Alt(members...))
	if hasReq {
		return Repeat(Seq(sep, m), moreMin, moreMax), nil
	}
	e := Seq(m, Repeat(Seq(sep, m), 0, dec(moreMax)))
	if moreMin == 0 {
		return Opt(e), nil
	}
	return e, nil
}
