package imgdec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary serve as its own decoding child, as prep
// does (cmd/prep's main). Three settings, read in the child, make it fail
// on purpose: PREP_TEST_UNSCREENED hands libheif the files heifRefLoop
// refuses, so that it crashes; PREP_TEST_SLOW_HEIF makes each HEIF decode
// take that long; PREP_TEST_LIAR makes it answer nonsense (lie).
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		screenHEIF = os.Getenv("PREP_TEST_UNSCREENED") != "1"
		if d, err := time.ParseDuration(os.Getenv("PREP_TEST_SLOW_HEIF")); err == nil {
			f := otherFormats["heif"]
			decode := f.decode
			f.decode = func(data []byte, w, h int) (*image.NRGBA, bool, error) {
				time.Sleep(d)
				return decode(data, w, h)
			}
			otherFormats["heif"] = f
		}
		if os.Getenv("PREP_TEST_LIAR") == "1" {
			lie()
		}
		ChildMain()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// lie answers each request as a child taken over by a crafted file
// could: an image of 2^31 × 2^31 pixels, not in the shared memory.
func lie() {
	for {
		var req [17]byte
		if _, err := io.ReadFull(os.Stdin, req[:]); err != nil {
			os.Exit(0)
		}
		io.CopyN(io.Discard, os.Stdin, int64(binary.BigEndian.Uint64(req[9:])))
		hdr := [12]byte{replyImage}
		binary.BigEndian.PutUint32(hdr[1:], 1<<31)
		binary.BigEndian.PutUint32(hdr[5:], 1<<31)
		hdr[9], hdr[10] = 8, 1
		os.Stdout.Write(hdr[:])
	}
}

// isolate turns isolation on for the test, with the settings the children
// get from the environment, and ends it and its children after.
func isolate(t testing.TB, env ...string) *childPool {
	t.Helper()
	for i := 0; i+1 < len(env); i += 2 {
		t.Setenv(env[i], env[i+1])
	}
	Isolate()
	p := isolation.Load()
	t.Cleanup(func() {
		isolation.Store(nil)
		if p != nil { // nil in a build without cgo
			p.close()
		}
	})
	return p
}

// seed reads one of the files under testdata/seeds.
func seed(t testing.TB, name string) []byte {
	t.Helper()
	return readFile(t, filepath.Join("testdata", "seeds", name))
}

// TestIsolatedDecode: a child decodes HEIC, AVIF and JPEG XL to the same
// pixels and Info as this process, and refuses what this process refuses
// with the same words, from 4 decodes at once.
func TestIsolatedDecode(t *testing.T) {
	needTurbo(t)
	var inputs [][]byte
	for _, name := range []string{"s.heic", "s.avif", "s.jxl"} {
		data := seed(t, name)
		inputs = append(inputs, data, data[:len(data)*2/3])
	}
	inputs = append(inputs, []byte("\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic"))
	type result struct {
		pix  []byte
		info Info
		err  string
	}
	decode := func(data []byte, limit int64) result {
		img, info, err := Decode(data, Options{MaxPixels: limit})
		if err != nil {
			return result{info: info, err: err.Error()}
		}
		defer Release(img)
		if img.Stride != 4*img.Rect.Dx() {
			t.Errorf("stride %d for %v", img.Stride, img.Rect)
		}
		return result{pix: bytes.Clone(img.Pix), info: info}
	}
	var want []result
	for _, limit := range []int64{0, 50} { // 12×8 is over 50 pixels
		for _, data := range inputs {
			want = append(want, decode(data, limit))
		}
	}
	if want[0].err != "" || want[len(inputs)].err == "" {
		t.Fatalf("in process: %q, over the limit: %q", want[0].err, want[len(inputs)].err)
	}

	p := isolate(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range want {
				k := (i + g) % len(want)
				got := decode(inputs[k%len(inputs)], []int64{0, 50}[k/len(inputs)])
				if !bytes.Equal(got.pix, want[k].pix) || got.info != want[k].info || got.err != want[k].err {
					t.Errorf("input %d in a child: %v %q, in process: %v %q", k, got.info, got.err, want[k].info, want[k].err)
				}
			}
		})
	}
	wg.Wait()
	if n := p.size(); n < 1 || n > 4 {
		t.Errorf("%d children for 4 decodes at once", n)
	}
}

// TestIsolatedCrash: libheif, given an item reference loop, crashes its
// child, not this process, and a second child; the file is refused with
// why, and the next file gets a new child.
func TestIsolatedCrash(t *testing.T) {
	needTurbo(t)
	good, loop, _ := loopedHEIC(t)
	isolate(t, "PREP_TEST_UNSCREENED", "1")
	_, _, err := Decode(loop, Options{})
	const want = "corrupt HEIF: libheif crashed decoding it, twice (exit status 2: SIGSEGV: segmentation violation); the file is damaged or made to crash decoders: check it with heif-convert, or leave it out"
	if err == nil || err.Error() != want {
		t.Errorf("looped HEIC: %v\nwant %s", err, want)
	}
	img, _, err := Decode(good, Options{})
	if err != nil {
		t.Fatalf("the seed after a crash: %v", err)
	}
	Release(img)
}

