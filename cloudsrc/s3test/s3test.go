// Package s3test runs an S3 server (gofakes3, in memory) on loopback for
// tests, optionally behind a handler that injects faults: 503 SlowDown
// answers, connection resets, stalls. It also gives the server what
// gofakes3 lacks and prep relies on: CRC32C checksums as S3 keeps them
// (a PUT or part whose x-amz-checksum-crc32c differs from its bytes is
// refused with BadDigest; HEAD with x-amz-checksum-mode: ENABLED answers
// the object's full-object CRC32C). The real SDK talks to it through
// AWS_ENDPOINT_URL.
package s3test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Object is one object to seed the server with.
type Object struct {
	Bucket, Name string
	Data         []byte
}

// Server is a fake S3 server on loopback.
type Server struct {
	Backend *s3mem.Backend
	URL     string

	inner http.Handler // gofakes3 with checksums
	mu    sync.Mutex
	front http.Handler // inner, or a Proxy around it
}

// NewServer starts a server holding objects (their buckets are created),
// and points the AWS SDK at it for the rest of the test: AWS_ENDPOINT_URL,
// static credentials, and no shared config files or instance metadata,
// so that nothing of the machine's own AWS setup leaks in.
func NewServer(tb testing.TB, objects ...Object) *Server {
	tb.Helper()
	be := s3mem.New()
	fake := gofakes3.New(be, gofakes3.WithIntegrityCheck(true))
	s := &Server{Backend: be}
	s.inner = checksums(fake.Server())
	s.front = s.inner
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		h := s.front
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	tb.Cleanup(ts.Close)
	s.URL = ts.URL
	for _, o := range objects {
		s.CreateBucket(o.Bucket)
		s.Put(tb, o.Bucket, o.Name, o.Data)
	}
	dir := tb.TempDir()
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL":            s.URL,
		"AWS_ENDPOINT_URL_S3":         "",
		"AWS_ACCESS_KEY_ID":           "test",
		"AWS_SECRET_ACCESS_KEY":       "test",
		"AWS_SESSION_TOKEN":           "",
		"AWS_REGION":                  "us-east-1",
		"AWS_PROFILE":                 "",
		"AWS_CONFIG_FILE":             filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED":   "true",
	} {
		tb.Setenv(k, v)
	}
	return s
}

// CreateBucket makes an empty bucket; one that exists is kept.
func (s *Server) CreateBucket(name string) {
	s.Backend.CreateBucket(name)
}

// Put stores an object.
func (s *Server) Put(tb testing.TB, bucket, name string, data []byte) {
	tb.Helper()
	if _, err := s.Backend.PutObject(bucket, name, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		tb.Fatalf("seed s3://%s/%s: %v", bucket, name, err)
	}
}

// Get reads an object; ok false where there is none.
func (s *Server) Get(bucket, name string) ([]byte, bool) {
	obj, err := s.Backend.GetObject(bucket, name, nil)
	if err != nil {
		return nil, false
	}
	defer obj.Contents.Close()
	data, err := io.ReadAll(obj.Contents)
	return data, err == nil
}

// Objects returns every object under prefix/ by its name below it.
func (s *Server) Objects(tb testing.TB, bucket, prefix string) map[string][]byte {
	tb.Helper()
	pre := gofakes3.NewPrefix(&prefix, nil)
	list, err := s.Backend.ListBucket(bucket, &pre, gofakes3.ListBucketPage{})
	if err != nil {
		tb.Fatalf("list s3://%s/%s: %v", bucket, prefix, err)
	}
	out := map[string][]byte{}
	for _, c := range list.Contents {
		data, _ := s.Get(bucket, c.Key)
		out[strings.TrimPrefix(c.Key, prefix+"/")] = data
	}
	return out
}

// Use puts p in front of the server for the rest of the test.
func (s *Server) Use(tb testing.TB, p *Proxy) {
	s.mu.Lock()
	s.front = p.Wrap(s.inner)
	s.mu.Unlock()
	tb.Cleanup(func() {
		s.mu.Lock()
		s.front = s.inner
		s.mu.Unlock()
	})
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crcText(b []byte) string {
	var c [4]byte
	binary.BigEndian.PutUint32(c[:], crc32.Checksum(b, castagnoli))
	return base64.StdEncoding.EncodeToString(c[:])
}

// checksums gives h S3's CRC32C handling (see the package comment).
func checksums(h http.Handler) http.Handler {
	get := func(r *http.Request) ([]byte, bool) {
		q, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, r.URL.Path, nil)
		q.Header = r.Header.Clone()
		q.Header.Del("Range")
		q.Header.Del("If-None-Match")
		q.Header.Del("If-Match")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, q)
		return rec.Body.Bytes(), rec.Code == http.StatusOK
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		want := r.Header.Get("X-Amz-Checksum-Crc32c")
		switch {
		case r.Method == http.MethodPut && want != "" && r.Header.Get("X-Amz-Copy-Source") == "":
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			if got := crcText(body); got != want {
				writeError(w, http.StatusBadRequest, "BadDigest", "The CRC32C you specified did not match the calculated checksum.")
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if !q.Has("uploadId") {
				w.Header().Set("X-Amz-Checksum-Crc32c", want)
				w.Header().Set("X-Amz-Checksum-Type", "FULL_OBJECT")
			}
			h.ServeHTTP(w, r)
		case r.Method == http.MethodPost && q.Has("uploadId") && want != "":
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code == http.StatusOK {
				if data, ok := get(r); !ok || crcText(data) != want {
					d, _ := http.NewRequestWithContext(r.Context(), http.MethodDelete, r.URL.Path, nil)
					h.ServeHTTP(httptest.NewRecorder(), d)
					writeError(w, http.StatusBadRequest, "BadDigest", "The CRC32C you specified did not match the calculated checksum.")
					return
				}
			}
			copyReply(w, rec)
		case r.Method == http.MethodHead && strings.EqualFold(r.Header.Get("X-Amz-Checksum-Mode"), "ENABLED"):
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code == http.StatusOK {
				if data, ok := get(r); ok {
					rec.Header().Set("X-Amz-Checksum-Crc32c", crcText(data))
					rec.Header().Set("X-Amz-Checksum-Type", "FULL_OBJECT")
				}
			}
			copyReply(w, rec)
		default:
			h.ServeHTTP(w, r)
		}
	})
}

