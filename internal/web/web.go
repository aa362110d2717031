// Package web serves system1's own pages: a playground and a dashboard at
// /, a reference of the HTTP API at /docs, and that API's OpenAPI document
// at /openapi.json. The assets are plain HTML, CSS and JavaScript modules
// embedded in the binary. The page holds no data of its own: it calls the
// same API any client calls, with the key its user typed, so it can show
// nothing that curl with that key could not.
package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"maps"
	"net/http"
	"path"
	"slices"
	"strings"
)

//go:embed assets
var embedded embed.FS

// securityHeaders go on every page response. The policy allows scripts,
// styles and connections from this origin only, no inline script and no
// framing; the page keeps the key in sessionStorage, never in a cookie,
// so nothing secret is ever in a response to cache.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"X-Frame-Options":        "DENY",
	"Referrer-Policy":        "no-referrer",
	"Cache-Control":          "no-cache",
}

// file is one asset as served.
type file struct {
	name, contentType, etag string
	body                    []byte
}

// files are the assets by the URL path that serves them: index.html at /,
// docs.html at /docs, the rest under /ui/.
var files = load()

func load() map[string]*file {
	out := map[string]*file{}
	err := fs.WalkDir(embedded, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := embedded.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "assets/")
		url := "/ui/" + name
		switch name {
		case "index.html":
			url = "/"
		case "docs.html":
			url = "/docs"
		}
		out[url] = &file{name: name, contentType: contentType(name), etag: etag(body), body: body}
		return nil
	})
	if err != nil {
		panic("web: reading the embedded assets: " + err.Error()) // built into the binary: a bug
	}
	return out
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

// Register adds the page's routes to mux: GET / (that path alone; every
// other unknown path stays with mux's own catch-all), GET /docs, each
// asset under GET /ui/, and GET /openapi.json. All are public, like Jev's
// /docs and /openapi.json: none carries data.
func Register(mux *http.ServeMux) {
	for _, u := range slices.Sorted(maps.Keys(files)) {
		pattern := "GET " + u
		if u == "/" {
			pattern = "GET /{$}"
		}
		mux.Handle(pattern, serveFile(files[u]))
	}
	doc := OpenAPI()
	mux.Handle("GET /openapi.json", serveFile(&file{name: "openapi.json", contentType: "application/json",
		etag: etag(doc), body: doc}))
}

func etag(b []byte) string {
	sum := sha256.Sum256(b)
	return `"` + hex.EncodeToString(sum[:8]) + `"`
}

func serveFile(f *file) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for k, v := range securityHeaders {
			h.Set(k, v)
		}
		h.Set("Content-Type", f.contentType)
		h.Set("ETag", f.etag)
		if r.Header.Get("If-None-Match") == f.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = w.Write(f.body)
	})
}
