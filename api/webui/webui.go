package webui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"time"

	"github.com/go-chi/chi/v5"
)

//go:embed static
var static embed.FS

// contentSecurityPolicy lets the page run only its own files and talk only
// to its own server: even if model text ever reached the DOM as HTML, an
// inline script or handler in it would not run, and nothing could be sent
// elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// file is one of the page's files, read once.
type file struct {
	name string
	body []byte
	etag string
	typ  string
}

// page holds the page's files by the path they are served at.
var page = mustLoad()

// mustLoad reads the embedded files; they are part of the binary, so a
// failure is a build mistake.
func mustLoad() map[string]file {
	files := map[string]file{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		typ := mime.TypeByExtension(path.Ext(p))
		if typ == "" {
			typ = http.DetectContentType(b)
		}
		name := path.Base(p)
		files[name] = file{name: name, body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, typ: typ}
		return nil
	})
	if err != nil {
		panic("webui: reading the embedded page: " + err.Error())
	}
	for _, name := range []string{"index.html", "icon.svg"} {
		if _, ok := files[name]; !ok {
			panic("webui: the embedded page has no " + name)
		}
	}
	return files
}

// Routes serves the page on r: / is the page, /webui/NAME its scripts,
// styles and icon, and /favicon.ico the icon, so that browsers find one
// where they look first. GET and HEAD are answered, without an API key:
// the page is public, and the API calls it makes carry the key the user
// types into it. Other paths are left to r, so that its 404 answers them.
func Routes(r chi.Router) {
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		r.Method(m, "/", serve(page["index.html"]))
		r.Method(m, "/favicon.ico", serve(page["icon.svg"]))
		for name, f := range page {
			if name != "index.html" {
				r.Method(m, "/webui/"+name, serve(f))
			}
		}
	}
}

// serve answers with one of the page's files, revalidated by its ETag so
// that a new binary's page is never hidden by a cached old one.
func serve(f file) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serveFile(w, r, f) })
}

func serveFile(w http.ResponseWriter, r *http.Request, f file) {
	h := w.Header()
	h.Set("Content-Type", f.typ)
	h.Set("ETag", f.etag)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if f.name == "index.html" {
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}