func copyReply(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// writeError answers in S3's XML error shape.
func writeError(w http.ResponseWriter, code int, s3code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(code)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>test</RequestId></Error>`, s3code, msg)
}

// Proxy misbehaves on a fixed share of requests, counted in arrival
// order, so a test sees the same mix every run.
type Proxy struct {
	// FailEvery answers every FailEvery-th request with 503 SlowDown, or
	// 500 InternalError for every second of those. 0: none.
	FailEvery int
	// CutReplyEvery carries out upload requests (PUT, and the POST that
	// completes a multipart upload), so the object or part is stored, then
	// cuts the reply of the first and every CutReplyEvery-th after it:
	// headers and half the body, then a connection reset. 0: none.
	CutReplyEvery int
	// StallPath holds every request whose path contains it for Stall, or
	// until the client gives up: a GET sends half its body first.
	StallPath string
	Stall     time.Duration
	// StallOnce stalls only the first request StallPath matches.
	StallOnce bool
	// CorruptEvery flips one byte in the body of every CorruptEvery-th
	// PUT (an object or a part), as a link that changes bytes. 0: none.
	CorruptEvery int
	// Forbid answers 403 AccessDenied to requests whose path contains it.
	Forbid string
	// RetryAfter, when set, is sent as Retry-After with every 503.
	RetryAfter time.Duration

	n, uploads, puts, failed, stalled, cut, corrupted atomic.Int64
}

// Failed, Stalled and Cut count the faults injected so far.
func (p *Proxy) Failed() int64  { return p.failed.Load() }
func (p *Proxy) Stalled() int64 { return p.stalled.Load() }
func (p *Proxy) Cut() int64     { return p.cut.Load() }

// Corrupted counts the PUT bodies changed.
func (p *Proxy) Corrupted() int64 { return p.corrupted.Load() }

// Wrap returns h behind p's faults.
func (p *Proxy) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.Forbid != "" && strings.Contains(r.URL.Path, p.Forbid) {
			io.Copy(io.Discard, r.Body)
			writeError(w, http.StatusForbidden, "AccessDenied", "Access Denied")
			return
		}
		n := p.n.Add(1)
		if p.FailEvery > 0 && n%int64(p.FailEvery) == 0 {
			io.Copy(io.Discard, r.Body)
			if (p.failed.Add(1))%2 == 0 {
				writeError(w, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
				return
			}
			if p.RetryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(int(p.RetryAfter/time.Second)))
			}
			writeError(w, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
			return
		}
		if p.StallPath != "" && strings.Contains(r.URL.Path, p.StallPath) && (!p.StallOnce || p.stalled.Load() == 0) {
			p.stalled.Add(1)
			if r.Method == http.MethodGet {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				body := rec.Body.Bytes()
				for k, v := range rec.Header() {
					w.Header()[k] = v
				}
				w.WriteHeader(rec.Code)
				w.Write(body[:len(body)/2])
				http.NewResponseController(w).Flush()
				sleep(r.Context(), p.Stall)
				return // the client gave up, or gets a short body
			}
			body, err := io.ReadAll(r.Body)
			if err != nil || !sleep(r.Context(), p.Stall) {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if p.CorruptEvery > 0 && r.Method == http.MethodPut && p.puts.Add(1)%int64(p.CorruptEvery) == 0 {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			if len(body) > 0 {
				body[len(body)*3/4] ^= 0xff
				p.corrupted.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		upload := r.Method == http.MethodPut || r.Method == http.MethodPost && r.URL.Query().Has("uploadId")
		if p.CutReplyEvery > 0 && upload && (p.uploads.Add(1)-1)%int64(p.CutReplyEvery) == 0 {
			p.cut.Add(1)
			cutReply(w, r, h)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// cutReply carries out r, then sends the status line of the reply, not
// the rest of its headers, and resets the connection: the client cannot
// tell whether the request was carried out (an S3 upload's reply has no
// body to cut in half).
func cutReply(w http.ResponseWriter, r *http.Request, h http.Handler) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n", rec.Code, http.StatusText(rec.Code), rec.Header().Get("Content-Type"))
	buf.Flush()
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0) // close with RST: "connection reset by peer"
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
