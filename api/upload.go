package api

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/session"
)

// multipartSlack is what an upload's body may hold beyond the adapter's
// bytes: boundaries, part headers and the text fields.
const multipartSlack = 1 << 20

// maxFieldBytes bounds the text fields of an upload.
const maxFieldBytes = 4 << 10

// uploadAdapter serves POST /v1/adapters: a multipart form with the field
// name, the optional field base_model (which model the adapter is for, when
// several take adapters), and the adapter's files (one GGUF LoRA file, or
// adapter_config.json and adapter_model.safetensors). The files are
// streamed into the model's adapter directory and the checked adapter is
// moved into place, so that a failed upload leaves nothing.
func (s *Server) uploadAdapter(w http.ResponseWriter, r *http.Request) error {
	if !s.models.HasAdapters() {
		return adaptersOff()
	}
	// The model may be named inside the body, unread yet: the declared
	// length is held to the largest limit of any model, and the files to
	// their model's own limit as they are read.
	var maxBytes int64
	for _, m := range s.models.List() {
		if m.Adapters != nil {
			maxBytes = max(maxBytes, maxAdapterBytes(m))
		}
	}
	if r.ContentLength > maxBytes+multipartSlack {
		// Refused before reading: a client that sent "Expect: 100-continue"
		// (curl does for large bodies) never sends the body at all.
		return &session.Error{Status: http.StatusRequestEntityTooLarge, Type: session.TypeInvalidRequest, Param: "file", Code: jsonhttp.CodeTooLarge,
			Message: fmt.Sprintf("the upload is %d bytes; an adapter may be at most %d bytes", r.ContentLength, maxBytes)}
	}
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/form-data" || params["boundary"] == "" {
		return session.Invalid("", codeMultipart,
			"send the adapter as multipart/form-data: the field name, and the files as file parts (curl -F name=NAME -F file=@adapter_config.json -F file=@adapter_model.safetensors)")
	}
	// An adapter may be large: it gets ten times a body's time.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(10 * s.opt.BodyTimeout))
	body := &watchedBody{r: http.MaxBytesReader(w, r.Body, maxBytes+multipartSlack)}
	pick := func(base string) (*session.Model, error) { return s.adapterModel(base, "base_model") }
	m, info, uerr := readUpload(multipart.NewReader(body, params["boundary"]), pick)
	if body.tooLarge {
		return &session.Error{Status: http.StatusRequestEntityTooLarge, Type: session.TypeInvalidRequest, Param: "file", Code: jsonhttp.CodeTooLarge,
			Message: fmt.Sprintf("the upload is larger than the limit: an adapter may be at most %d bytes", maxBytes)}
	}
	if errors.Is(uerr, os.ErrDeadlineExceeded) {
		return jsonhttp.TimedOut()
	}
	if uerr != nil {
		var se *session.Error
		if errors.As(uerr, &se) {
			return se
		}
		return adapterError(uerr, adapterParams{name: "name", file: "file"})
	}
	s.opt.Logger.Info().Str("model", m.ID).Str("adapter", info.Name).Str("format", string(info.Format)).Int("rank", info.Rank).
		Int64("bytes", info.FileBytes).Msg("adapter uploaded")
	w.Header().Set("Location", "/v1/adapters/"+url.PathEscape(info.Name))
	jsonhttp.WriteJSON(w, http.StatusCreated, adapterObjectOf(info))
	return nil
}

// maxAdapterBytes is the most an upload of an adapter of m may hold.
func maxAdapterBytes(m *session.Model) int64 {
	if m.MaxAdapterBytes <= 0 {
		return lora.DefaultMaxUploadBytes
	}
	return m.MaxAdapterBytes
}

// readUpload streams an upload's parts into the adapters of the model pick
// chooses: the text fields "name" (required) and "base_model" (optional),
// and the adapter's files as parts with a file name (or named "file"), in
// any order, as curl -F sends them. pick gets the base_model read so far
// when the first file arrives, since the files stream into that model's
// adapter directory (or at the end, for an upload without files); a
// base_model after the files must pick the same model. Errors are an
// error or wrap lora's (for adapterError). On any error nothing is
// left in the directory.
func readUpload(mr *multipart.Reader, pick func(baseModel string) (*session.Model, error)) (*session.Model, lora.Info, error) {
	var (
		m               *session.Model
		u               *lora.Upload
		name, baseModel string
	)
	defer func() {
		if u != nil {
			u.Abort()
		}
	}()
	start := func() error {
		if u != nil {
			return nil
		}
		var aerr error
		if m, aerr = pick(baseModel); aerr != nil {
			return aerr
		}
		var err error
		u, err = m.Adapters.NewUpload()
		return err
	}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, lora.Info{}, fmt.Errorf("%w: multipart body: %v", lora.ErrInvalid, err)
		}
		field := p.FormName()
		switch {
		case p.FileName() != "" || field == "file":
			if err = start(); err == nil {
				err = u.AddFile(p.FileName(), p)
			}
		case field == "name":
			name, err = readField(p)
		case field == "base_model":
			if baseModel, err = readField(p); err == nil && u != nil {
				err = samePick(pick, baseModel, m)
			}
		default:
			err = fmt.Errorf("%w: unexpected form field %q (want name, base_model and file parts)", lora.ErrInvalid, field)
		}
		p.Close()
		if err != nil {
			return nil, lora.Info{}, err
		}
	}
	if name == "" {
		return nil, lora.Info{}, fmt.Errorf("%w: the form field \"name\" is required", lora.ErrBadName)
	}
	if err := start(); err != nil {
		return nil, lora.Info{}, err
	}
	info, err := u.Commit(name, baseModel)
	return m, info, err
}

// samePick checks that a base_model sent after the files picks the model
// they already went to.
func samePick(pick func(string) (*session.Model, error), baseModel string, m *session.Model) error {
	other, aerr := pick(baseModel)
	if aerr != nil {
		return aerr
	}
	if other != m {
		return session.Invalid("base_model", codeMultipart, "base_model %s came after the adapter's files, which went to the model %s; send base_model before the files",
			session.Quote(baseModel), session.Quote(m.ID))
	}
	return nil
}

// readField reads a text field of an upload, trimmed.
func readField(p *multipart.Part) (string, error) {
	b, err := io.ReadAll(io.LimitReader(p, maxFieldBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxFieldBytes {
		return "", fmt.Errorf("%w: field %s is over %d bytes", lora.ErrInvalid, p.FormName(), maxFieldBytes)
	}
	return strings.TrimSpace(string(b)), nil
}

// watchedBody notes when the body hit its size limit, which the registry's
// errors do not always carry through.
type watchedBody struct {
	r        io.Reader
	tooLarge bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		b.tooLarge = true
	}
	return n, err
}
