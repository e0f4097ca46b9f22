// Package gcstest runs a Google Cloud Storage emulator (fake-gcs-server)
// on loopback for tests and benchmarks, optionally behind a proxy that
// injects faults: 503/429 answers, stalls and added latency. The real
// storage client talks to it through STORAGE_EMULATOR_HOST.
package gcstest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// Object is one object to seed the server with.
type Object struct {
	Bucket, Name string
	Data         []byte
}

// Server is a fake GCS server on loopback.
type Server struct {
	*fakestorage.Server
	// URL is the address clients use: the server's, or the proxy's once
	// Use has put one in front.
	URL string
}

// NewServer starts a server holding objects (their buckets are created)
// and points STORAGE_EMULATOR_HOST at it for the rest of the test. It is
// stopped when the test ends.
func NewServer(tb testing.TB, objects ...Object) *Server {
	tb.Helper()
	init := make([]fakestorage.Object, len(objects))
	for i, o := range objects {
		init[i] = fakestorage.Object{
			ObjectAttrs: fakestorage.ObjectAttrs{BucketName: o.Bucket, Name: o.Name},
			Content:     o.Data,
		}
	}
	fs, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme:         "http",
		Host:           "127.0.0.1",
		InitialObjects: init,
		Writer:         io.Discard,
	})
	if err != nil {
		tb.Fatalf("start fake GCS server: %v", err)
	}
	tb.Cleanup(fs.Stop)
	s := &Server{Server: fs, URL: fs.URL()}
	tb.Setenv("STORAGE_EMULATOR_HOST", s.URL)
	return s
}

// CreateBucket makes an empty bucket.
func (s *Server) CreateBucket(name string) {
	s.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: name})
}

// Use puts p in front of the server and points STORAGE_EMULATOR_HOST at
// it for the rest of the test.
func (s *Server) Use(tb testing.TB, p *Proxy) {
	tb.Helper()
	target, err := url.Parse(s.Server.URL())
	if err != nil {
		tb.Fatal(err)
	}
	ts := httptest.NewServer(p.Handler(target))
	tb.Cleanup(ts.Close)
	s.URL = ts.URL
	tb.Setenv("STORAGE_EMULATOR_HOST", s.URL)
}

// Proxy is a reverse proxy that misbehaves on a fixed share of requests,
// counted in arrival order, so a test sees the same mix every run.
type Proxy struct {
	// FailEvery answers every FailEvery-th request with 503, or 429 for
	// every second of those, without forwarding it. 0: none.
	FailEvery int
	// StallEvery holds every StallEvery-th request that was not failed
	// for Stall, or until the client gives up: a download sends half its
	// body first, anything else stalls before it is forwarded. 0: none.
	StallEvery int
	// StallPath stalls, as StallEvery does, every request not failed
	// whose path contains it. "": none.
	StallPath string
	Stall     time.Duration
	// Delay is added before every request, as network latency.
	Delay time.Duration
	// CorruptEvery flips one byte in the body of every CorruptEvery-th
	// upload request (counted among uploads) before forwarding it. 0: none.
	CorruptEvery int
	// Forbid answers 403 to requests whose path contains it. "": none.
	Forbid string
	// Unauthorized answers 401 to requests whose path contains it, as to a
	// caller whose credentials were refused. "": none.
	Unauthorized string
	// Unavailable answers 503 to every request whose path contains it,
	// as a backend that never recovers. "": none.
	Unavailable string
	// CutReplyEvery forwards upload requests (counted among uploads, as
	// CorruptEvery counts them) to the server, so the object is stored,
	// then cuts the reply of the first and every CutReplyEvery-th after
	// it: its headers and half its body are sent and the connection is
	// reset. 0: none.
	CutReplyEvery int
	// StallReplyPath holds the reply of every request whose path contains
	// it for Stall after its headers and half its body. "": none.
	StallReplyPath string
	// RetryAfter, when set, is sent as Retry-After (in whole seconds)
	// with every 429 and 503 answer.
	RetryAfter time.Duration
	// OnResponse, when set, sees each answer the server gives before the
	// client does (the object is stored by then, for an upload).
	OnResponse func(*http.Response)
	// Transport, when set, carries the forwarded requests (InProcess: to
	// a server in this process); nil: http.DefaultTransport.
	Transport http.RoundTripper

	n, uploads, replies, failed, stalled, corrupted, refused, cut atomic.Int64
}

// Cut counts the replies cut by CutReplyEvery.
func (p *Proxy) Cut() int64 { return p.cut.Load() }

// Refused counts the requests answered by Forbid, Unauthorized or
// Unavailable.
func (p *Proxy) Refused() int64 { return p.refused.Load() }

// Failed and Stalled count the faults injected so far.
func (p *Proxy) Failed() int64  { return p.failed.Load() }
func (p *Proxy) Stalled() int64 { return p.stalled.Load() }

// Corrupted counts the upload requests whose body was changed.
func (p *Proxy) Corrupted() int64 { return p.corrupted.Load() }

type stallKey struct{}

