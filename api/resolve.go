package api

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// codeAmbiguousModel is the code of a model name that more than one served
// model could answer to.
const codeAmbiguousModel = "ambiguous_model"

// modelSet is the models a Server serves, in the order they were added;
// the first is the default. A published set is never changed (AddModel
// publishes a new one), so requests read it without a lock.
type modelSet struct {
	list []*Model
	byID map[string]*Model
}

// AddModel serves m from now on, beside the models already served; the
// first model added is the default, which requests without a model get.
// The server is ready once it serves one model. An ID already served is
// refused: requests could not tell the two apart.
func (s *Server) AddModel(m *Model) error {
	if m == nil || m.ID == "" || m.Tokenizer == nil || (m.Engine == nil) == (m.Load == nil) {
		return errors.New("api: a model needs an ID, a tokenizer, and an engine or a loader (one of them)")
	}
	if m.ID == s.routerName() {
		return fmt.Errorf("api: the model name %q is the router's", m.ID)
	}
	if m.vocabs == nil {
		m.vocabs = &vocabCache{}
	}
	m.tools = detectToolStyle(m.Chat)
	s.addMu.Lock()
	defer s.addMu.Unlock()
	old := s.models.Load()
	if _, dup := old.byID[m.ID]; dup {
		return fmt.Errorf("api: a model named %q is already served", m.ID)
	}
	if m.Created.IsZero() {
		m.Created = time.Now()
	}
	if err := s.metrics.addModel(m); err != nil {
		return err
	}
	if s.opt.Router != nil {
		// Its weights laid out now rather than in the first request's
		// decision; an arm beyond sona.MaxArms is left to that decision.
		_ = s.opt.Router.Register(m.ID)
	}
	if m.Load != nil {
		s.residency.add(m)
	}
	next := &modelSet{list: append(slices.Clip(old.list), m), byID: maps.Clone(old.byID)}
	if next.byID == nil {
		next.byID = map[string]*Model{}
	}
	next.byID[m.ID] = m
	s.models.Store(next)
	return nil
}

// Ready reports whether at least one model is served.
func (s *Server) Ready() bool { return len(s.models.Load().list) > 0 }

// SetStarting marks the models the server starts with as loading (true) or
// loaded (false). Until they are loaded /health answers 503, as
// llama-server's does while it loads, so that a load balancer or a
// readiness probe sends nothing that would wait for the load; requests
// that come anyway wait for it.
func (s *Server) SetStarting(v bool) { s.starting.Store(v) }

// healthy reports whether a model is served and the models the server
// starts with are loaded.
func (s *Server) healthy() bool { return s.Ready() && !s.starting.Load() }

// target is what a request's "model" names: a served model, and one of
// its adapters or none.
type target struct {
	model *Model
	// adapter is the adapter's name in model.Adapters; "" for the model
	// itself.
	adapter string
	// name is the model as the request spelled it; responses repeat it
	// for an adapter.
	name string
	// route is the router's decision when the request named the router;
	// nil otherwise.
	route *routing
}

// resolveModel is where a request's "model" becomes what serves it, before
// anything of the request is templated or tokenized, since the model
// decides both. It is the one place names are looked up, so that models
// loaded on demand and a router's "auto" have one place to hook in.
//
// "" is the default model; a served model's ID is that model, even when an
// adapter has the same name; "ID:ADAPTER" is that model's adapter;
// "ADAPTER" alone is looked for among every model's adapters and must
// belong to one model only.
func (s *Server) resolveModel(name string) (target, *apiError) {
	set := s.models.Load()
	if len(set.list) == 0 {
		return target{}, loadingError()
	}
	if name == "" {
		return target{model: set.list[0], name: name}, nil
	}
	if name == s.routerName() {
		return target{}, unsupported("model", "%s asks the router to choose the model, which it does for chat and text completions only; name a model (GET /v1/models lists them)", quote(name))
	}
	if m, ok := set.byID[name]; ok {
		return target{model: m, name: name}, nil
	}
	found := set.findAdapter(name)
	switch len(found) {
	case 0:
		return target{}, set.notFound(name)
	case 1:
		return found[0], nil
	}
	return target{}, ambiguousAdapter(found, "model")
}

