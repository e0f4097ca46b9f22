package gcstest

import (
	"io"
	"net/http"
	"strconv"
	"sync"
)

// InProcess returns an http.RoundTripper that serves each request with h
// in this process, the reply's body streamed through a pipe. A Proxy
// given it as Transport reaches an in-process server without a second
// loopback connection (fake-gcs-server's own in-process transport keeps
// whole replies in memory), so a benchmark measures the client rather
// than the emulator's plumbing.
func InProcess(h http.Handler) http.RoundTripper { return inProcess{h} }

type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	w := &pipeReply{header: make(http.Header), body: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			w.writeHeader(http.StatusOK) // a handler that wrote nothing
			pw.Close()
		}()
		t.h.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
	case <-r.Context().Done():
		pr.CloseWithError(r.Context().Err())
		return nil, r.Context().Err()
	}
	n, err := strconv.ParseInt(w.sent.Get("Content-Length"), 10, 64)
	if err != nil {
		n = -1
	}
	return &http.Response{
		Status:     strconv.Itoa(w.code) + " " + http.StatusText(w.code),
		StatusCode: w.code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: pr, ContentLength: n, Request: r,
	}, nil
}

// pipeReply is the http.ResponseWriter of an in-process request.
type pipeReply struct {
	header, sent http.Header // sent: the header as of WriteHeader, which the reader gets
	body         *io.PipeWriter
	code         int
	once         sync.Once
	ready        chan struct{}
}

func (w *pipeReply) Header() http.Header { return w.header }

func (w *pipeReply) WriteHeader(code int) { w.writeHeader(code) }

func (w *pipeReply) writeHeader(code int) {
	w.once.Do(func() {
		w.code, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeReply) Write(p []byte) (int, error) {
	w.writeHeader(http.StatusOK)
	return w.body.Write(p)
}
