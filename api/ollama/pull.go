package ollama

import (
	"net/http"
	"time"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/session"
)

// progressInterval spaces a pull's progress lines: a line per piece of the
// download would be thousands.
const progressInterval = 250 * time.Millisecond

// pull serves POST /api/pull: it downloads the model into the server's
// cache, streaming ollama's status lines (or, with stream false, answering
// {"status": "success"} once done). It does not serve the model: the
// server serves the models it started with.
func (a *API) pull(w http.ResponseWriter, r *http.Request) error {
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	name, err := requestedModel(f)
	if err != nil {
		return err
	}
	stream := true
	if v, ok, err := f.Bool("stream"); err != nil {
		return err
	} else if ok {
		stream = v
	}
	if a.Pull == nil {
		return &session.Error{Status: http.StatusForbidden, Type: session.TypeInvalidRequest, Param: "model",
			Message: "pulling models is turned off on this server"}
	}
	if !stream {
		if err := a.Pull(r.Context(), name, func(PullProgress) {}); err != nil {
			return err
		}
		jsonhttp.WriteJSON(w, http.StatusOK, PullProgress{Status: "success"})
		return nil
	}
	st := jsonhttp.NewNDJSON(w)
	var last time.Time
	var lastStatus string
	var gone bool
	err = a.Pull(r.Context(), name, func(p PullProgress) {
		now := time.Now()
		if gone || (p.Status == lastStatus && now.Sub(last) < progressInterval && (p.Total == 0 || p.Completed < p.Total)) {
			return
		}
		last, lastStatus = now, p.Status
		if st.Send(p) != nil {
			gone = true
		}
	})
	switch {
	case err == nil:
		st.Send(PullProgress{Status: "success"})
	case !st.Started():
		return err
	case r.Context().Err() == nil:
		st.Send(errorBody{Error: session.AsError(err).Message})
	}
	return nil
}

// requestedModel is the model a request names: "model", or the deprecated
// "name" that ollama's clients still send.
func requestedModel(f *jsonhttp.Fields) (string, error) {
	name, _, err := f.Str("model")
	if err != nil || name != "" {
		return name, err
	}
	if name, _, err = f.Str("name"); err != nil {
		return "", err
	}
	if name == "" {
		return "", session.Invalid("model", session.CodeMissing, "model is required")
	}
	return name, nil
}
