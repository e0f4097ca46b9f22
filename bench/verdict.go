package bench

import (
	"fmt"
	"math"
	"strconv"
)

// Verdict says whether a feed rate meets what a training step needs.
type Verdict struct {
	Need     float64 `json:"need"` // samples/s; 0 when not given
	OK       bool    `json:"ok"`
	Headroom float64 `json:"headroom"` // delivered / need
	Idle     float64 `json:"idle"`     // share of time the GPU would wait for input
	Text     string  `json:"text"`
}

// advice names what to do when a stage limits the feed.
var advice = map[string]string{
	StageRead:       "add readers (--readers), move the shards to local NVMe, or keep them in the page cache",
	StageReadCached: "add readers (--readers), or move the shards to local NVMe; --direct measures the disk alone",
	StageDecode:     "decoding PNG/WAV is CPU-bound: convert to HDF5 shards (prep convert --format hdf5), which need no decoding, or add cores",
	StageAssemble:   "add readers (--readers) to spread the copies into pinned buffers over more cores",
	StageCopy:       "the host-to-device link is the limit: check its PCIe generation and width (prep gpu-watch), keep batches in pinned memory, send uint8 and convert on the GPU",
}

// Judge compares a feed result with need samples/s (0: no requirement).
func Judge(r *FeedResult, need float64) Verdict {
	v := Verdict{Need: need, OK: true}
	if need <= 0 {
		v.Text = fmt.Sprintf("delivered %s samples/s; give --need or --step to judge", Commas(r.SamplesPerSec))
	} else {
		v.Headroom = r.SamplesPerSec / need
		v.OK = v.Headroom >= 1
		if v.OK {
			v.Text = fmt.Sprintf("can feed %s samples/s, %.1f× headroom", Commas(need), v.Headroom)
		} else {
			v.Idle = 1 - v.Headroom
			v.Text = fmt.Sprintf("input-bound: the GPU would idle %.0f%%", 100*v.Idle)
			if st := r.stage(r.Limit); st != nil {
				v.Text += fmt.Sprintf("; limiting stage: %s at %s (busy %.0f%%); %s", st.Name, Rate(st.Rate), 100*st.Busy, advice[st.Name])
			}
		}
	}
	if !r.GPU {
		v.Text += " (measured into host memory, not a GPU)"
	}
	return v
}

// Rate prints bytes per second as MB/s below 1 GB/s and GB/s above.
func Rate(bps float64) string {
	if bps >= 1e9 {
		return fmt.Sprintf("%.1f GB/s", bps/1e9)
	}
	return fmt.Sprintf("%.0f MB/s", bps/1e6)
}

// Commas rounds x and groups its digits by thousands: 5400.2 → "5,400".
func Commas(x float64) string {
	s := strconv.FormatInt(int64(math.Round(x)), 10)
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