// TestIsolatedSignals: a child ignores SIGINT and SIGTERM (Ctrl-C reaches
// the whole process group; the parent decides), and a child killed from
// outside mid-decode, as by the OOM killer, costs a retry in a new child,
// not the file.
func TestIsolatedSignals(t *testing.T) {
	needTurbo(t)
	p := isolate(t, "PREP_TEST_SLOW_HEIF", "600ms")
	heic := seed(t, "s.heic")
	want, _, err := Decode(heic, Options{}) // starts the child
	if err != nil {
		t.Fatal(err)
	}
	defer Release(want)
	pid := p.idle[0].cmd.Process.Pid
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || string(comm) != childName+"\n" {
		t.Errorf("the child's name: %q, %v; want %s", comm, err, childName)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		c := p.idle[0]
		time.AfterFunc(200*time.Millisecond, func() { c.cmd.Process.Signal(sig) })
		img, _, err := Decode(heic, Options{})
		if err != nil || !bytes.Equal(img.Pix, want.Pix) {
			t.Fatalf("%v mid-decode: %v", sig, err)
		}
		Release(img)
		if now := p.idle[0].cmd.Process.Pid; (now == pid) != (sig != syscall.SIGKILL) {
			t.Errorf("after %v the child is %d, was %d", sig, now, pid)
		}
	}
}

// TestIsolatedTimeout: a child that does not answer in childTimeout is
// stopped, its file refused, and the next file decoded.
func TestIsolatedTimeout(t *testing.T) {
	needTurbo(t)
	defer func(d time.Duration) { childTimeout = d }(childTimeout)
	childTimeout = time.Second // a start under -race on a slow machine fits in it
	isolate(t, "PREP_TEST_SLOW_HEIF", "4s")
	_, _, err := Decode(seed(t, "s.heic"), Options{})
	if err == nil || !strings.HasPrefix(err.Error(), "corrupt HEIF: libheif did not finish decoding it in 1s") {
		t.Errorf("slow HEIC: %v", err)
	}
	img, _, err := Decode(seed(t, "s.avif"), Options{}) // AVIF is not slowed
	if err != nil {
		t.Fatalf("the next file: %v", err)
	}
	Release(img)
}

// close ends the idle children: their stdin closes, and they exit.
func (p *childPool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, c := range idle {
		c.in.Close()
		<-c.done
		c.mem.close()
	}
}

// size is the number of idle children.
func (p *childPool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// TestIsolatedLiar: what a child answers is checked as a file would be: a
// size over the pixel limit, or not in the shared memory, is refused,
// nothing of it allocated.
func TestIsolatedLiar(t *testing.T) {
	needTurbo(t)
	isolate(t, "PREP_TEST_LIAR", "1")
	for _, limit := range []int64{0, -1} {
		if img, _, err := Decode(seed(t, "s.heic"), Options{MaxPixels: limit}); err == nil || !strings.HasPrefix(err.Error(), "corrupt HEIF: libheif crashed decoding it, twice (signal: killed)") {
			t.Errorf("limit %d: %v, %v", limit, img != nil, err)
		}
	}
}

// TestSharedMemorySealed: the memory a child writes its images to can
// grow but not shrink, so the parent never reads a page cut off under it.
func TestSharedMemorySealed(t *testing.T) {
	if !sharedMemory {
		t.Skip("no shared memory on this system: decodes stay in process")
	}
	m, err := newShm()
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	child, err := m.view(3<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	child[len(child)-1] = 7
	if err := m.f.Truncate(1 << 20); err == nil {
		t.Error("the shared memory shrank")
	}
	parent := &shm{f: m.f}
	if view, err := parent.view(3<<20, false); err != nil || view[len(view)-1] != 7 {
		t.Errorf("the parent's view: %v", err)
	}
	parent.unmap()
}

// TestIsolatedStartFails: a child that cannot be started stops the run
// (the error is Fatal, for convert.IsFatal) and names the way out, rather
// than refusing every HEIF file as damaged.
func TestIsolatedStartFails(t *testing.T) {
	needTurbo(t)
	isolate(t)
	isolation.Store(&childPool{exe: filepath.Join(t.TempDir(), "gone")})
	_, _, err := Decode(seed(t, "s.heic"), Options{})
	var f interface{ Fatal() bool }
	if err == nil || !errors.As(err, &f) || !f.Fatal() ||
		!strings.HasPrefix(err.Error(), "HEIF, AVIF and JPEG XL files are decoded in child processes, and one could not be started: ") ||
		!strings.HasSuffix(err.Error(), "set PREP_DECODE_IN_PROCESS=1)") {
		t.Errorf("Decode: %v", err)
	}
	t.Setenv(inProcessEnv, "1")
	Isolate()
	if Isolated() {
		t.Errorf("%s=1: still isolated", inProcessEnv)
	}
}
