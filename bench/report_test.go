package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestFeedTextPlurals: one batch, sample or buffer reads in the singular.
func TestFeedTextPlurals(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want []string
	}{
		{1, []string{" in 1 pinned buffer, ", "delivered 1 sample in 1 batch: "}},
		{2, []string{" in 2 pinned buffers, ", "delivered 2 samples in 2 batches: "}},
	} {
		r := &FeedResult{Device: "host", Batch: 1, Slots: tt.n, Samples: tt.n, Batches: tt.n, Readers: 1}
		var out bytes.Buffer
		if err := r.WriteText(&out, Verdict{Text: "ok"}); err != nil {
			t.Fatal(err)
		}
		for _, w := range tt.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%d: %q lacks %q", tt.n, out.String(), w)
			}
		}
	}
}