// Handler forwards to target, injecting p's faults.
func (p *Proxy) Handler(target *url.URL) http.Handler {
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = p.Transport
	rp.ModifyResponse = func(resp *http.Response) error {
		// Resumable uploads continue at the Location the server names:
		// keep them coming through the proxy.
		if loc := resp.Header.Get("Location"); strings.HasPrefix(loc, target.String()) {
			resp.Header.Set("Location", "http://"+resp.Request.Host+strings.TrimPrefix(loc, target.String()))
		}
		if p.OnResponse != nil {
			p.OnResponse(resp)
		}
		if resp.Request.Context().Value(stallKey{}) != nil ||
			p.StallReplyPath != "" && strings.Contains(resp.Request.URL.Path, p.StallReplyPath) {
			resp.Body = &stallingBody{rc: resp.Body, ctx: resp.Request.Context(),
				after: resp.ContentLength / 2, d: p.Stall}
		}
		return nil
	}
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		w.WriteHeader(http.StatusBadGateway)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !sleep(r.Context(), p.Delay) {
			return
		}
		for _, f := range []struct {
			path string
			code int
			msg  string
		}{
			{p.Forbid, http.StatusForbidden, "caller does not have storage.objects.get access"},
			{p.Unauthorized, http.StatusUnauthorized, "Invalid Credentials"},
			{p.Unavailable, http.StatusServiceUnavailable, ""},
		} {
			if f.path != "" && strings.Contains(r.URL.Path, f.path) {
				p.refused.Add(1)
				io.Copy(io.Discard, r.Body)
				p.writeError(w, f.code, f.msg)
				return
			}
		}
		n := p.n.Add(1)
		if p.FailEvery > 0 && n%int64(p.FailEvery) == 0 {
			p.failed.Add(1)
			io.Copy(io.Discard, r.Body)
			if (n/int64(p.FailEvery))%2 == 0 {
				p.writeError(w, http.StatusTooManyRequests, "rate limit exceeded")
			} else {
				p.writeError(w, http.StatusServiceUnavailable, "backend unavailable")
			}
			return
		}
		if p.StallEvery > 0 && n%int64(p.StallEvery) == 0 || p.StallPath != "" && strings.Contains(r.URL.Path, p.StallPath) {
			p.stalled.Add(1)
			if r.Method == http.MethodGet && r.URL.Query().Get("alt") == "media" {
				r = r.WithContext(context.WithValue(r.Context(), stallKey{}, true))
			} else {
				// Read the body first: only then does the server notice
				// a client that gives up and end r's context.
				body, err := io.ReadAll(r.Body)
				if err != nil || !sleep(r.Context(), p.Stall) {
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
		}
		// Uploads: one-shot multipart POSTs and resumable chunk PUTs; not
		// the POST that opens a resumable session, which holds metadata only.
		upload := strings.HasPrefix(r.URL.Path, "/upload/") && r.URL.Query().Get("uploadType") != "resumable"
		if p.CorruptEvery > 0 && upload && p.uploads.Add(1)%int64(p.CorruptEvery) == 0 {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			if len(body) > 0 {
				body[len(body)*3/4] ^= 0xff
			}
			p.corrupted.Add(1)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if p.CutReplyEvery > 0 && upload && (p.replies.Add(1)-1)%int64(p.CutReplyEvery) == 0 {
			p.cut.Add(1)
			cutReply(w, r, rp)
			return
		}
		rp.ServeHTTP(w, r)
	})
}

// cutReply forwards r, then sends the headers and half the body of the
// reply and resets the connection, as a link that fails while the client
// reads the answer to a request the server has carried out.
func cutReply(w http.ResponseWriter, r *http.Request, h http.Handler) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	body := rec.Body.Bytes()
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		rec.Code, http.StatusText(rec.Code), rec.Header().Get("Content-Type"), len(body))
	buf.Write(body[:len(body)/2])
	buf.Flush()
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0) // close with RST: "connection reset by peer"
	}
}

// writeError answers in the JSON error shape of the GCS API.
func (p *Proxy) writeError(w http.ResponseWriter, code int, msg string) {
	if p.RetryAfter > 0 && (code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable) {
		w.Header().Set("Retry-After", strconv.Itoa(int(p.RetryAfter/time.Second)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	io.WriteString(w, `{"error":{"code":`+strconv.Itoa(code)+`,"message":"`+msg+`","errors":[{"message":"`+msg+`"}]}}`)
}

// sleep waits d, or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// stallingBody passes the first after bytes, then waits d (or until the
// client gives up) before passing the rest.
type stallingBody struct {
	rc     io.ReadCloser
	ctx    context.Context
	after  int64
	d      time.Duration
	done   int64
	waited bool
}

func (b *stallingBody) Read(p []byte) (int, error) {
	if !b.waited && b.done >= b.after {
		b.waited = true
		if !sleep(b.ctx, b.d) {
			return 0, b.ctx.Err()
		}
	}
	if !b.waited && int64(len(p)) > b.after-b.done {
		p = p[:b.after-b.done]
	}
	n, err := b.rc.Read(p)
	b.done += int64(n)
	return n, err
}

func (b *stallingBody) Close() error { return b.rc.Close() }
