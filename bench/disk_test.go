package bench

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"
)

func TestReadDisk(t *testing.T) {
	dir := t.TempDir()
	r, err := ReadDisk(context.Background(), dir, 3<<20+100) // rounded down to whole blocks
	if err != nil {
		t.Fatal(err)
	}
	if r.Bytes != 3<<20 || r.MBps <= 0 || r.Seconds <= 0 || r.Dir != dir {
		t.Errorf("read %+v", r)
	}
	switch r.Method {
	case "O_DIRECT", "cache dropped", "memory (tmpfs)":
	default:
		t.Errorf("method %q", r.Method)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("ReadDisk left %d files in %s", len(left), dir)
	}
	if _, err := ReadDisk(context.Background(), dir+"/missing", 1<<20); err == nil {
		t.Error("a missing folder measured")
	}
	free, err := FreeBytes(dir)
	if err != nil || free <= 0 {
		t.Errorf("free space %d, %v", free, err)
	}
}

// awsTier is the AWS tier named name; every one cites its source.
func awsTier(t *testing.T, name string) DiskTier {
	t.Helper()
	tier, ok := Tier(name)
	if !ok || !strings.HasPrefix(tier.Source, "https://") || !strings.Contains(tier.Source, "aws.amazon.com") {
		t.Fatalf("AWS tier %s: %+v, want it listed with an AWS source", name, tier)
	}
	return tier
}

func TestDiskTier(t *testing.T) {
	balanced, _ := Tier("pd-balanced")
	hyper, _ := Tier("hyperdisk-balanced")
	if _, ok := Tier("floppy"); ok {
		t.Error("an unknown tier was found")
	}
	for _, tc := range []struct {
		tier DiskTier
		size int64
		mbps float64 // 10^6 bytes/s
	}{
		{balanced, 100 << 30, 28 * 1.048576},           // 0.28 MiB/s per GiB
		{balanced, 10000 << 30, 1200 * 1.048576},       // capped per VM
		{hyper, 1 << 30, 2400 * 1.048576},              // provisioned, not sized
		{awsTier(t, "st1"), 2 << 40, 80 * 1.048576},    // 40 MiB/s per TiB
		{awsTier(t, "st1"), 100 << 40, 500 * 1.048576}, // capped per volume
		{awsTier(t, "gp3"), 1 << 30, 2000 * 1.048576},  // provisioned
		{awsTier(t, "io2"), 1 << 30, 4000 * 1.048576},
		{awsTier(t, "instance-store-nvme"), 0, 15258 * 1.048576},
	} {
		if got := tc.tier.ReadMBps(tc.size); math.Abs(got-tc.mbps) > 1e-6 {
			t.Errorf("%s at %d GiB: %.3f MB/s, want %.3f", tc.tier.Name, tc.size>>30, got, tc.mbps)
		}
	}
	// The size SizeFor gives reads what was asked.
	if s := balanced.SizeFor(300); math.Abs(balanced.ReadMBps(s)-300) > 1e-3 {
		t.Errorf("pd-balanced of %d bytes reads %.3f MB/s, want 300", s, balanced.ReadMBps(s))
	}
	if balanced.SizeFor(5000) != 0 || hyper.SizeFor(100) != 0 {
		t.Error("SizeFor: a need past the cap, or a provisioned tier, has no size")
	}
	for _, n := range Needs {
		if got, ok := NeedNamed(n.Name); !ok || got.SamplesPerSec <= 0 || got.Source == "" {
			t.Errorf("preset %s: %+v", n.Name, got)
		}
	}
}
