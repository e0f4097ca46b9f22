package ffmpeg

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
)

// FrameOptions choose which frames Frames delivers.
type FrameOptions struct {
	FPS       float64 // resample to this rate (ffmpeg's fps filter); 0 keeps every decoded frame
	Every     int     // keep every Nth frame (after FPS), starting with the first; 0 or 1 keeps all
	MaxFrames int     // stop after this many frames; 0 for no limit
	// ShortSide scales each frame down, keeping its aspect ratio, so that
	// its shorter side is ShortSide (the longer truncated to a whole
	// pixel, as prep's resize does); frames already that small are left
	// alone. 0 keeps the decoded size.
	ShortSide int
	// CropW and CropH, with ShortSide, scale every frame to a shorter side
	// of exactly ShortSide (enlarging small ones too) and cut the centred
	// CropW×CropH window, its offsets (size-crop)/2 rounded half to even:
	// prep's resize=ShortSide,crop=CropWxCropH. Both at most ShortSide.
	CropW, CropH int
	// MaxFrameBytes refuses frames of more RGB bytes (width × height × 3)
	// than this, from the first frame's header and before its memory is
	// taken, with a *FrameTooLargeError; 0: no bound. PPM
	// allows 65536×65536 frames, 12 GiB each.
	MaxFrameBytes int64
	// Buffer, when set, gives the memory each frame is read into, n
	// bytes: the frame's RGB is then the caller's to keep, and no copy
	// is needed. Without it, one buffer is reused for every frame.
	Buffer func(n int) []byte
}

// Frame is one decoded video frame.
type Frame struct {
	// Index is the frame's position in the stream after the FPS filter:
	// with Every 5 the frames are 0, 5, 10, ...
	Index         int
	Width, Height int
	// RGB holds Height rows of Width×3 bytes. Unless FrameOptions.Buffer
	// gave it, it is reused for the next frame: copy what you keep.
	RGB []byte
}

// Frames decodes the first video stream of the file at path to 8-bit RGB
// and calls fn for each frame in order. A cover picture (a stream with
// the attached_pic disposition, as music .mp4/.m4a and .mp3 files carry)
// is no video stream. An error from fn stops decoding
// and is returned as is.
//
// ffmpeg writes the frames as binary PPM (P6) images, a raw RGB frame
// behind a header of about 15 bytes: the frame size comes with the
// frames, so no ffprobe run is needed first (it would cost as much as
// decoding a short clip), and rotated videos come out at the size ffmpeg
// gives them after auto-rotation. Every frame must have the size of the
// first. w and h are that size.
func Frames(ctx context.Context, path string, opt FrameOptions, fn func(Frame) error) (w, h int, err error) {
	if opt.FPS < 0 || opt.Every < 0 || opt.MaxFrames < 0 {
		return 0, 0, fmt.Errorf("ffmpeg frames: FPS, Every and MaxFrames must not be negative, have %v, %d, %d", opt.FPS, opt.Every, opt.MaxFrames)
	}
	legacy := legacyVsync.Load()
	w, h, err = frames(ctx, path, opt, fn, legacy)
	var fe *Error
	if !legacy && errors.As(err, &fe) && strings.Contains(fe.Reason, "Unrecognized option 'fps_mode'") {
		// ffmpeg before 5.1: it refused the options, so fn saw no frame.
		legacyVsync.Store(true)
		w, h, err = frames(ctx, path, opt, fn, true)
	}
	return w, h, err
}

// legacyVsync records that this ffmpeg predates -fps_mode (5.1), so
// frame-rate passthrough is asked for with -vsync, which newer versions
// deprecate and drop.
var legacyVsync atomic.Bool

// frames is one ffmpeg run of Frames.
func frames(ctx context.Context, path string, opt FrameOptions, fn func(Frame) error, legacy bool) (w, h int, err error) {
	run, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd, stderr, err := command(run, "ffmpeg", frameArgs(path, opt, legacy)...)
	if err != nil {
		return 0, 0, err
	}
	stdout, err := start(cmd, path)
	if err != nil {
		return 0, 0, err
	}
	fr := frameReader{r: bufio.NewReaderSize(stdout, 64<<10)}
	n, readErr := fr.each(ctx, opt, fn)
	if readErr != nil {
		cancel() // stop ffmpeg: nobody reads its output any more
	}
	waitErr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return fr.w, fr.h, fmt.Errorf("ffmpeg %s: %w", path, ctx.Err())
	case errors.Is(readErr, errCallback):
		return fr.w, fr.h, readErr.(callbackError).err
	case errors.As(readErr, new(*FrameTooLargeError)):
		return fr.w, fr.h, &Error{Path: path, Reason: readErr.Error(), Err: readErr}
	case waitErr != nil:
		return fr.w, fr.h, runError(path, stderr, waitErr)
	case readErr != nil:
		return fr.w, fr.h, &Error{Path: path, Reason: readErr.Error(), Err: readErr}
	case n == 0:
		r := reason(stderr.b, path)
		if r == "" {
			r = "no video frames decoded"
		}
		return 0, 0, &Error{Path: path, Reason: r}
	case len(bytes.TrimSpace(stderr.b)) > 0 && !(opt.MaxFrames > 0 && n == opt.MaxFrames):
		// ffmpeg runs at -v error and exits 0 on a file cut off or damaged
		// midway, having decoded what came before: its log is the only sign
		// that frames are missing. (A run stopped at MaxFrames may not have
		// reached the damage; what it delivered is whole.)
		return fr.w, fr.h, &Error{Path: path, Err: ErrIncomplete,
			Reason: fmt.Sprintf("video cut off or damaged: %d frames decoded, then ffmpeg reported: %s", n, reason(stderr.b, path))}
	}
	return fr.w, fr.h, nil
}