// lookupModel finds the model a request names, refusing adapters: the
// routes that call it (embeddings) run the base model only.
func (s *Server) lookupModel(name string) (*Model, *apiError) {
	t, err := s.resolveModel(name)
	if err != nil {
		return nil, err
	}
	if t.adapter != "" {
		return nil, unsupported("model", "%s names the LoRA adapter %s; adapters apply to chat and text completions only, this endpoint runs the base model %s",
			quote(name), quote(t.adapter), quote(t.model.ID))
	}
	return t.model, nil
}

// requestModel reads the request's "model" and resolves it. A chat or
// text completion passes the prefix of its ids (routable): it may name the
// router, which then chooses the model.
func (s *Server) requestModel(f *fields, routable string) (target, *apiError) {
	name, _, err := f.str("model")
	if err != nil {
		return target{}, err
	}
	if routable != "" && name != "" && name == s.routerName() && len(s.models.Load().list) > 0 {
		return s.route(f, routable)
	}
	return s.resolveModel(name)
}

// findAdapter lists what name can mean as an adapter: when the part before
// its last colon is a served model's ID, that model's adapter of the rest;
// otherwise every model whose registry resolves name ("ADAPTER", or
// "BASE:ADAPTER" with BASE as the registry knows its base model).
func (set *modelSet) findAdapter(name string) []target {
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		if m, ok := set.byID[name[:i]]; ok {
			if m.Adapters != nil {
				if a, ok := m.Adapters.Resolve(name[i+1:]); ok {
					return []target{{model: m, adapter: a, name: name}}
				}
			}
			return nil
		}
	}
	var found []target
	for _, m := range set.list {
		if m.Adapters == nil {
			continue
		}
		if a, ok := m.Adapters.Resolve(name); ok {
			found = append(found, target{model: m, adapter: a, name: name})
		}
	}
	return found
}

// hasAdapters reports whether any served model has an adapter registry.
func (set *modelSet) hasAdapters() bool {
	return slices.ContainsFunc(set.list, func(m *Model) bool { return m.Adapters != nil })
}

// notFound is the 404 of a name that is no served model or adapter; it
// says what is served, so that the client can correct the name.
func (set *modelSet) notFound(name string) *apiError {
	msg := "the model " + quote(name) + " does not exist; this server serves " + modelIDs(set.list)
	if set.hasAdapters() {
		msg += " and their adapters (GET /v1/models lists them; name an adapter as \"MODEL:ADAPTER\" or \"ADAPTER\")"
	} else {
		msg += " (GET /v1/models lists them)"
	}
	return &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Param: "model", Code: codeModelNotFound, Message: msg}
}

// ambiguousAdapter is the 400 of an adapter name that several models have,
// given in the field param.
func ambiguousAdapter(found []target, param string) *apiError {
	ms := make([]*Model, len(found))
	for i, t := range found {
		ms[i] = t.model
	}
	a := found[0].adapter
	return &apiError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: param, Code: codeAmbiguousModel,
		Message: fmt.Sprintf("the adapter %s belongs to several models, %s; name one as %s", quote(a), modelIDs(ms), quote(found[0].model.ID+":"+a))}
}

// maxListedIDs bounds the model ids an error message lists.
const maxListedIDs = 8

// modelIDs lists the models' ids for a message: "a", "b" and "c".
func modelIDs(ms []*Model) string {
	var ids []string
	for _, m := range ms[:min(len(ms), maxListedIDs)] {
		ids = append(ids, quote(m.ID))
	}
	if more := len(ms) - len(ids); more > 0 {
		ids = append(ids, fmt.Sprintf("%d more", more))
	}
	if len(ids) == 1 {
		return ids[0]
	}
	return strings.Join(ids[:len(ids)-1], ", ") + " and " + ids[len(ids)-1]
}
