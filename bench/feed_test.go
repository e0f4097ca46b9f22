package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prep-dev/prep/bench/gpu"
	"github.com/prep-dev/prep/formats/tarshard"
)

func TestFeedHDF5(t *testing.T) {
	dir := t.TempDir()
	m := writeHDF5(t, dir, 3, 40, 24, 32)
	shards := findShards(t, dir)
	want := make(map[string]string)
	var dataBytes int64
	for _, s := range m.Shards {
		d := s.Datasets[0]
		if d.Name != "data" {
			t.Fatalf("first dataset %s", d.Name)
		}
		path := filepath.Join(dir, s.File)
		want[s.File] = fileSHA(t, path, d.Offset, d.Size)
		if py := pySHA(t, path, "data")["data"]; py != want[s.File] {
			t.Fatalf("%s: h5py's data differs from the bytes at the manifest's offset", s.File)
		}
		dataBytes += d.Size
	}
	for _, tc := range []struct {
		name string
		opt  FeedOptions
	}{
		{"one-reader", FeedOptions{Batch: 16}},
		{"two-readers-direct", FeedOptions{Batch: 16, Readers: 2, Direct: true, Slots: 2}},
		{"batch-larger-than-shard", FeedOptions{Batch: 1000, Readers: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := tc.opt
			opt.Device = gpu.NewHost()
			opt.Verify = true
			opt.Chunk = 2 * align
			res, err := Feed(context.Background(), shards, opt)
			if err != nil {
				t.Fatal(err)
			}
			if res.Bytes != dataBytes || res.Samples != 120 || res.GPU || res.Device != "host memory (no GPU)" {
				t.Fatalf("delivered %d bytes of %d samples to %q, want %d bytes of 120", res.Bytes, res.Samples, res.Device, dataBytes)
			}
			batches := 3 * ((40 + opt.Batch - 1) / opt.Batch)
			if res.Batches != batches {
				t.Errorf("%d batches, want %d", res.Batches, batches)
			}
			for file, sum := range want {
				if res.DeviceSHA256[file] != sum {
					t.Errorf("%s: device-side sha256 %s, shard data %s", file, res.DeviceSHA256[file], sum)
				}
			}
			if res.LinkGBps <= 0 || len(res.Stages) != 3 || res.Limit == "" {
				t.Errorf("link %v, stages %+v, limit %q", res.LinkGBps, res.Stages, res.Limit)
			}
			var out bytes.Buffer
			if err := res.WriteText(&out, Judge(res, 0)); err != nil {
				t.Fatal(err)
			}
			if res.DeviceKind != KindHost || res.Telemetry != nil {
				t.Errorf("device kind %q, telemetry %+v", res.DeviceKind, res.Telemetry)
			}
			for _, s := range []string{"device: host memory (no GPU)\n", "24×32×3 uint8", "(measured into host memory, not a GPU)",
				"\nhost memcpy limit (no GPU), same run: ", "\nGPU telemetry: none (host memory)\n"} {
				if !strings.Contains(out.String(), s) {
					t.Errorf("report lacks %q:\n%s", s, out.String())
				}
			}
		})
	}
}