// FrameTooLargeError is frames over FrameOptions.MaxFrameBytes.
type FrameTooLargeError struct {
	Width, Height int
	Max           int64 // MaxFrameBytes
}

// Bytes is one frame's RGB bytes.
func (e *FrameTooLargeError) Bytes() int64 { return int64(e.Width) * int64(e.Height) * 3 }

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("frames of %dx%d are %d bytes as RGB, over the limit of %d", e.Width, e.Height, e.Bytes(), e.Max)
}

// ErrIncomplete marks a video that ffmpeg decoded only in part: it exited
// 0 but logged errors (a file cut off, damaged packets).
var ErrIncomplete = errors.New("incomplete decode")

// frameArgs is ffmpeg's command line for Frames.
func frameArgs(path string, opt FrameOptions, legacy bool) []string {
	args := []string{"-nostdin", "-v", "error", "-i", fileURL(path),
		// V, not v: video streams other than cover pictures.
		"-map", "0:V:0", "-an", "-sn", "-dn"}
	var filters []string
	if opt.FPS > 0 {
		filters = append(filters, "fps="+strconv.FormatFloat(opt.FPS, 'g', -1, 64))
	}
	if opt.Every > 1 {
		// Dropping frames in the filter graph spares ffmpeg their RGB
		// conversion and the pipe.
		filters = append(filters, fmt.Sprintf(`select=not(mod(n\,%d))`, opt.Every))
	}
	if opt.CropW > 0 && opt.CropH > 0 {
		filters = append(filters, CropFilter(opt.ShortSide, opt.CropW, opt.CropH))
	} else {
		filters = append(filters, ScaleFilter(opt.ShortSide), "format=rgb24")
	}
	args = append(args, "-vf", strings.Join(filters, ","))
	if opt.MaxFrames > 0 {
		args = append(args, "-frames:v", strconv.Itoa(opt.MaxFrames))
	}
	// passthrough: deliver the frames the filters produce, neither
	// duplicated nor dropped to fit a constant rate (ffmpeg's default for
	// image2pipe).
	sync := "-fps_mode"
	if legacy {
		sync = "-vsync"
	}
	return append(args, sync, "passthrough",
		"-pix_fmt", "rgb24", "-c:v", "ppm", "-f", "image2pipe", "-")
}

// swsFlags make swscale's conversion to RGB (and its scaling) the same on
// every CPU: bitexact keeps it off the SIMD paths whose rounding differs
// from its C code, accurate_rnd and full_chroma_int off the fast
// approximations. Bilinear is a tent filter as wide as the scale factor,
// as prep's own resampler uses.
const swsFlags = "bilinear+accurate_rnd+full_chroma_int+bitexact"

// CropFilter is the filter chain Frames uses for ShortSide short and a
// crop of w×h: scale to a shorter side of short, up or down, convert to
// RGB, cut the centred window.
func CropFilter(short, w, h int) string {
	// (size-crop)/2 rounded half to even: k = trunc(d/2), plus 1 when d is
	// odd and k is.
	off := func(size string, crop int) string {
		d := fmt.Sprintf("(%s-%d)", size, crop)
		return fmt.Sprintf("trunc(%s/2)+mod(%s\\,2)*mod(trunc(%s/2)\\,2)", d, d, d)
	}
	return fmt.Sprintf("scale=w='%s':h='%s':flags=%s,format=rgb24,crop=w=%d:h=%d:x='%s':y='%s':exact=1",
		side("iw", "ih", short), side("ih", "iw", short), swsFlags, w, h, off("iw", w), off("ih", h))
}

// side is the expression for the side a of an a×b frame scaled to a
// shorter side of short: short, or trunc(a×short/b), multiplied before
// divided, exactly the size prep's resize=short computes.
func side(a, b string, short int) string {
	return fmt.Sprintf("if(lte(%s\\,%s)\\,%d\\,trunc(%s*%d/%s))", a, b, short, a, short, b)
}

