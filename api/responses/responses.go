package responses

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/api/openai"
	"github.com/ruvllm/ruvllm/session"
)

// Error codes of the Responses API.
const (
	codePreviousMissing = "previous_response_not_found"
)

// API serves the Responses API over the served models.
type API struct {
	Models *session.Models
	// Store keeps the responses created with store true.
	Store *Store
	// OnFailure, when set, is told of a handler's failure that is the
	// server's own (a 500), for the log.
	OnFailure func(r *http.Request, err error)
}

// WriteError writes an error in OpenAI's shape.
func (a *API) WriteError(w http.ResponseWriter, e *session.Error) { openai.WriteError(w, e) }

// Routes registers the routes, each also without /v1 as the other OpenAI
// routes are served.
func (a *API) Routes(r chi.Router) {
	h := func(f func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
		return jsonhttp.Handler(f, openai.WriteError, a.OnFailure)
	}
	for _, prefix := range []string{"/v1", ""} {
		r.Post(prefix+"/responses", h(a.create))
		r.Get(prefix+"/responses/{id}", h(a.get))
		r.Delete(prefix+"/responses/{id}", h(a.delete))
		r.Get(prefix+"/responses/{id}/input_items", h(a.inputItems))
	}
}

// notFound is the 404 of an id that names no stored response.
func notFound(id string) *session.Error {
	return session.NotFound("", "", "Response with id %s not found.", session.Quote(id))
}

// create serves POST /v1/responses.
func (a *API) create(w http.ResponseWriter, r *http.Request) error {
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	req, err := a.parse(f)
	if err != nil {
		return err
	}
	// The conversation: the previous response's, then the input.
	var items []json.RawMessage
	var conv conversation
	if req.previous != "" {
		rec, ok, err := a.Store.get(req.previous)
		if err != nil {
			return err
		}
		if !ok {
			return session.Invalid("previous_response_id", codePreviousMissing, "Previous response with id %s not found.", session.Quote(req.previous))
		}
		for _, it := range rec.Items {
			if err := conv.add(it, "previous_response_id"); err != nil {
				return err
			}
		}
		items = rec.Items
	}
	start := len(items)
	for i, it := range req.input {
		if err := conv.add(it, "input["+strconv.Itoa(i)+"]"); err != nil {
			return err
		}
		items = append(items, normalize(it))
	}
	req.sess.Messages = messagesOf(req.echo.Instructions, conv.msgs)
	if len(req.sess.Messages) == 0 {
		return session.Invalid("input", session.CodeInvalidValue, "input holds no message")
	}

	ctx := r.Context()
	req.sess.Received = jsonhttp.Received(r)
	gen, err := a.Models.Start(ctx, &req.sess)
	if err != nil {
		return err
	}
	defer gen.Close()
	if rh := gen.RouteHeader(); rh != "" {
		w.Header().Set("X-Route", rh)
	}
	resp := req.echo
	resp.ID, resp.CreatedAt, resp.Model = gen.ID(), time.Now().Unix(), gen.ModelID()
	b := &builder{resp: &resp, trim: len(req.sess.Tools) > 0 && req.sess.ToolChoice.Mode != session.ToolNone}
	if req.stream {
		b.st = jsonhttp.NewSSE(w)
		b.sendResponse("response.created")
		b.sendResponse("response.in_progress")
		if b.err != nil {
			return nil // the client is gone
		}
	}
	if err := gen.Run(ctx, b); err != nil {
		if !req.stream {
			return err
		}
		if err == session.ErrClientGone {
			return nil // no one to tell
		}
		// The status line is long gone: the failure travels as events.
		e := session.AsError(err)
		b.fail(e)
		b.resp.Usage = b.usageOf(gen.Usage())
		ev := errorEvent{head: b.head("error"), Message: e.Message}
		if e.Code != "" {
			ev.Code = &e.Code
		}
		if e.Param != "" {
			ev.Param = &e.Param
		}
		b.send(ev)
		b.sendResponse("response.failed")
		return nil
	}
	b.end()
	resp.Usage = b.usageOf(gen.Usage())
	if resp.Status == statusCompleted {
		now := time.Now().Unix()
		resp.CompletedAt = &now
	}
	if resp.Store {
		// Kept before the client hears of it, so that a next request can
		// continue it at once.
		rec := &record{Items: items, Input: [2]int{start, len(items)}}
		for _, out := range resp.Output {
			j, err := json.Marshal(out)
			if err != nil {
				return err
			}
			rec.Items = append(rec.Items, j)
		}
		if rec.Response, err = json.Marshal(&resp); err != nil {
			return err
		}
		if err := a.Store.put(resp.ID, rec); err != nil && a.OnFailure != nil {
			a.OnFailure(r, err)
		}
	}
	if !req.stream {
		jsonhttp.WriteJSON(w, http.StatusOK, &resp)
		return nil
	}
	typ := "response.completed"
	if resp.Status == statusIncomplete {
		typ = "response.incomplete"
	}
	b.sendResponse(typ)
	return nil
}

