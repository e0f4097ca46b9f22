package imgdec

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Why isolate: libheif 1.15 and libjxl 0.7 (Debian 12) are C libraries
// that a damaged or crafted file can crash. FuzzHEIFJXL found two item
// reference loops on which libheif recursed until the stack ran out,
// taking the whole process with it; prep now refuses those, but cannot
// read every file as libheif does. A crash in the converting process
// would end a run of a million photos at one file, without naming it, and
// --resume would meet the same file again. So once Isolate is called,
// HEIF, AVIF and JPEG XL files are decoded in child processes (the same
// executable, started with PREP_IMGDEC_CHILD=1): a child that dies or
// hangs costs its one file, refused by name, and the next decode starts a
// new one. JPEG, PNG and WebP stay in process: libjpeg-turbo, libpng and
// libwebp have been fuzzed for years, and they are most of any dataset.
//
// A child decodes one file at a time; there are as many as decodes run at
// once (the CPU workers), each started on first need and kept. The file
// goes to the child through its stdin and the answer comes back through
// its stdout, the pixels through memory the two share (a memfd): through
// the pipe they cost a fifth of an AVIF decode (docs/PERFORMANCE.md).
// Only Linux has both memfd and the machines prep runs on; elsewhere the
// decodes stay in process.

const (
	childEnv     = "PREP_IMGDEC_CHILD"      // marks a process started as a decoding child
	childName    = "prep-decode"            // a child's argv[0] and process name
	selfExe      = "/proc/self/exe"         // what a child runs
	inProcessEnv = "PREP_DECODE_IN_PROCESS" // =1: no children
)

// isolatedFormats are the formats decoded in children, by their index in
// the protocol.
var isolatedFormats = []string{"heif", "avif", "jxl"}

// childTimeout bounds one decode in a child: a 100-Mpixel AVIF takes
// seconds, so a child still busy after this is stuck.
var childTimeout = 2 * time.Minute

var isolation atomic.Pointer[childPool]

// Isolate makes HEIF, AVIF and JPEG XL decodes run in child processes
// that run this executable, whose main must call ChildMain first thing.
// They start from /proc/self/exe, the very file this process runs even if
// a new prep was installed over it meanwhile. A build without cgo, which
// refuses those files, starts none.
//
// PREP_DECODE_IN_PROCESS=1 keeps them in process, for a system where a
// child cannot be started (the error says so); so does a system without
// /proc.
func Isolate() {
	var p *childPool
	if _, err := os.Stat(selfExe); err == nil && cDecoders && sharedMemory && os.Getenv(inProcessEnv) != "1" {
		p = &childPool{exe: selfExe}
	}
	isolation.Store(p)
}

// startError is a child that could not be started: the machine's fault,
// not the file's, so it stops a conversion (convert.IsFatal) rather than
// refusing every HEIF file.
type startError struct{ err error }

func (e startError) Error() string {
	return fmt.Sprintf("HEIF, AVIF and JPEG XL files are decoded in child processes, and one could not be started: %v (to decode them in prep's own process instead, where a file that crashes libheif or libjxl ends the run, set %s=1)", e.err, inProcessEnv)
}

func (e startError) Unwrap() error { return e.err }

// Fatal marks the error for convert.IsFatal.
func (startError) Fatal() bool { return true }

// Isolated reports whether decodes run in child processes.
func Isolated() bool { return isolation.Load() != nil }

// ChildMain serves decodes on stdin and stdout and reports true when this
// process was started as a decoding child (the caller then exits);
// otherwise it returns false at once.
func ChildMain() bool {
	if os.Getenv(childEnv) != "1" {
		return false
	}
	// A child lives as long as its stdin: Ctrl-C, or a SIGTERM sent to
	// the whole job, must not end it mid-decode and have its file
	// refused; the parent stops on them, and its children with it.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	nameChild()
	if err := serveChild(os.Stdin, os.Stdout, &shm{f: os.NewFile(3, "shared memory")}); err != nil {
		fmt.Fprintln(os.Stderr, "prep decoding child:", err)
		os.Exit(1)
	}
	return true
}

