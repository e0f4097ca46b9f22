package tarshard

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/wav"
)

// MaxMember bounds a member's size, so a corrupt header cannot ask for an
// absurd allocation.
const MaxMember = 4 << 30

// Read streams a WebDataset tar and calls fn once per sample, in archive
// order, with the sample's key (the member name up to the first dot of its
// base name) and its members by extension ("png", "0003.png", "cls",
// "json"). Members of one sample must be adjacent, as WebDataset requires.
//
// The map and the byte slices are valid until fn returns: they are
// reused for the next sample (see Scanner), so fn must copy whatever it
// keeps.
func Read(r io.Reader, fn func(key string, members map[string][]byte) error) error {
	var s Scanner
	return s.Scan(&readerChunks{r: r, buf: make([]byte, readChunk)}, fn)
}

// readChunk is the size of Read's reads.
const readChunk = 1 << 20

// readerChunks is a Chunker over a reader. It hands out full chunks, but
// for the last, so every header lies whole and aligned in one.
type readerChunks struct {
	r   io.Reader
	buf []byte
	err error // to return once the data read with it is handed out
}

func (c *readerChunks) Chunk() ([]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	n, err := io.ReadFull(c.r, c.buf)
	switch {
	case err == io.ErrUnexpectedEOF:
		c.err = io.EOF
	case err != nil:
		c.err = err
	}
	if n == 0 {
		return nil, c.err
	}
	return c.buf[:n], nil
}

// Decode rebuilds a sample from the members Read passes to fn. The primary
// field is named formats.DataField: images come back as (H,W,C), clips as
// (T,H,W,C) and audio as (frames, channels), mono included. Further
// fields follow in name order. Tensors never alias members.
func Decode(key string, members map[string][]byte) (formats.Sample, error) {
	s := formats.Sample{Key: key, Label: formats.NoLabel}
	if js, ok := members["json"]; ok {
		var m meta
		if err := json.Unmarshal(js, &m); err != nil {
			return s, fmt.Errorf("sample %s: json: %w", key, err)
		}
		s.Key, s.Source, s.Label, s.Params = string(m.Key), string(m.Source), m.Label, m.Params
	}
	if cls, ok := members["cls"]; ok {
		l, err := strconv.ParseInt(strings.TrimSpace(string(cls)), 10, 64)
		if err != nil {
			return s, fmt.Errorf("sample %s: cls: %w", key, err)
		}
		s.Label = l
	}
	var (
		primary formats.Tensor
		err     error
		frames  []string
		extra   []string
	)
	for ext := range members {
		switch {
		case ext == "png":
			primary, err = decodePNG(members[ext])
		case ext == "wav":
			primary, s.Rate, err = wav.DecodeBytes(members[ext])
		case isFrame(ext):
			frames = append(frames, ext)
		case strings.HasSuffix(ext, ".npy"):
			extra = append(extra, ext)
		}
		if err != nil {
			return s, fmt.Errorf("sample %s: %s: %w", key, ext, err)
		}
	}
	if len(frames) > 0 {
		if primary, err = decodeClip(members, frames); err != nil {
			return s, fmt.Errorf("sample %s: %w", key, err)
		}
	}
	if primary.DType == "" {
		return s, fmt.Errorf("sample %s has no png or wav member", key)
	}
	s.Fields = append(s.Fields, formats.Field{Name: formats.DataField, Tensor: primary})
	slices.Sort(extra)
	for _, ext := range extra {
		t, err := decodeNpy(members[ext])
		if err != nil {
			return s, fmt.Errorf("sample %s: %s: %w", key, ext, err)
		}
		t.Data = slices.Clone(t.Data)
		s.Fields = append(s.Fields, formats.Field{Name: strings.TrimSuffix(ext, ".npy"), Tensor: t})
	}
	return s, nil
}

// isFrame reports whether ext names a clip frame ("0007.png").
func isFrame(ext string) bool {
	n, ok := strings.CutSuffix(ext, ".png")
	if !ok || n == "" {
		return false
	}
	for _, c := range []byte(n) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func decodeClip(members map[string][]byte, frames []string) (formats.Tensor, error) {
	slices.Sort(frames) // zero-padded: name order is frame order
	var clip formats.Tensor
	for i, ext := range frames {
		if n, _ := strconv.Atoi(strings.TrimSuffix(ext, ".png")); n != i {
			return clip, fmt.Errorf("clip frame %s out of sequence, want frame %d", ext, i)
		}
		f, err := decodePNG(members[ext])
		if err != nil {
			return clip, fmt.Errorf("%s: %w", ext, err)
		}
		if i == 0 {
			clip = formats.Tensor{DType: f.DType, Shape: append([]int{len(frames)}, f.Shape...)}
			clip.Data = make([]byte, 0, len(frames)*len(f.Data))
		} else if !slices.Equal(f.Shape, clip.Shape[1:]) {
			return clip, fmt.Errorf("clip frame %s is %v, frame 0 is %v", ext, f.Shape, clip.Shape[1:])
		}
		clip.Data = append(clip.Data, f.Data...)
	}
	return clip, nil
}

// Summary describes a shard file, for prep inspect.
type Summary struct {
	formats.ShardInfo               // file, sample count, size and checksum, as in the manifest
	Members           []string      // the first sample's member kinds, sorted; clip frames as "NNNN.png"
	Key               string        // the first sample's key
	DType             formats.DType // the first sample's primary field
	Shape             []int
	Rate              int // audio sample rate, or 0
}

// Describe reads a whole shard, checksumming it on the way, and decodes its
// first sample.
func Describe(name string) (Summary, error) {
	var sum Summary
	f, err := os.Open(name)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	sums := formats.NewSums()
	h := hashWriter{w: io.Discard, h: sums}
	tee := io.TeeReader(f, &h)
	err = Read(tee, func(key string, members map[string][]byte) error {
		sum.Count++
		if sum.Count > 1 {
			return nil
		}
		for ext := range members {
			if isFrame(ext) {
				ext = "NNNN.png"
			}
			if !slices.Contains(sum.Members, ext) {
				sum.Members = append(sum.Members, ext)
			}
		}
		slices.Sort(sum.Members)
		s, err := Decode(key, members)
		if err != nil {
			return err
		}
		sum.Key, sum.Rate = s.Key, s.Rate
		sum.DType, sum.Shape = s.Fields[0].DType, s.Fields[0].Shape
		return nil
	})
	if err != nil {
		return sum, fmt.Errorf("%s: %w", name, err)
	}
	// Read stops at the end-of-archive marker; hash the rest too.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return sum, fmt.Errorf("%s: %w", name, err)
	}
	sum.File = filepath.Base(name)
	sum.Bytes = h.n
	sums.Fill(&sum.ShardInfo)
	return sum, nil
}

// hashWriter hashes and counts the bytes on their way to w.
type hashWriter struct {
	w io.Writer
	h io.Writer // a hash
	n int64
}

func (h *hashWriter) Write(p []byte) (int, error) {
	n, err := h.w.Write(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}
