package tarshard

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"

	"github.com/prep-dev/prep/formats"
)

// Open opens a tar shard for reading; layout is not used (a tar has no
// arrays at fixed offsets). Shards of PNG and of WAV open alike.
func (f format) Open(path string, layout []formats.DatasetInfo) (formats.ShardReader, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &reader{path: path, f: file}, nil
}

// reader is an open tar shard.
type reader struct {
	path string
	f    *os.File
}

func (r *reader) Close() error                 { return r.f.Close() }
func (r *reader) Spans() []formats.DatasetInfo { return nil }
func (r *reader) Count() int                   { return -1 }

// errStop ends a Read the iterator's caller left.
var errStop = errors.New("stop")

// Samples decodes the shard's samples in archive order. A sample whose
// members do not decode (a PNG with a bad CRC) is yielded with its key
// and the error (which names the sample, not the file), and the iteration goes on if the caller does; damage
// to the archive itself ends it.
func (r *reader) Samples() iter.Seq2[*formats.Sample, error] {
	return func(yield func(*formats.Sample, error) bool) {
		if _, err := r.f.Seek(0, 0); err != nil {
			yield(nil, err)
			return
		}
		err := Read(r.f, func(stem string, members map[string][]byte) error {
			s, err := Decode(stem, members)
			if err != nil {
				s = formats.Sample{Key: keyOf(stem, members), Label: formats.NoLabel}
			}
			if !yield(&s, err) {
				return errStop
			}
			return nil
		})
		if err != nil && err != errStop {
			yield(nil, fmt.Errorf("%s: %w", r.path, err))
		}
	}
}

// keyOf is a sample's key: the one its json member records, else its stem.
func keyOf(stem string, members map[string][]byte) string {
	var m struct {
		Key formats.Name `json:"key"`
	}
	if js, ok := members["json"]; ok && json.Unmarshal(js, &m) == nil && m.Key != "" {
		return string(m.Key)
	}
	return stem
}