func TestFeedTar(t *testing.T) {
	dir := t.TempDir()
	m := writeTar(t, dir, 2, 7, 20, 30)
	shards := findShards(t, dir)
	want := make(map[string]string)
	for _, s := range m.Shards {
		f, err := os.Open(filepath.Join(dir, s.File))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		err = tarshard.Read(f, func(key string, members map[string][]byte) error {
			smp, err := tarshard.Decode(key, members)
			h.Write(smp.Fields[0].Data)
			return err
		})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		want[s.File] = hex.EncodeToString(h.Sum(nil))
	}
	res, err := Feed(context.Background(), shards, FeedOptions{Device: gpu.NewHost(), Batch: 3, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Samples != 14 || res.Bytes != 14*20*30*3 || res.Batches != 6 || res.Sample.String() != "20×30×3 uint8" {
		t.Fatalf("%d samples, %d bytes, %d batches of %v", res.Samples, res.Bytes, res.Batches, res.Sample)
	}
	for file, sum := range want {
		if res.DeviceSHA256[file] != sum {
			t.Errorf("%s: device-side sha256 differs from the decoded pixels", file)
		}
	}
	if res.stage(StageDecode) == nil {
		t.Error("no decode stage for tar shards")
	}
}

// steadyGPU is a Sampler that always reads the same.
type steadyGPU struct {
	mu  sync.Mutex
	n   int
	err error // returned instead of a sample
}

func (g *steadyGPU) Sample() (gpu.Sample, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n++
	if g.err != nil {
		return gpu.Sample{}, g.err
	}
	return gpu.Sample{Util: 40, PCIeRX: 12.5e9, MemUsed: 3 << 30, Link: gpu.Link{Gen: 5, Width: 16}}, nil
}

func TestFeedTelemetry(t *testing.T) {
	dir := t.TempDir()
	writeHDF5(t, dir, 2, 20, 16, 16)
	shards := findShards(t, dir)
	for _, tc := range []struct {
		name  string
		err   error
		lines []string
	}{
		{"steady", nil, []string{
			"GPU telemetry, 1 samples every 1h0m0s: utilization mean 40%, peak 40%; PCIe RX mean 12.5 GB/s, peak 12.5 GB/s; memory used peak 3.0 GiB; PCIe Gen5 x16\n"}},
		{"sampler fails", errors.New("NVML: GPU is lost"), []string{"GPU telemetry: none (sampling failed: NVML: GPU is lost)\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &steadyGPU{err: tc.err}
			// An interval longer than the run: the one sample taken as
			// feeding starts is all there is, whatever the machine's speed.
			res, err := Feed(context.Background(), shards, FeedOptions{Device: gpu.NewHost(), Batch: 8, Sampler: g, SampleEvery: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			tel := res.Telemetry
			if tc.err != nil {
				if tel == nil || tel.Samples != 0 || tel.Error != tc.err.Error() {
					t.Fatalf("telemetry %+v", tel)
				}
			} else if tel == nil || tel.Samples != 1 || tel.MeanUtil != 40 || tel.PeakPCIeRX != 12.5e9 || tel.PeakMemUsed != 3<<30 || tel.Link != (gpu.Link{Gen: 5, Width: 16}) {
				t.Fatalf("telemetry %+v", tel)
			}
			var out bytes.Buffer
			if err := res.WriteText(&out, Judge(res, 0)); err != nil {
				t.Fatal(err)
			}
			for _, l := range tc.lines {
				if !strings.Contains(out.String(), "\n"+l) {
					t.Errorf("report lacks %q:\n%s", l, out.String())
				}
			}
			js, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			fields := []string{`"device_kind":"host"`, `"interval":"1h0m0s"`}
			if tc.err == nil {
				fields = append(fields, `"peak_util":40`, `"link":{"gen":5,"width":16}`)
			}
			for _, f := range fields {
				if !strings.Contains(string(js), f) {
					t.Errorf("JSON lacks %s: %s", f, js)
				}
			}
		})
	}
}

func TestJudge(t *testing.T) {
	stages := func(limit string) *FeedResult {
		r := &FeedResult{GPU: true, SamplesPerSec: 1460, Limit: limit, Stages: []Stage{
			{Name: StageRead, Busy: 0.97, Rate: 380e6},
			{Name: StageAssemble, Busy: 0.1, Rate: 4e9},
			{Name: StageCopy, Busy: 0.05, Rate: 24.5e9},
		}}
		return r
	}
	host := stages(StageRead)
	host.GPU = false
	for _, tc := range []struct {
		name string
		r    *FeedResult
		need float64
		ok   bool
		text string
	}{
		{"no need", stages(StageRead), 0, true, "delivered 1,460 samples/s; give --need or --step to judge"},
		{"headroom", stages(StageRead), 429.4, true, "can feed 429 samples/s, 3.4× headroom"},
		{"exactly", stages(StageRead), 1460, true, "can feed 1,460 samples/s, 1.0× headroom"},
		{"disk", stages(StageRead), 2474.6, false, "input-bound: the GPU would idle 41%; limiting stage: disk read at 380 MB/s (busy 97%); " + advice[StageRead]},
		{"link", stages(StageCopy), 14600, false, "input-bound: the GPU would idle 90%; limiting stage: host-to-device copy at 24.5 GB/s (busy 5%); " + advice[StageCopy]},
		{"host", host, 100, true, "can feed 100 samples/s, 14.6× headroom (measured into host memory, not a GPU)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.r, tc.need)
			if v.OK != tc.ok || v.Text != tc.text {
				t.Errorf("got ok=%v %q\nwant ok=%v %q", v.OK, v.Text, tc.ok, tc.text)
			}
		})
	}
}

func TestCommas(t *testing.T) {
	for x, want := range map[float64]string{0: "0", 999.6: "1,000", 5400.2: "5,400", 1234567: "1,234,567", -12345: "-12,345"} {
		if got := Commas(x); got != want {
			t.Errorf("Commas(%v) = %q, want %q", x, got, want)
		}
	}
}

func TestFeedSummarize(t *testing.T) {
	for _, tc := range []struct {
		name     string
		readers  int
		bytes    int64
		linkGBps float64
		wall     time.Duration
		decode   bool
		stats    []feedStats
		samples  int
		perSec   float64
		gbps     float64
		stages   []Stage
		limit    string
	}{
		{"read-bound", 2, 2e9, 4, 2 * time.Second, false,
			[]feedStats{{read: time.Second, assemble: 250 * time.Millisecond, fileBytes: 1e9, samples: 100},
				{read: 3 * time.Second, assemble: 750 * time.Millisecond, fileBytes: 1e9, samples: 300}},
			400, 200, 1,
			[]Stage{{StageRead, 1, 1e9}, {StageAssemble, 0.25, 4e9}, {StageCopy, 0.25, 4e9}}, StageRead},
		{"decode-bound tar", 1, 4e8, 0.8, time.Second, true,
			[]feedStats{{read: 100 * time.Millisecond, decode: 800 * time.Millisecond, assemble: 50 * time.Millisecond, fileBytes: 1e8, decoded: 4e8, samples: 50}},
			50, 50, 0.4,
			[]Stage{{StageRead, 0.1, 1e9}, {StageDecode, 0.8, 5e8}, {StageAssemble, 0.05, 8e9}, {StageCopy, 0.5, 8e8}}, StageDecode},
		{"copy-bound", 2, 2e9, 2.5, time.Second, false,
			[]feedStats{{read: 200 * time.Millisecond, assemble: 100 * time.Millisecond, fileBytes: 1e9, samples: 10},
				{read: 200 * time.Millisecond, assemble: 100 * time.Millisecond, fileBytes: 1e9, samples: 10}},
			20, 20, 2,
			[]Stage{{StageRead, 0.2, 1e10}, {StageAssemble, 0.1, 2e10}, {StageCopy, 0.8, 2.5e9}}, StageCopy},
		// No clock and no link speed: nothing is busy, the first stage
		// of equals is named, and no rate divides by zero.
		{"no wall, no link", 1, 10, 0, 0, false,
			[]feedStats{{read: time.Second, fileBytes: 10, samples: 1}},
			1, 0, 0,
			[]Stage{{StageRead, 0, 10}, {StageAssemble, 0, 0}, {StageCopy, 0, 0}}, StageRead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &FeedResult{Readers: tc.readers, Bytes: tc.bytes, LinkGBps: tc.linkGBps}
			res.summarize(tc.stats, tc.wall, tc.decode, true)
			if res.Samples != tc.samples || res.Seconds != tc.wall.Seconds() || !near(res.SamplesPerSec, tc.perSec) || !near(res.GBps, tc.gbps) {
				t.Errorf("%d samples in %vs, %v samples/s, %v GB/s; want %d in %vs, %v samples/s, %v GB/s",
					res.Samples, res.Seconds, res.SamplesPerSec, res.GBps, tc.samples, tc.wall.Seconds(), tc.perSec, tc.gbps)
			}
			if len(res.Stages) != len(tc.stages) {
				t.Fatalf("stages %+v, want %+v", res.Stages, tc.stages)
			}
			for i, want := range tc.stages {
				if got := res.Stages[i]; got.Name != want.Name || !near(got.Busy, want.Busy) || !near(got.Rate, want.Rate) {
					t.Errorf("stage %d: %+v, want %+v", i, got, want)
				}
			}
			if res.Limit != tc.limit {
				t.Errorf("limit %q, want %q", res.Limit, tc.limit)
			}
		})
	}
}

// near reports whether a and b agree to within float64 rounding.
func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-12*max(math.Abs(a), math.Abs(b))
}

func TestAssembler(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		want   []string // batches sent, after a final flush
	}{
		{"split across slots", []string{"abc", "defgh", "ij"}, []string{"abcd", "efgh", "ij"}},
		{"exact fill sends no empty batch", []string{"ab", "cd", "efgh"}, []string{"abcd", "efgh"}},
		{"one write over three slots", []string{"abcdefghijk"}, []string{"abcd", "efgh", "ijk"}},
		{"empty writes", []string{"", "a", ""}, []string{"a"}},
		{"nothing", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := newRing(gpu.NewHost(), 3, 4)
			if err != nil {
				t.Fatal(err)
			}
			defer r.release()
			full := make(chan *slot, len(r.slots))
			var st feedStats
			a := assembler{ctx: context.Background(), dev: r.dev, free: r.free, full: full, shard: 7, st: &st}
			for _, w := range tc.writes {
				if err := a.write([]byte(w)); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.flush(); err != nil {
				t.Fatal(err)
			}
			close(full)
			var got []string
			for s := range full {
				if s.shard != 7 {
					t.Errorf("batch %q from shard %d, want 7", s.host[:s.n], s.shard)
				}
				got = append(got, string(s.host[:s.n]))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("batches %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAssemblerCancelled(t *testing.T) {
	r, err := newRing(gpu.NewHost(), 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer r.release()
	ctx, cancel := context.WithCancel(context.Background())
	var st feedStats
	// Nobody takes batches: whether write sees the cancel before or after
	// it fills a slot, the slot can never be sent.
	a := assembler{ctx: ctx, dev: r.dev, free: r.free, full: make(chan *slot), st: &st}
	cancel()
	if err := a.write([]byte("abcdef")); !errors.Is(err, context.Canceled) {
		t.Fatalf("write after cancel: %v, want %v", err, context.Canceled)
	}
}

// ringDevice is a host Device that fails the fail-th call of method
// failOn and counts what is allocated and not freed.
type ringDevice struct {
	gpu.Device
	failOn string
	fail   int
	calls  map[string]int
	live   map[string]int // "stream", "event", "host", "device"
	syncs  int
}

var errRing = errors.New("injected failure")

func (d *ringDevice) call(method string) error {
	d.calls[method]++
	if method == d.failOn && d.calls[method] == d.fail {
		return errRing
	}
	return nil
}

func (d *ringDevice) NewStream() (gpu.Stream, error) {
	if err := d.call("NewStream"); err != nil {
		return 0, err
	}
	return d.Device.NewStream()
}

func (d *ringDevice) NewEvent() (gpu.Event, error) {
	if err := d.call("NewEvent"); err != nil {
		return 0, err
	}
	d.live["event"]++
	return d.Device.NewEvent()
}

func (d *ringDevice) FreeEvent(e gpu.Event) error {
	d.live["event"]--
	return d.Device.FreeEvent(e)
}

func (d *ringDevice) AllocHost(n int) ([]byte, error) {
	if err := d.call("AllocHost"); err != nil {
		return nil, err
	}
	d.live["host"]++
	return d.Device.AllocHost(n)
}

func (d *ringDevice) FreeHost(b []byte) error {
	d.live["host"]--
	return d.Device.FreeHost(b)
}

func (d *ringDevice) Alloc(n int) (gpu.DevicePtr, error) {
	if err := d.call("Alloc"); err != nil {
		return 0, err
	}
	d.live["device"]++
	return d.Device.Alloc(n)
}

func (d *ringDevice) Free(p gpu.DevicePtr) error {
	d.live["device"]--
	return d.Device.Free(p)
}

func (d *ringDevice) Sync(s gpu.Stream) error {
	d.syncs++
	return d.Device.Sync(s)
}

func TestNewRingReleasesOnError(t *testing.T) {
	for _, tc := range []struct {
		failOn string
		fail   int
		syncs  int // a ring with a stream syncs it before freeing
	}{
		{"NewStream", 1, 0},
		{"NewEvent", 1, 1},
		{"NewEvent", 3, 1},
		{"AllocHost", 2, 1}, // the second slot's event is already made
		{"Alloc", 1, 1},     // the first slot's host buffer and event too
		{"Alloc", 3, 1},
	} {
		t.Run(fmt.Sprintf("%s#%d", tc.failOn, tc.fail), func(t *testing.T) {
			d := &ringDevice{Device: gpu.NewHost(), failOn: tc.failOn, fail: tc.fail, calls: map[string]int{}, live: map[string]int{}}
			r, err := newRing(d, 3, 64)
			if !errors.Is(err, errRing) || r != nil {
				t.Fatalf("newRing: %v, %v; want %v", r, err, errRing)
			}
			for what, n := range d.live {
				if n != 0 {
					t.Errorf("%d %s allocations left", n, what)
				}
			}
			if d.syncs != tc.syncs {
				t.Errorf("%d syncs, want %d", d.syncs, tc.syncs)
			}
		})
	}
	t.Run("released", func(t *testing.T) {
		d := &ringDevice{Device: gpu.NewHost(), calls: map[string]int{}, live: map[string]int{}}
		r, err := newRing(d, 3, 64)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.free) != 3 || d.live["host"] != 3 || d.live["event"] != 3 || d.live["device"] != 3 {
			t.Fatalf("%d free slots, live %v; want 3 of each", len(r.free), d.live)
		}
		r.release()
		for what, n := range d.live {
			if n != 0 {
				t.Errorf("%d %s allocations left", n, what)
			}
		}
	})
}

// TestReadStageName: without O_DIRECT the read stage may have been served
// by the page cache, and says so; with it, it is the disk (issue 32).
func TestReadStageName(t *testing.T) {
	for _, tc := range []struct {
		direct bool
		want   string
	}{{false, "read (page cache or disk)"}, {true, "disk read"}} {
		res := &FeedResult{Readers: 1, Bytes: 1 << 20, LinkGBps: 10}
		res.summarize([]feedStats{{samples: 4, fileBytes: 1 << 20, read: time.Millisecond}}, time.Second, false, tc.direct)
		if res.Stages[0].Name != tc.want || advice[res.Stages[0].Name] == "" {
			t.Errorf("direct %v: read stage %q (advice %q), want %q", tc.direct, res.Stages[0].Name, advice[res.Stages[0].Name], tc.want)
		}
	}
}
