// Command gcsserver serves a folder's files as Google Cloud Storage
// objects (fake-gcs-server) on loopback, behind cloudsrc/gcstest's fault
// proxy, for prepshards' tests and benchmark. It prints its URL (what
// STORAGE_EMULATOR_HOST takes) as the first line on stdout and serves
// until killed.
package main

import (
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/prep-dev/prep/cloudsrc/gcstest"
)

func main() {
	dir := flag.String("dir", "", "folder whose files become objects")
	bucket := flag.String("bucket", "b", "bucket name")
	prefix := flag.String("prefix", "", "object name prefix (no trailing slash)")
	delay := flag.Duration("delay", 0, "latency added to every request")
	failEvery := flag.Int("fail-every", 0, "answer every n-th request 503 or 429")
	stallEvery := flag.Int("stall-every", 0, "stall every n-th request (a download after half its body)")
	stall := flag.Duration("stall", 0, "how long a stall lasts")
	resetEvery := flag.Int("reset-every", 0, "reset the connection after half the body of every n-th download")
	token := flag.String("token", "", "answer 401 to requests without the header Authorization: Bearer TOKEN")
	tlsCert := flag.String("tls", "", "serve HTTPS, as GCS does, writing the server's certificate (PEM) to this file")
	flag.Parse()

	var objs []fakestorage.Object
	if *dir != "" {
		err := filepath.WalkDir(*dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(*dir, p)
			name := filepath.ToSlash(rel)
			if *prefix != "" {
				name = *prefix + "/" + name
			}
			objs = append(objs, fakestorage.Object{
				ObjectAttrs: fakestorage.ObjectAttrs{BucketName: *bucket, Name: name}, Content: data})
			return nil
		})
		if err != nil {
			log.Fatalf("gcsserver: read %s: %v", *dir, err)
		}
	}
	// fake-gcs-server without a listener of its own: the fault-injecting
	// proxy calls its handler in process, one loopback hop fewer.
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http", Host: "127.0.0.1", InitialObjects: objs, Writer: io.Discard, NoListener: true,
	})
	if err != nil {
		log.Fatalf("gcsserver: start fake-gcs-server: %v", err)
	}
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: *bucket})
	h := largeWrites(srv.HTTPHandler())
	if *failEvery > 0 || *stallEvery > 0 {
		target := &url.URL{Scheme: "http", Host: "fake-gcs-server.invalid"}
		p := &gcstest.Proxy{FailEvery: *failEvery, StallEvery: *stallEvery, Stall: *stall, Delay: *delay,
			Transport: gcstest.InProcess(h)}
		h = p.Handler(target)
	} else {
		// latency alone needs no proxy: its pipe and copies would take CPU
		// from the reader that shares this machine (the benchmark)
		h = delayed(h, *delay)
	}
	if *token != "" {
		h = authorized(h, "Bearer "+*token)
	}
	var downloads atomic.Int64
	serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if *resetEvery > 0 && r.Method == http.MethodGet && r.URL.Query().Get("alt") == "media" &&
			downloads.Add(1)%int64(*resetEvery) == 0 {
			reset(w, r, h)
			return
		}
		h.ServeHTTP(w, r)
	})
	if *tlsCert != "" {
		// httptest's certificate names 127.0.0.1; the client trusts the file written here
		ts := httptest.NewUnstartedServer(serve)
		ts.StartTLS()
		cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
		if err := os.WriteFile(*tlsCert, cert, 0o644); err != nil {
			log.Fatalf("gcsserver: write the certificate: %v", err)
		}
		fmt.Println(ts.URL)
		select {}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("http://" + ln.Addr().String())
	log.Fatal(http.Serve(ln, serve))
}

// reset answers r with its headers and half its body, then resets the
// connection: a link that fails mid-download.
func reset(w http.ResponseWriter, r *http.Request, h http.Handler) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	body := rec.Body.Bytes()
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Length: %d\r\n\r\n", rec.Code, http.StatusText(rec.Code), len(body))
	buf.Write(body[:len(body)/2])
	buf.Flush()
	time.Sleep(10 * time.Millisecond)
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
}

// largeWrites gives h's body copies 1 MiB writes. fake-gcs-server sends
// an object with io.Copy, which goes to the socket in 32 KiB writes: 2 of
// the server's 3 CPU seconds per 2 GB went to those syscalls' switches
// (perf), taken from the reader sharing the machine. GCS's own servers
// cost the reader's machine nothing.
func largeWrites(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(copier{w}, r)
	})
}

type copier struct{ http.ResponseWriter }

var copyBufs = sync.Pool{New: func() any { return make([]byte, 1<<20) }}

// ReadFrom copies src to the response in 1 MiB writes.
func (c copier) ReadFrom(src io.Reader) (int64, error) {
	buf := copyBufs.Get().([]byte)
	defer copyBufs.Put(buf)
	return io.CopyBuffer(struct{ io.Writer }{c.ResponseWriter}, src, buf)
}

// Unwrap lets http.ResponseController reach the connection.
func (c copier) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// delayed serves h after d, as a network round trip would.
func delayed(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			h.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	})
}

// authorized serves h to requests bearing the header Authorization: want,
// and answers the others 401 as GCS does for a missing or expired token.
func authorized(h http.Handler, want string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != want {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"code":401,"message":"Invalid Credentials"}}`)
			return
		}
		h.ServeHTTP(w, r)
	})
}
