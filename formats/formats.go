// Package formats defines the data model shared by every decoder and shard
// writer: a Sample is a keyed, labelled set of named dense tensors.
package formats

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"math"
	"strconv"
	"strings"
)

// MaxDeflateRatio bounds what deflate can expand to (about 1032:1): a
// reader checks a size claimed beside deflated data against it before it
// allocates.
const MaxDeflateRatio = 1032

// ErrIncompatible marks a sample that a shard writer cannot take next to
// the samples already in the shard (other fields, dtype or audio rate).
// The shard stays valid; the pipeline stops the run, naming the sample.
var ErrIncompatible = errors.New("incompatible sample")

// DType names an element type the way numpy spells it ("uint8", "float32").
type DType string

// Element types understood by the shard writers.
const (
	Bool       DType = "bool"
	Int8       DType = "int8"
	Int16      DType = "int16"
	Int32      DType = "int32"
	Int64      DType = "int64"
	Uint8      DType = "uint8"
	Uint16     DType = "uint16"
	Uint32     DType = "uint32"
	Uint64     DType = "uint64"
	Float16    DType = "float16"
	Float32    DType = "float32"
	Float64    DType = "float64"
	Complex64  DType = "complex64"
	Complex128 DType = "complex128"
)

// Size returns the element size in bytes, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case Bool, Int8, Uint8:
		return 1
	case Int16, Uint16, Float16:
		return 2
	case Int32, Uint32, Float32:
		return 4
	case Int64, Uint64, Float64, Complex64:
		return 8
	case Complex128:
		return 16
	}
	return 0
}

// Tensor is a dense array in C order with little-endian elements.
type Tensor struct {
	DType DType
	Shape []int
	Data  []byte
}

// Len returns the number of elements the shape describes.
func (t Tensor) Len() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Validate checks that Data holds exactly Shape × itemsize bytes. As
// numpy does, it refuses a negative dimension and a shape whose non-zero
// dimensions times the item size overflow, empty or not: a decoder of
// untrusted bytes may read either (an npy member of shape (-2, -3) and 6
// bytes, or (2^62, 4, 0) and none, have the right product), and what
// consumes a tensor trusts its shape.
func (t Tensor) Validate() error {
	if t.DType.Size() == 0 {
		return fmt.Errorf("unknown dtype %q", t.DType)
	}
	want, err := t.DType.ArrayBytes(t.Shape)
	if err != nil {
		return err
	}
	if want != len(t.Data) {
		return fmt.Errorf("shape %v of %s needs %d bytes, have %d", t.Shape, t.DType, want, len(t.Data))
	}
	return nil
}

// ArrayBytes returns the bytes an array of d of the given shape holds. As
// numpy does, it refuses a negative dimension and a shape whose non-zero
// dimensions times the item size overflow an int, empty or not.
func (d DType) ArrayBytes(shape []int) (int, error) {
	n, zero := d.Size(), false
	for _, dim := range shape {
		switch {
		case dim < 0:
			return 0, fmt.Errorf("shape %v has a negative dimension", shape)
		case dim == 0:
			zero = true
		case n > math.MaxInt/dim:
			return 0, fmt.Errorf("shape %v of %s is too large for any array", shape, d)
		default:
			n *= dim
		}
	}
	if zero {
		return 0, nil
	}
	return n, nil
}

// SameShape reports whether a and b have equal dtype and shape.
func SameShape(a, b Tensor) bool {
	if a.DType != b.DType || len(a.Shape) != len(b.Shape) {
		return false
	}
	for i := range a.Shape {
		if a.Shape[i] != b.Shape[i] {
			return false
		}
	}
	return true
}

// Field is one named tensor of a sample; each name becomes a dataset (HDF5)
// or a member suffix (tar).
type Field struct {
	Name string
	Tensor
}

// RaggedSuffixes end the names of the datasets an HDF5 shard adds beside a
// ragged field F: F_offsets, F_shapes and F_ranks.
var RaggedSuffixes = []string{"_offsets", "_shapes", "_ranks"}

// DataField is the name of a sample's primary tensor.
const DataField = "data"

// NoLabel marks an unlabelled sample.
const NoLabel int64 = -1

// Sample is one record of a shard.
type Sample struct {
	Key    string         // unique, stable id: the input key plus copy/frame suffixes
	Source string         // where the input came from (path or URI)
	Label  int64          // class index, or NoLabel
	Fields []Field        // Fields[0] is the primary tensor
	Rate   int            // audio sample rate in Hz; 0 for non-audio samples
	Params map[string]any // augmentation parameters drawn for this sample
}

// Bytes returns the payload size of all fields.
func (s *Sample) Bytes() int64 {
	var n int64
	for _, f := range s.Fields {
		n += int64(len(f.Data))
	}
	return n
}

// Field returns the named field, or nil.
func (s *Sample) Field(name string) *Field {
	for i := range s.Fields {
		if s.Fields[i].Name == name {
			return &s.Fields[i]
		}
	}
	return nil
}

// ShardWriter collects the samples of one shard. Close finishes the file
// under its temporary name, renames it to its final name and describes it;
// Abort removes whatever was written. Exactly one of them must be called.
//
// Add copies what it keeps of s: once it returns, the caller may reuse the
// sample's tensor bytes for another sample.
type ShardWriter interface {
	Add(s *Sample) error
	Close() (ShardInfo, error)
	Abort() error
}

