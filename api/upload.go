package api

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"

	"github.com/ruvllm/ruvllm/lora"
)

// multipartSlack is what an upload's body may hold beyond the adapter's
// bytes: boundaries, part headers and the text fields.
const multipartSlack = 1 << 20

// maxFieldBytes bounds the text fields of an upload.
const maxFieldBytes = 4 << 10

// uploadAdapter serves POST /v1/adapters: a multipart form with the field
// name, the optional field base_model, and the adapter's files (one GGUF
// LoRA file, or adapter_config.json and adapter_model.safetensors). The
// files are streamed into the registry's temporary directory and the
// checked adapter is moved into place, so that a failed upload leaves
// nothing.
func (s *Server) uploadAdapter(w http.ResponseWriter, r *http.Request) error {
	m, reg, aerr := s.registry()
	if aerr != nil {
		return aerr
	}
	maxBytes := m.MaxAdapterBytes
	if maxBytes <= 0 {
		maxBytes = lora.DefaultMaxUploadBytes
	}
	if r.ContentLength > maxBytes+multipartSlack {
		// Refused before reading: a client that sent "Expect: 100-continue"
		// (curl does for large bodies) never sends the body at all.
		return &apiError{Status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Param: "file", Code: codeTooLarge,
			Message: fmt.Sprintf("the upload is %d bytes; an adapter may be at most %d bytes", r.ContentLength, maxBytes)}
	}
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/form-data" || params["boundary"] == "" {
		return invalid("", codeMultipart,
			"send the adapter as multipart/form-data: the field name, and the files as file parts (curl -F name=NAME -F file=@adapter_config.json -F file=@adapter_model.safetensors)")
	}
	body := &watchedBody{r: http.MaxBytesReader(w, r.Body, maxBytes+multipartSlack)}
	info, uerr := readUpload(multipart.NewReader(body, params["boundary"]), reg)
	if body.tooLarge {
		return &apiError{Status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Param: "file", Code: codeTooLarge,
			Message: fmt.Sprintf("the upload is larger than the limit: an adapter may be at most %d bytes", maxBytes)}
	}
	if uerr != nil {
		return adapterError(uerr, adapterParams{name: "name", file: "file"})
	}
	s.opt.Logger.Info().Str("adapter", info.Name).Str("format", string(info.Format)).Int("rank", info.Rank).
		Int64("bytes", info.FileBytes).Msg("adapter uploaded")
	w.Header().Set("Location", "/v1/adapters/"+url.PathEscape(info.Name))
	writeJSON(w, http.StatusCreated, adapterObjectOf(info))
	return nil
}

// readUpload streams an upload's parts into reg: the text fields "name"
// (required) and "base_model" (optional), and the adapter's files as parts
// with a file name (or named "file"), in any order, as curl -F sends them.
// It returns what lora.Upload.Commit returns; errors wrap lora's, so that
// adapterError maps them. On any error nothing is left in the directory.
func readUpload(mr *multipart.Reader, reg *lora.Registry) (lora.Info, error) {
	u, err := reg.NewUpload()
	if err != nil {
		return lora.Info{}, err
	}
	defer u.Abort()
	var name, baseModel string
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return lora.Info{}, fmt.Errorf("%w: multipart body: %v", lora.ErrInvalid, err)
		}
		field := p.FormName()
		switch {
		case p.FileName() != "" || field == "file":
			err = u.AddFile(p.FileName(), p)
		case field == "name":
			name, err = readField(p)
		case field == "base_model":
			baseModel, err = readField(p)
		default:
			err = fmt.Errorf("%w: unexpected form field %q (want name, base_model and file parts)", lora.ErrInvalid, field)
		}
		p.Close()
		if err != nil {
			return lora.Info{}, err
		}
	}
	if name == "" {
		return lora.Info{}, fmt.Errorf("%w: the form field \"name\" is required", lora.ErrBadName)
	}
	return u.Commit(name, baseModel)
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
