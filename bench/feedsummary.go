package bench

import (
	"encoding/hex"
	"hash"
	"path/filepath"
	"time"
)

// summarize fills in res's sample count, rates, stages and limit from the
// readers' stats and the run's wall time; res.Readers, res.Bytes and
// res.LinkGBps must be set. decode adds the decode stage, which only tar
// shards have. direct names the read stage: only O_DIRECT reads are
// known to come from the disk.
func (res *FeedResult) summarize(stats []feedStats, wall time.Duration, decode, direct bool) {
	total := sumStats(stats)
	res.Samples = total.samples
	res.Seconds = wall.Seconds()
	if wall > 0 {
		res.SamplesPerSec = float64(res.Samples) / wall.Seconds()
		res.GBps = float64(res.Bytes) / wall.Seconds() / 1e9
	}
	workers := float64(res.Readers)
	read := StageReadCached
	if direct {
		read = StageRead
	}
	res.Stages = append(res.Stages, newStage(read, total.read, total.fileBytes, workers, wall))
	if decode {
		res.Stages = append(res.Stages, newStage(StageDecode, total.decode, total.decoded, workers, wall))
	}
	res.Stages = append(res.Stages, newStage(StageAssemble, total.assemble, res.Bytes, workers, wall))
	res.Stages = append(res.Stages, newStage(StageCopy, copyBusy(res.Bytes, res.LinkGBps), res.Bytes, 1, wall))
	res.Limit = busiest(res.Stages)
}

// sumStats adds up the readers' stats.
func sumStats(stats []feedStats) feedStats {
	var total feedStats
	for _, st := range stats {
		total.read += st.read
		total.decode += st.decode
		total.assemble += st.assemble
		total.fileBytes += st.fileBytes
		total.decoded += st.decoded
		total.samples += st.samples
	}
	return total
}

// newStage describes a stage whose workers together were busy for busy
// while moving bytes, in a run of wall.
func newStage(name string, busy time.Duration, bytes int64, workers float64, wall time.Duration) Stage {
	st := Stage{Name: name}
	if wall > 0 {
		st.Busy = busy.Seconds() / workers / wall.Seconds()
	}
	if busy > 0 {
		st.Rate = float64(bytes) / (busy.Seconds() / workers)
	}
	return st
}

// copyBusy is how long the copy stage is busy. The copies run on the
// device, overlapped with the readers; the copy stage alone runs at the
// link speed measured in the same run, so it is busy for the bytes at
// that speed.
func copyBusy(bytes int64, linkGBps float64) time.Duration {
	if linkGBps > 0 {
		return time.Duration(float64(bytes) / (linkGBps * 1e9) * float64(time.Second))
	}
	return 0
}

// busiest names the stage with the largest Busy, the first of equals.
func busiest(stages []Stage) string {
	limit := -1
	for i, st := range stages {
		if limit < 0 || st.Busy > stages[limit].Busy {
			limit = i
		}
	}
	if limit < 0 {
		return ""
	}
	return stages[limit].Name
}

// deviceSums prints the hashes of the bytes copied back from the device,
// keyed by shard file name.
func deviceSums(shards []Shard, hashes map[int]hash.Hash) map[string]string {
	sums := make(map[string]string)
	for i, h := range hashes {
		sums[filepath.Base(shards[i].Path)] = hex.EncodeToString(h.Sum(nil))
	}
	return sums
}
