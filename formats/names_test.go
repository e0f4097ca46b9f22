package formats

import "testing"

// TestIsTemp: prep's temp files and the scratch files beside them are
// its own (a run removes a killed run's), and nothing else is, however
// much it looks like them.
func TestIsTemp(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"shard-000001.h5.tmp", true},
		{"manifest.json.tmp", true},
		{"dst/shard-000001.h5.tmp", true},
		{SpillName("shard-000001.h5", 0), true},
		{SpillName("dst/shard-1000000.h5", 12), true},
		{"shard-000001.h5.tmp.spill", false},   // no number
		{"shard-000001.h5.tmp.spill0x", false}, // not a number
		{"shard-000001.h5.spill0", false},      // not beside a temp file
		{"shard-000001.h5", false},             // finished
		{"backup.tmp", false},
		{"backup.tmp.spill0", false},
		{"shard-1.h5.tmp.spill0", false}, // too few digits: the user's
		{"shard-000001.h5.tmp.spill0.tmp", false},
		{LayoutName("dst/shard-000001.h5"), true},
		{"shard-000001.h5.layout", false},            // not beside a temp file
		{"shard-000001.h5.tmp.spill0.layout", false}, // one suffix at most
	} {
		if got := IsTemp(tc.name); got != tc.want {
			t.Errorf("IsTemp(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got, want := SpillName("d/shard-000003.h5", 2), "d/shard-000003.h5.tmp.spill2"; got != want {
		t.Errorf("SpillName = %q, want %q", got, want)
	}
}