// stored reads the stored response the route's {id} names.
func (a *API) stored(r *http.Request) (string, *record, error) {
	id := chi.URLParam(r, "id")
	rec, ok, err := a.Store.get(id)
	if err != nil {
		return "", nil, err
	}
	if !ok {
		return "", nil, notFound(id)
	}
	return id, rec, nil
}

// get serves GET /v1/responses/{id}.
func (a *API) get(w http.ResponseWriter, r *http.Request) error {
	if s := r.URL.Query().Get("stream"); s == "true" {
		return session.Unsupported("stream", "streaming a stored response again is not supported by this server")
	}
	_, rec, err := a.stored(r)
	if err != nil {
		return err
	}
	jsonhttp.WriteJSON(w, http.StatusOK, rec.Response)
	return nil
}

// delete serves DELETE /v1/responses/{id}.
func (a *API) delete(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "id")
	ok, err := a.Store.delete(id)
	if err != nil {
		return err
	}
	if !ok {
		return notFound(id)
	}
	jsonhttp.WriteJSON(w, http.StatusOK, deleted{ID: id, Object: "response", Deleted: true})
	return nil
}

// inputItems serves GET /v1/responses/{id}/input_items: the response's
// own input items, newest first unless order is asc, limit (1 to 100,
// default 20) at a time after the item named by after.
func (a *API) inputItems(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return session.Invalid("limit", session.CodeInvalidValue, "limit must be an integer from 1 to 100, got %s", session.Quote(v))
		}
		limit = n
	}
	order := q.Get("order")
	switch order {
	case "", "desc", "asc":
	default:
		return session.Invalid("order", session.CodeInvalidValue, "order %s is not one of asc, desc", session.Quote(order))
	}
	_, rec, err := a.stored(r)
	if err != nil {
		return err
	}
	in := rec.Items[rec.Input[0]:rec.Input[1]]
	ids := make([]string, len(in))
	for i, it := range in {
		var head struct {
			ID string `json:"id"`
		}
		json.Unmarshal(it, &head)
		ids[i] = head.ID
	}
	idx := make([]int, len(in))
	for i := range idx {
		idx[i] = i
		if order != "asc" {
			idx[i] = len(in) - 1 - i
		}
	}
	if after := q.Get("after"); after != "" {
		for k, i := range idx {
			if ids[i] == after {
				idx = idx[k+1:]
				break
			}
		}
	}
	list := itemList{Object: "list", Data: []json.RawMessage{}}
	for k, i := range idx {
		if k == limit {
			list.HasMore = true
			break
		}
		list.Data = append(list.Data, in[i])
		if k == 0 {
			list.FirstID = &ids[i]
		}
		list.LastID = &ids[i]
	}
	jsonhttp.WriteJSON(w, http.StatusOK, list)
	return nil
}
