package convert

import (
	"context"
	"fmt"
	"os"

	"github.com/prep-dev/prep/formats"
)

// Fetch reads one input whole, as the pipeline's fetch stage does.
func Fetch(ctx context.Context, e Entry) (*Input, error) { return fetch(ctx, e, nil) }

// ConvertItem makes the samples of one item, copy c of input e read into
// in, exactly as a run does: the handler with the item's own generator,
// then the keys and sources the sink gives them. prep plan measures with
// it and prep inspect --rebuild re-converts with it.
func ConvertItem(ctx context.Context, h Handler, e Entry, in *Input, c, copies int, seed uint64) ([]formats.Sample, error) {
	samples, err := h.Samples(ctx, in, c, NewRand(seed, e.Key, c))
	if err != nil {
		return nil, err
	}
	for i := range samples {
		stamp(&samples[i], e, c, copies)
	}
	return samples, nil
}

// stamp gives a sample of copy c of input e the key and source it is
// written under.
func stamp(s *formats.Sample, e Entry, c, copies int) {
	s.Key = CopyKey(s.Key, c, copies)
	if s.Source == "" {
		s.Source = e.Src.URI(e.Key)
	}
}

// fetch reads one input whole, or, for a PathHandler h and a local file,
// only opens it: a missing or unreadable file fails here, as a read would.
func fetch(ctx context.Context, e Entry, h Handler) (*Input, error) {
	rc, err := e.Src.Open(ctx, e.Key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if path := e.Src.LocalPath(e.Key); path != "" {
		if _, ok := h.(PathHandler); ok {
			return &Input{Key: e.Key, Source: e.Src.URI(e.Key), Label: e.Label, Path: path}, nil
		}
	}
	var size int64
	if st, ok := rc.(interface{ Stat() (os.FileInfo, error) }); ok {
		if fi, err := st.Stat(); err == nil {
			size = fi.Size()
		}
	}
	data, err := readAll(rc, size)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return &Input{Key: e.Key, Source: e.Src.URI(e.Key), Label: e.Label, Data: data, Path: e.Src.LocalPath(e.Key)}, nil
}