// Expecter is implemented by shard writers whose layout depends on the
// shard's length: Expect tells them, before the first Add, how many
// samples the shard is planned to hold, so that they can lay the file out
// up front and stream samples into it (HDF5), or at least size their
// buffers once rather than grow them by copying. It is a hint; more or
// fewer samples may come.
type Expecter interface {
	Expect(samples int)
}

// ShardMeta is what a writer records about the run inside each shard.
type ShardMeta struct {
	Version string
	Recipe  string
	Seed    uint64
	Classes []string
}

// ShardFormat creates shard writers of one file format.
type ShardFormat interface {
	Name() string // "hdf5", "png", "wav"
	Ext() string  // file extension including the dot: ".h5", ".tar"
	Create(path string, meta ShardMeta) (ShardWriter, error)
}

// ShardInfo describes a finished shard file.
type ShardInfo struct {
	File     string        `json:"file"` // base name
	Count    int           `json:"count"`
	Bytes    int64         `json:"bytes"`
	SHA256   string        `json:"sha256"`
	Datasets []DatasetInfo `json:"datasets,omitempty"`
	// CRC32C is the Castagnoli CRC32C, 8 hex digits: the checksum Cloud
	// Storage keeps per object, so --resume checks a remote shard without
	// downloading it.
	CRC32C string `json:"crc32c,omitempty"`
}

// Sums computes a shard's checksums in one pass over its bytes, as a
// writer writes them or reads them back.
type Sums struct {
	sha hash.Hash
	crc hash.Hash32
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// NewSums returns Sums of no bytes.
func NewSums() *Sums { return &Sums{sha: sha256.New(), crc: crc32.New(castagnoli)} }

func (s *Sums) Write(p []byte) (int, error) {
	s.sha.Write(p)
	return s.crc.Write(p)
}

// Fill records the sums in info.
func (s *Sums) Fill(info *ShardInfo) {
	info.SHA256 = hex.EncodeToString(s.sha.Sum(nil))
	info.CRC32C = fmt.Sprintf("%08x", s.crc.Sum32())
}

// DatasetInfo locates one dataset inside a shard so readers can stream it
// with plain reads at Offset.
type DatasetInfo struct {
	Name   string `json:"name"`
	DType  DType  `json:"dtype"`
	Shape  []int  `json:"shape"`
	Offset int64  `json:"offset"` // byte offset in the file; -1 when not contiguous
	Size   int64  `json:"size"`   // bytes
}

// TempName is the name a shard is written under until it is complete.
func TempName(path string) string { return path + ".tmp" }

// SpillName is the name of scratch file k that a shard writer keeps beside
// path's TempName while the shard is written ("shard-000001.h5.tmp.spill0"):
// bytes it would otherwise hold in memory until it can lay the shard out.
// IsTemp knows the name, so a killed run's scratch files are removed with
// its temp files.
func SpillName(path string, k int) string { return TempName(path) + ".spill" + strconv.Itoa(k) }

// LayoutName is the name of the scratch file a shard writer lays a shard
// out in again beside path's TempName ("shard-000001.h5.tmp.layout") when
// fewer samples came than it planned for. IsTemp knows it too.
func LayoutName(path string) string { return TempName(path) + ".layout" }

// IsTemp reports whether name (a base name or a slash-separated key) is a
// file prep is still writing: one of its own files (IsPrepFile) under its
// TempName, or a scratch file beside one (SpillName). Other files that end
// in .tmp belong to someone else and are left alone.
func IsTemp(name string) bool {
	base := name[strings.LastIndexByte(name, '/')+1:]
	if i := strings.LastIndex(base, ".spill"); i >= 0 && isDigits(base[i+len(".spill"):]) {
		base = base[:i]
	} else {
		base = strings.TrimSuffix(base, ".layout")
	}
	stem, ok := strings.CutSuffix(base, ".tmp")
	return ok && IsPrepFile(stem)
}

// isDigits reports whether s is one or more decimal digits.
func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// IsPrepFile reports whether base is the final name of a file prep
// writes: a shard ("shard-000012.h5"), the manifest, a task's manifest
// part ("manifest-task-00003.json"), a progress file
// (".prep-progress.json", ".prep-progress-task-00003.json") or the list
// of a run's inputs ("inputs.jsonl.gz"). Anything else, even a
// "shard-notes.txt", is the user's.
func IsPrepFile(base string) bool {
	if ext, ok := numbered(base, "shard-", 6); ok {
		return len(ext) > 1 && ext[0] == '.' && !strings.Contains(ext[1:], ".")
	}
	if rest, ok := numbered(base, "manifest-task-", 5); ok {
		return rest == ".json"
	}
	if rest, ok := numbered(base, ".prep-progress-task-", 5); ok {
		return rest == ".json"
	}
	return base == "manifest.json" || base == ".prep-progress.json" || base == "inputs.jsonl.gz"
}

// numbered reports whether name is prefix followed by at least digits
// decimal digits, and returns what follows them.
func numbered(name, prefix string, digits int) (rest string, ok bool) {
	rest, ok = strings.CutPrefix(name, prefix)
	if !ok {
		return "", false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	return rest[i:], i >= digits
}
