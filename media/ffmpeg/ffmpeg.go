// Package ffmpeg decodes video frames and audio by running the ffmpeg and
// ffprobe programs and reading their output through pipes. It never links
// ffmpeg's libraries: a process per file keeps crashes and leaks of a
// codec out of the converter, and every ffmpeg build works.
//
// Every process belongs to the call that starts it: it runs in its own
// process group, is killed with it when the context ends or the call stops
// early, and is always waited for.
package ffmpeg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// ErrNoFFmpeg reports that ffmpeg (or ffprobe) is not installed.
var ErrNoFFmpeg = errors.New(`ffmpeg not found on PATH: install it with "apt-get install ffmpeg" (or make deps)`)

// notFound is ErrNoFFmpeg naming the program that is missing. It is fatal
// for a conversion: no other file will decode either.
type notFound struct{ name string }

func (e notFound) Error() string {
	return strings.Replace(ErrNoFFmpeg.Error(), "ffmpeg", e.name, 1)
}
func (e notFound) Is(target error) bool { return target == ErrNoFFmpeg }
func (e notFound) Fatal() bool          { return true }

// Error is a run of ffmpeg or ffprobe that failed on an input file.
type Error struct {
	// Path is the input file. Callers may relabel it, or clear it where
	// the message is shown beside the file's name already.
	Path   string
	Reason string // ffmpeg's own message: the last lines of its stderr
	Err    error  // the exit status, or the read error
}

func (e *Error) Error() string {
	where := "ffmpeg"
	if e.Path != "" {
		where += " " + e.Path
	}
	if h := hint(e.Reason); h != "" {
		return fmt.Sprintf("%s (%s: %s)", h, where, e.Reason)
	}
	return where + ": " + e.Reason
}

// hints put ffmpeg's most common complaints about a file in plain words:
// what is wrong with it, and so what to do.
var hints = []struct{ marker, hint string }{
	{"moov atom not found", "cut off: the MP4/MOV index (moov atom) is missing; copy or download the file again"},
	{"Decoder (codec none) not found", "damaged header: it names no codec ffmpeg can decode; re-encode or remove the file"},
	{"Not yet implemented in FFmpeg", "damaged header, or an encoding ffmpeg does not decode; re-encode or remove the file"},
	{"no 'data' tag found", "damaged WAV: its header ends before the audio data; re-encode or remove the file"},
	{"Invalid data found when processing input", "not a media file ffmpeg can read, or its header is damaged; check it with ffprobe"},
}

// hint is the plain-words hint for an ffmpeg reason, or "".
func hint(reason string) string {
	for _, h := range hints {
		if strings.Contains(reason, h.marker) {
			return h.hint
		}
	}
	return ""
}
func (e *Error) Unwrap() error { return e.Err }

// Check reports whether ffmpeg and ffprobe are on PATH, so that a run can
// refuse media inputs before it creates anything.
func Check() error {
	for _, name := range []string{"ffmpeg", "ffprobe"} {
		if _, err := exec.LookPath(name); err != nil {
			if errors.Is(err, exec.ErrNotFound) {
				return notFound{name}
			}
			return fmt.Errorf("find %s: %w", name, err)
		}
	}
	return nil
}

// waitDelay bounds how long Wait waits for the pipes after ffmpeg was
// killed (a grandchild could hold them open).
const waitDelay = 5 * time.Second

// command prepares name (ffmpeg or ffprobe) with args. The process is
// killed, with its whole process group, when ctx ends. Stderr keeps the
// tail of what the program writes there, for error messages.
func command(ctx context.Context, name string, args ...string) (*exec.Cmd, *tail, error) {
	// Looked up on every call, not once: PATH can change, and the lookup is
	// a few stat calls next to a process start.
	bin, err := exec.LookPath(name)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, nil, notFound{name}
		}
		return nil, nil, fmt.Errorf("find %s: %w", name, err)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	ownProcessGroup(cmd)
	cmd.WaitDelay = waitDelay
	stderr := &tail{max: 4 << 10}
	cmd.Stderr = stderr
	return cmd, stderr, nil
}

// start starts cmd, run on path, with its output on a pipe of pipeBytes
// where the system allows (frames and samples come faster than Linux's
// 64 KiB pipe lets ffmpeg and the reader take turns), and returns the
// pipe's reading end.
func start(cmd *exec.Cmd, path string) (io.ReadCloser, error) {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("ffmpeg %s: %w", path, err)
	}
	if f, ok := stdout.(*os.File); ok {
		widenPipe(f)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("ffmpeg %s: %w", path, err)
	}
	return stdout, nil
}

// fileURL names a local file to ffmpeg so that no part of its name is
// read as a protocol ("a:b.mp4") or an option ("-x.mp4").
func fileURL(path string) string { return "file:" + path }

// tail is an io.Writer that keeps the last max bytes written to it. Only
// exec's copying goroutine writes, and it is done once Wait returns.
type tail struct {
	b   []byte
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// address matches the "[mov,mp4 @ 0x55d0c0a1b2c0] " prefix of ffmpeg's
// log lines; the pointer changes from run to run.
var address = regexp.MustCompile(`\[([^\]@]*?) @ 0x[0-9a-f]+\] `)

// reason turns ffmpeg's stderr into a one-line message: its last two
// distinct lines, without pointers or the input path (the caller names
// the file), so the same broken file always gives the same message.
func reason(stderr []byte, path string) string {
	var lines []string
	for _, l := range strings.Split(string(bytes.TrimSpace(stderr)), "\n") {
		l = strings.TrimSpace(l)
		l = strings.TrimPrefix(l, fileURL(path)+": ")
		l = address.ReplaceAllString(l, "[$1] ")
		l = strings.ReplaceAll(l, fileURL(path), "input")
		if l != "" && (len(lines) == 0 || lines[len(lines)-1] != l) {
			lines = append(lines, l)
		}
	}
	if len(lines) > 2 {
		lines = lines[len(lines)-2:]
	}
	return strings.Join(lines, "; ")
}

// runError explains why a run on path failed: ffmpeg's own words when it
// said anything, else err itself.
func runError(path string, stderr *tail, err error) error {
	r := reason(stderr.b, path)
	if r == "" {
		r = err.Error()
	}
	return &Error{Path: path, Reason: r, Err: err}
}