// The protocol, one exchange per file:
//
//	request: format index (1 byte), maxPixels (int64), length (uint64), the file
//	reply:   kind (1 byte), Info's Width and Height (uint32), ScaleNum,
//	         Orientation and Opaque (1 byte each), then for replyError the
//	         message's length (uint32) and the message; for replyImage the
//	         Width·Height·4 bytes of NRGBA are at the start of the shared
//	         memory (file descriptor 3 in the child)
const (
	replyImage = 0
	replyError = 1
)

func serveChild(r io.Reader, w io.Writer, mem *shm) error {
	in := bufio.NewReaderSize(r, 1<<16)
	out := bufio.NewWriterSize(w, 1<<16)
	var data []byte
	for {
		var req [17]byte
		if _, err := io.ReadFull(in, req[:]); err == io.EOF {
			return nil // the parent is done
		} else if err != nil {
			return err
		}
		if int(req[0]) >= len(isolatedFormats) {
			return fmt.Errorf("unknown format %d", req[0])
		}
		n := binary.BigEndian.Uint64(req[9:])
		if n > uint64(len(data)) {
			data = make([]byte, n)
		}
		if _, err := io.ReadFull(in, data[:n]); err != nil {
			return err
		}
		maxPixels := int64(binary.BigEndian.Uint64(req[1:]))
		img, info, err := decodeOther(isolatedFormats[req[0]], data[:n], maxPixels, Info{})
		var hdr [16]byte
		binary.BigEndian.PutUint32(hdr[1:], uint32(info.Width))
		binary.BigEndian.PutUint32(hdr[5:], uint32(info.Height))
		hdr[9], hdr[10] = byte(info.ScaleNum), byte(info.Orientation)
		if info.Opaque {
			hdr[11] = 1
		}
		if err != nil {
			hdr[0] = replyError
			binary.BigEndian.PutUint32(hdr[12:], uint32(len(err.Error())))
			out.Write(hdr[:])
			out.WriteString(err.Error())
		} else {
			view, err := mem.view(len(img.Pix), true)
			if err != nil {
				return err
			}
			copy(view, img.Pix) // decodeOther's images are w×h with stride 4w
			Release(img)
			hdr[0] = replyImage
			out.Write(hdr[:12])
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
}

// childPool keeps the idle children.
type childPool struct {
	exe  string
	mu   sync.Mutex
	idle []*child
}

// decode decodes data of format in a child.
func (p *childPool) decode(format string, data []byte, maxPixels int64, info Info) (*image.NRGBA, Info, error) {
	for try := 1; ; try++ {
		c, err := p.get()
		if err != nil {
			return nil, info, err
		}
		img, got, err := c.decode(format, data, maxPixels, info)
		var gone *childGone
		if !errors.As(err, &gone) {
			p.put(c)
			return img, got, err
		}
		c.kill()
		// A child can also be killed from outside (the OOM killer takes
		// the largest process): a second child tells that from a file
		// that crashes the library each time.
		if gone.timeout || try == 2 {
			return nil, got, fmt.Errorf("corrupt %s: %s", otherFormats[format].name, gone.why(format))
		}
	}
}

func (p *childPool) get() (*child, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	c, err := startChild(p.exe)
	if err != nil {
		return nil, startError{err}
	}
	return c, nil
}

func (p *childPool) put(c *child) {
	p.mu.Lock()
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// child is one decoding process.
type child struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	mem    *shm
	stderr *headBuffer   // the start of what it wrote during the current decode
	done   chan struct{} // closed once the process is waited for
}

func startChild(exe string) (*child, error) {
	cmd := exec.Command(exe)
	cmd.Args[0] = childName // what ps and top show, rather than "exe"
	cmd.Env = append(os.Environ(), childEnv+"=1")
	mem, err := newShm()
	if err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, mem: mem, stderr: &headBuffer{max: 4 << 10}, done: make(chan struct{})}
	cmd.Stderr = c.stderr
	cmd.ExtraFiles = []*os.File{mem.f}
	in, err := cmd.StdinPipe()
	if err != nil {
		mem.close()
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		mem.close()
		in.Close()
		return nil, fmt.Errorf("%s: %w", exe, err)
	}
	c.in, c.out = in, bufio.NewReaderSize(out, 1<<16)
	// A child ends when its stdin closes: when the pool kills it, or when
	// this process ends, however it ends. Wait reaps it; the goroutine
	// ends with it.
	go func() {
		cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// childGone is a child that died or was stopped during a decode.
type childGone struct {
	c       *child
	timeout bool
}

func (g *childGone) Error() string { return "the decoding process ended" }

// why words the end of a child for a refused file.
func (g *childGone) why(format string) string {
	lib := "libheif"
	if format == "jxl" {
		lib = "libjxl"
	}
	if g.timeout {
		return fmt.Sprintf("%s did not finish decoding it in %v (a damaged file can make it loop): check it with %s, or leave it out", lib, childTimeout, checkTool(format))
	}
	<-g.c.done
	how := g.c.cmd.ProcessState.String() // "exit status 2", "signal: killed"
	if first, _, _ := strings.Cut(strings.TrimSpace(g.c.stderr.String()), "\n"); first != "" {
		how += ": " + first // Go's crash report starts "SIGSEGV: segmentation violation"
	}
	return fmt.Sprintf("%s crashed decoding it, twice (%s); the file is damaged or made to crash decoders: check it with %s, or leave it out", lib, how, checkTool(format))
}

func checkTool(format string) string {
	if format == "jxl" {
		return "djxl"
	}
	return "heif-convert"
}

func (c *child) decode(format string, data []byte, maxPixels int64, info Info) (*image.NRGBA, Info, error) {
	var req [17]byte
	req[0] = byte(slices.Index(isolatedFormats, format))
	binary.BigEndian.PutUint64(req[1:], uint64(maxPixels))
	binary.BigEndian.PutUint64(req[9:], uint64(len(data)))
	c.stderr.Reset()
	var timedOut atomic.Bool
	watchdog := time.AfterFunc(childTimeout, func() {
		timedOut.Store(true)
		c.cmd.Process.Kill()
	})
	defer watchdog.Stop()
	gone := func() error { return &childGone{c: c, timeout: timedOut.Load()} }

	if _, err := c.in.Write(req[:]); err != nil {
		return nil, info, gone()
	}
	if _, err := c.in.Write(data); err != nil {
		return nil, info, gone()
	}
	var hdr [16]byte
	if _, err := io.ReadFull(c.out, hdr[:12]); err != nil {
		return nil, info, gone()
	}
	info.Width, info.Height = int(binary.BigEndian.Uint32(hdr[1:])), int(binary.BigEndian.Uint32(hdr[5:]))
	info.ScaleNum, info.Orientation, info.Opaque = int(hdr[9]), int(hdr[10]), hdr[11] == 1
	// What a child says is checked as a file would be: a file that took
	// over libheif could make its child say anything.
	switch {
	case hdr[0] == replyError:
		if _, err := io.ReadFull(c.out, hdr[12:]); err != nil {
			return nil, info, gone()
		}
		n := binary.BigEndian.Uint32(hdr[12:])
		if n > 64<<10 {
			return nil, info, gone()
		}
		msg := make([]byte, n)
		if _, err := io.ReadFull(c.out, msg); err != nil {
			return nil, info, gone()
		}
		return nil, info, errors.New(string(msg))
	case hdr[0] != replyImage || checkSize(info.Width, info.Height, maxPixels) != nil ||
		uint64(info.Width)*uint64(info.Height) > 1<<40: // --max-pixels -1
		c.cmd.Process.Kill()
		return nil, info, gone()
	}
	view, err := c.mem.view(4*info.Width*info.Height, false)
	if err != nil {
		c.cmd.Process.Kill()
		return nil, info, gone()
	}
	img := newNRGBA(info.Width, info.Height)
	copy(img.Pix, view)
	return img, info, nil
}

// kill ends a child that failed and waits for it.
func (c *child) kill() {
	c.cmd.Process.Kill()
	c.in.Close()
	<-c.done
	c.mem.close()
}

// headBuffer keeps the first max bytes written to it: the start of a
// child's crash report, which names the signal.
type headBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (t *headBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := t.max - t.b.Len(); room > 0 {
		t.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (t *headBuffer) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Reset()
}

func (t *headBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
