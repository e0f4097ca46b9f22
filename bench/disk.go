package bench

import (
	"context"
	"fmt"

	"math/rand/v2"
	"os"
	"time"
)

// DiskRead is a short sequential read measured on one file system.
type DiskRead struct {
	Dir     string  `json:"dir"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	MBps    float64 `json:"mb_per_s"` // 10^6 bytes per second
	// Method says what was read: "O_DIRECT" (the disk), "cache dropped"
	// (the disk, where O_DIRECT is refused) or "memory (tmpfs)".
	Method string `json:"method"`
}

// ReadDisk writes a file of size bytes into dir, syncs it, and reads it
// back sequentially as bench-read's raw pass does, in DefaultChunk reads
// into one reused aligned buffer: with O_DIRECT where the file system
// allows it, else after dropping the file from the page cache. The file
// is removed. It tells what the disk under dir reads sequentially, the
// way a loader reads shards.
func ReadDisk(ctx context.Context, dir string, size int64) (*DiskRead, error) {
	size = max(align, size&^(align-1))
	f, err := os.CreateTemp(dir, ".prep-disk-*.tmp")
	if err != nil {
		return nil, fmt.Errorf("measure the disk under %s: %w", dir, err)
	}
	path := f.Name()
	defer os.Remove(path)
	if err := fill(ctx, f, size); err != nil {
		f.Close()
		return nil, fmt.Errorf("measure the disk under %s: write %s: %w", dir, path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("measure the disk under %s: %w", dir, err)
	}
	res := &DiskRead{Dir: dir, Bytes: size, Method: "O_DIRECT"}
	rf, err := openFile(path, true)
	if err != nil {
		// tmpfs and some FUSE mounts refuse O_DIRECT: read through the
		// page cache, emptied first.
		if err := dropCache(path); err != nil {
			return nil, err
		}
		res.Method = "cache dropped"
		if inMemory(dir) {
			res.Method = "memory (tmpfs)"
		}
		if rf, err = openFile(path, false); err != nil {
			return nil, err
		}
	}
	defer rf.Close()
	buf := newBuffer(DefaultChunk)
	start := time.Now()
	err = rf.span(buf, 0, size).each(func([]byte) error { return ctx.Err() })
	d := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("measure the disk under %s: %w", dir, err)
	}
	res.Seconds = d.Seconds()
	if d > 0 {
		res.MBps = float64(size) / 1e6 / d.Seconds()
	}
	return res, nil
}

// fill writes size bytes of random data (so that no compressing or
// deduplicating file system shortens the read) and syncs them to disk.
func fill(ctx context.Context, f *os.File, size int64) error {
	chunk := make([]byte, min(size, 4<<20))
	rng := rand.NewChaCha8([32]byte{'p', 'r', 'e', 'p'})
	for written := int64(0); written < size; {
		if err := ctx.Err(); err != nil {
			return err
		}
		rng.Read(chunk) // fresh bytes each chunk: no block repeats
		n, err := f.Write(chunk[:min(int64(len(chunk)), size-written)])
		written += int64(n)
		if err != nil {
			return err
		}
	}
	return f.Sync()
}

// DiskTier is a kind of cloud disk with its published read limit.
type DiskTier struct {
	Name string `json:"name"`
	// MiBps is the most it reads (MiB/s): per VM for Persistent Disk, per
	// volume for Hyperdisk and as provisioned, for all of a VM's local
	// SSDs together.
	MiBps float64 `json:"max_mib_per_s"`
	// PerGiB is, for disks whose speed grows with their size, the MiB/s
	// each GiB adds, up to MiBps; 0 when the speed is provisioned.
	PerGiB float64 `json:"mib_per_s_per_gib,omitempty"`
	Note   string  `json:"note,omitempty"`
	Source string  `json:"source"`
}

// Sources of DiskTiers, as read in 2025–2026.
const (
	pdPerf       = "https://cloud.google.com/compute/docs/disks/performance (throughput limits for zonal Persistent Disk)"
	hdBalanced   = "https://cloud.google.com/compute/docs/disks/hd-types/hyperdisk-balanced"
	hdThroughput = "https://cloud.google.com/compute/docs/disks/hd-types/hyperdisk-throughput"
	hdExtreme    = "https://cloud.google.com/compute/docs/disks/hd-types/hyperdisk-extreme"
	hdML         = "https://cloud.google.com/compute/docs/disks/hd-types/hyperdisk-ml"
	localSSD     = "https://cloud.google.com/compute/docs/disks/local-ssd (performance table)"
	ebsTypes     = "https://docs.aws.amazon.com/ebs/latest/userguide/ebs-volume-types.html (volume type comparison)"
	i3en         = "https://aws.amazon.com/ec2/instance-types/i3en/ (sequential disk throughput)"
)

// DiskTiers are Google Cloud's disk types, then AWS's (EBS volumes and
// instance store), with the sequential read limits their documentation
// publishes, slowest first within each cloud. They are ceilings: the
// machine type, its vCPU count and the queue depth can keep a VM below
// them, which only a measurement on that VM (prep plan with DST on the
// disk, or bench-read --direct) shows.
var DiskTiers = []DiskTier{
	{Name: "pd-standard", MiBps: 1200, PerGiB: 0.12, Source: pdPerf},
	{Name: "pd-balanced", MiBps: 1200, PerGiB: 0.28, Source: pdPerf},
	{Name: "pd-ssd", MiBps: 1200, PerGiB: 0.48, Source: pdPerf},
	{Name: "hyperdisk-throughput", MiBps: 2400, Note: "as provisioned; 10–30 ms latency", Source: hdThroughput},
	{Name: "hyperdisk-balanced", MiBps: 2400, Note: "as provisioned", Source: hdBalanced},
	{Name: "pd-extreme", MiBps: 4000, Note: "N2 with 64+ vCPUs", Source: pdPerf},
	{Name: "hyperdisk-extreme", MiBps: 5000, Note: "250 MiB/s per 1,000 provisioned IOPS; 64+ vCPU machines", Source: hdExtreme},
	{Name: "local-ssd", MiBps: 9360, Note: "24 NVMe disks of 375 GiB; fewer disks read less; data is lost when the VM stops", Source: localSSD},
	{Name: "hyperdisk-ml", MiBps: 1200000, Note: "per volume, shared by the VMs it is attached to read-only; one VM reads at most its machine type's Hyperdisk limit", Source: hdML},
	// AWS: st1 reads a baseline 40 MiB/s per TiB (bursting to 250 while
	// credits last, which epochs over a whole dataset spend), up to 500;
	// gp3 and io2 are provisioned per volume; the instance's own EBS
	// bandwidth can cap any of them.
	{Name: "st1", MiBps: 500, PerGiB: 40.0 / 1024, Note: "HDD; baseline 40 MiB/s a TiB, bursts to 250 MiB/s a TiB while credits last", Source: ebsTypes},
	{Name: "gp3", MiBps: 2000, Note: "as provisioned, 125–2,000 MiB/s a volume; the instance's EBS bandwidth caps it", Source: ebsTypes},
	{Name: "io2", MiBps: 4000, Note: "io2 Block Express, as provisioned IOPS allow, on Nitro instances; the instance's EBS bandwidth caps it", Source: ebsTypes},
	{Name: "instance-store-nvme", MiBps: 15258, Note: "i3en.24xlarge, 8 NVMe disks of 7.5 TB (16 GB/s); smaller instances have fewer disks and read less; data is lost when the instance stops", Source: i3en},
}

// Tier returns the disk tier named name.
func Tier(name string) (DiskTier, bool) {
	for _, t := range DiskTiers {
		if t.Name == name {
			return t, true
		}
	}
	return DiskTier{}, false
}

// ReadMBps is the tier's read limit in MB/s (10^6 bytes) for a disk of
// sizeBytes: the per-GiB rate times the size, up to the cap; sizeBytes 0
// asks for the cap, what a disk large enough reads.
func (t DiskTier) ReadMBps(sizeBytes int64) float64 {
	mib := t.MiBps
	if t.PerGiB > 0 && sizeBytes > 0 {
		mib = min(mib, t.PerGiB*float64(sizeBytes)/(1<<30))
	}
	return mib * (1 << 20) / 1e6
}

// SizeFor is the disk size (bytes) at which a per-GiB tier reads mbps
// MB/s, or 0 if its size does not limit it (or nothing reaches mbps).
func (t DiskTier) SizeFor(mbps float64) int64 {
	mib := mbps * 1e6 / (1 << 20)
	if t.PerGiB == 0 || mib > t.MiBps {
		return 0
	}
	return int64(mib / t.PerGiB * (1 << 30))
}

// Need is a published training throughput to plan for.
type Need struct {
	Name          string  `json:"name"`
	SamplesPerSec float64 `json:"samples_per_s"`
	What          string  `json:"what"`
	Source        string  `json:"source"`
}

// nvidiaRN50 is NVIDIA's ResNet-50 v1.5 PyTorch training table (DGX A100
// 80GB and DGX-1, pytorch-21.03 NGC container, images/s).
const nvidiaRN50 = "https://github.com/NVIDIA/DeepLearningExamples/tree/master/PyTorch/Classification/ConvNets/resnet50v1.5 (Training performance results)"

// Needs are named --need presets: training throughputs published with
// their setup.
var Needs = []Need{
	{Name: "resnet50-a100", SamplesPerSec: 2470, What: "ResNet-50 v1.5 training, 1× A100 80GB, mixed precision", Source: nvidiaRN50},
	{Name: "resnet50-a100-tf32", SamplesPerSec: 938, What: "ResNet-50 v1.5 training, 1× A100 80GB, TF32", Source: nvidiaRN50},
	{Name: "resnet50-8xa100", SamplesPerSec: 16621, What: "ResNet-50 v1.5 training, 8× A100 80GB (DGX A100), mixed precision", Source: nvidiaRN50},
	{Name: "resnet50-v100", SamplesPerSec: 1200, What: "ResNet-50 v1.5 training, 1× V100 16GB, mixed precision", Source: nvidiaRN50},
	{Name: "resnet50-8xv100", SamplesPerSec: 8322, What: "ResNet-50 v1.5 training, 8× V100 16GB (DGX-1), mixed precision", Source: nvidiaRN50},
}

// NeedNamed returns the preset named name.
func NeedNamed(name string) (Need, bool) {
	for _, n := range Needs {
		if n.Name == name {
			return n, true
		}
	}
	return Need{}, false
}
