package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// benchInputs copies the testdata photos `times` times into a fresh
// ImageFolder, so a run has enough inputs to measure.
func benchInputs(b *testing.B, times int) string {
	b.Helper()
	dir := b.TempDir()
	classes, _ := os.ReadDir("../../testdata/images")
	for _, c := range classes {
		files, _ := os.ReadDir(filepath.Join("../../testdata/images", c.Name()))
		os.MkdirAll(filepath.Join(dir, c.Name()), 0o755)
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join("../../testdata/images", c.Name(), f.Name()))
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < times; i++ {
				name := filepath.Join(dir, c.Name(), fmt.Sprintf("%04d-%s", i, f.Name()))
				if os.Link(filepath.Join("../../testdata/images", c.Name(), f.Name()), name) == nil {
					continue // thousands of inputs without copying them
				}
				if err := os.WriteFile(name, data, 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	return dir
}

// convertOnce runs the real binary and returns its wall time and peak RSS.
func convertOnce(b *testing.B, src string, args ...string) (time.Duration, int64) {
	b.Helper()
	dst := filepath.Join(b.TempDir(), "out")
	cmd := exec.Command(prepBinaryB(b), append([]string{"convert", src, dst}, args...)...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("convert: %v\n%s", err, out)
	}
	elapsed := time.Since(start)
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return elapsed, ru.Maxrss * 1024
}

func prepBinaryB(b *testing.B) string {
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "prep-cli-")
		if err != nil {
			cliErr = err
			return
		}
		cliPath = filepath.Join(dir, "prep")
		if out, err := exec.Command("go", "build", "-o", cliPath, ".").CombinedOutput(); err != nil {
			cliErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	if cliErr != nil {
		b.Fatal(cliErr)
	}
	return cliPath
}

// BenchmarkConvert: images/s and MB/s (224×224×3 output) for
// resize=256,crop=224 over the testdata photos, per decoder and worker count,
// with the process's peak RSS.
func BenchmarkConvert(b *testing.B) {
	const times = 8
	src := benchInputs(b, times)
	n := 8 * times
	for _, dec := range []string{"go", "turbo"} {
		for _, w := range []int{1, 2} {
			b.Run(fmt.Sprintf("decoder=%s/workers=%d", dec, w), func(b *testing.B) {
				var total time.Duration
				var rss int64
				for range b.N {
					d, r := convertOnce(b, src, "--recipe", "resize=256,crop=224", "--workers", fmt.Sprint(w), "--decoder", dec)
					total += d
					rss = max(rss, r)
				}
				sec := total.Seconds() / float64(b.N)
				b.ReportMetric(float64(n)/sec, "img/s")
				b.ReportMetric(float64(n*224*224*3)/1e6/sec, "MB/s")
				b.ReportMetric(float64(rss)/(1<<20), "peakRSS-MiB")
			})
		}
	}
}

// BenchmarkConvertMemory shows that peak RSS stays flat when the inputs
// grow tenfold: shards roll at --shard-size, the in-flight FIFO holds at
// most io-workers + 2×workers inputs (64 + 2×NumCPU), and the plan keeps a
// few hundred bytes per input. The 1× run (800 inputs) is several times
// that cap, so both runs reach the pipeline's steady state; it reports
// both peaks and their ratio, which should stay near 1.
func BenchmarkConvertMemory(b *testing.B) {
	const times = 100 // × 8 test photos
	small, large := benchInputs(b, times), benchInputs(b, 10*times)
	args := []string{"--recipe", "resize=256,crop=224", "--shard-size", "8MiB"}
	var rss1, rss10 int64
	for range b.N {
		_, r1 := convertOnce(b, small, args...)
		_, r10 := convertOnce(b, large, args...)
		rss1, rss10 = max(rss1, r1), max(rss10, r10)
	}
	b.ReportMetric(float64(rss1)/(1<<20), "peakRSS-1x-MiB")
	b.ReportMetric(float64(rss10)/(1<<20), "peakRSS-10x-MiB")
	b.ReportMetric(float64(rss10)/float64(rss1), "10x/1x")
}
