package gcstest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestInProcess(t *testing.T) {
	body := strings.Repeat("0123456789", 100_000) // more than a pipe write at a time
	h := http.NewServeMux()
	h.HandleFunc("/obj", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		w.Header().Set("X-Goog-Generation", "7")
		io.WriteString(w, body)
		w.Header().Set("X-Late", "not sent") // after the header went: the reader must not see it
	})
	h.HandleFunc("/gone", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusNotFound) })
	h.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) {})
	p := &Proxy{Transport: InProcess(h)}
	ts := httptest.NewServer(p.Handler(&url.URL{Scheme: "http", Host: "in-process.invalid"}))
	defer ts.Close()
	for _, tc := range []struct {
		path, body string
		code       int
		gen        string
	}{
		{"/obj", body, 200, "7"},
		{"/gone", "no\n", 404, ""},
		{"/empty", "", 200, ""},
	} {
		resp, err := http.Get(ts.URL + tc.path)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.code || string(got) != tc.body ||
			resp.Header.Get("X-Goog-Generation") != tc.gen || resp.Header.Get("X-Late") != "" {
			t.Errorf("%s: HTTP %d, %d bytes (want %d, %d), generation %q, err %v", tc.path, resp.StatusCode,
				len(got), tc.code, len(tc.body), resp.Header.Get("X-Goog-Generation"), err)
		}
	}
}