// ScaleFilter is the scale filter Frames uses to convert each frame to
// RGB and, with short > 0, to shrink it to a shorter side of short: the
// same conversion for a comparison with ffmpeg run on its own.
func ScaleFilter(short int) string {
	if short <= 0 {
		return "scale=flags=" + swsFlags
	}
	// Frames already that small are left alone; on the shrunk ones the
	// resize is a copy.
	small := fmt.Sprintf("lte(min(iw\\,ih)\\,%d)", short)
	w := fmt.Sprintf("if(%s\\,iw\\,%s)", small, side("iw", "ih", short))
	h := fmt.Sprintf("if(%s\\,ih\\,%s)", small, side("ih", "iw", short))
	return fmt.Sprintf("scale=w='%s':h='%s':flags=%s", w, h, swsFlags)
}

// errCallback marks an error returned by the caller's function.
var errCallback = errors.New("callback failed")

type callbackError struct{ err error }

func (e callbackError) Error() string        { return e.err.Error() }
func (e callbackError) Is(target error) bool { return target == errCallback }

// frameReader reads ffmpeg's stream of PPM frames into one buffer.
type frameReader struct {
	r    *bufio.Reader
	w, h int
	buf  []byte
}

// each reads frames until EOF or opt.MaxFrames and passes them to fn; it
// returns how many it passed.
func (fr *frameReader) each(ctx context.Context, opt FrameOptions, fn func(Frame) error) (int, error) {
	step := max(opt.Every, 1)
	n := 0
	for opt.MaxFrames == 0 || n < opt.MaxFrames {
		w, h, err := fr.header()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("frame %d: %w", n, err)
		}
		if fr.w == 0 {
			if tl := (&FrameTooLargeError{Width: w, Height: h, Max: opt.MaxFrameBytes}); tl.Max > 0 && tl.Bytes() > tl.Max {
				return n, tl
			}
			fr.w, fr.h = w, h
		} else if w != fr.w || h != fr.h {
			return n, fmt.Errorf("frame %d is %dx%d, the first frame was %dx%d; frames of one video must have one size", n, w, h, fr.w, fr.h)
		}
		switch {
		case opt.Buffer != nil:
			fr.buf = opt.Buffer(w * h * 3)
		case fr.buf == nil:
			fr.buf = make([]byte, w*h*3)
		}
		if _, err := io.ReadFull(fr.r, fr.buf); err != nil {
			return n, fmt.Errorf("frame %d: %w", n, noEOF(err))
		}
		if ctx.Err() != nil {
			return n, ctx.Err() // frames already in the pipe are not wanted
		}
		if err := fn(Frame{Index: n * step, Width: w, Height: h, RGB: fr.buf}); err != nil {
			return n, callbackError{err}
		}
		n++
	}
	return n, nil
}

// header reads one "P6 <w> <h> 255" header and the single whitespace byte
// after it. It returns io.EOF only at a clean end of the stream.
func (fr *frameReader) header() (w, h int, err error) {
	magic, err := fr.r.Peek(2)
	if err == io.EOF && len(magic) == 0 {
		return 0, 0, io.EOF
	}
	if err != nil || string(magic) != "P6" {
		return 0, 0, errors.New("ffmpeg's output is not a PPM frame")
	}
	fr.r.Discard(2)
	var v [3]int
	for i := range v {
		if v[i], err = fr.int(); err != nil {
			return 0, 0, err
		}
	}
	if v[2] != 255 {
		return 0, 0, fmt.Errorf("PPM frame with maximum value %d, want 255 (8-bit RGB)", v[2])
	}
	if v[0] <= 0 || v[1] <= 0 || v[0] > 1<<16 || v[1] > 1<<16 {
		return 0, 0, fmt.Errorf("PPM frame of %dx%d pixels", v[0], v[1])
	}
	return v[0], v[1], nil
}

// int skips whitespace, reads a decimal number and consumes the one
// whitespace byte that ends it.
func (fr *frameReader) int() (int, error) {
	c, err := fr.r.ReadByte()
	for err == nil && isSpace(c) {
		c, err = fr.r.ReadByte()
	}
	v, digits := 0, 0
	for err == nil && c >= '0' && c <= '9' && digits < 9 {
		v = v*10 + int(c-'0')
		digits++
		c, err = fr.r.ReadByte()
	}
	if err != nil {
		return 0, fmt.Errorf("PPM header: %w", noEOF(err))
	}
	if digits == 0 || !isSpace(c) {
		return 0, errors.New("malformed PPM header")
	}
	return v, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// noEOF turns io.EOF inside a frame into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
