package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cheggaaa/pb/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/prep-dev/prep/bench"
	"github.com/prep-dev/prep/cloudsrc"
)

func init() { commands = append(commands, newBenchReadCmd) }

func newBenchReadCmd() *cobra.Command {
	var (
		opt      bench.ReadOptions
		jsonOut  bool
		staging  string
		parallel int
		gs       cloudsrc.Opener
	)
	cmd := &cobra.Command{
		Use:   "bench-read SHARD|DIR|gs://BUCKET/PREFIX",
		Short: "Measure how fast shards read, against plain sequential reads of the same files",
		Long: `bench-read reads shards the way a training loader would — HDF5 datasets
with large plain reads at the offsets the manifest records, into one reused
buffer per reader; tar shards streamed sample by sample, decoded with
--decode — then reads the same files with plain read() calls into the same
kind of buffer, and reports both speeds, their ratio (efficiency), samples/s
and how many samples/s of the shards' tensor that speed could feed a GPU.

Each reader reads a shard both ways back to back, so both passes see the
same load. Through the page cache the loader pass goes first, so files that
were not cached favour the raw pass; --direct (O_DIRECT, aligned buffers) or
--cold (the file dropped from the page cache before each pass) compare disk
reads. --via hdf5 reads the datasets through the HDF5 library instead, for
comparison; chunked or filtered datasets always go through the library.

A gs:// folder (or one shard in it) is first downloaded to a staging folder
(--staging, default $PREP_STAGING or the system temp folder), as a training
job would stage it: the download speed is reported, each shard's sha256 is
checked against the manifest, and the copies are removed afterwards. The
shards are then in the page cache; add --direct to measure the disk.`,
		Example: `  # shards from page cache, one reader
  prep bench-read ./shards
  # disk speed with O_DIRECT and 4 readers, as JSON
  prep bench-read ./shards --direct --readers 4 --json
  # a tar shard, decoding its PNGs
  prep bench-read ./shards/shard-000000.tar --decode
  # shards in a bucket: staged on local disk first, then read
  prep bench-read gs://my-bucket/shards --direct --staging /mnt/ssd`,
		Args: positional("SHARD|DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opt.Via != bench.ViaRaw && opt.Via != bench.ViaHDF5 {
				return usagef("--via %q: want raw or hdf5", opt.Via)
			}
			if opt.Readers < 1 {
				return usagef("--readers %d: want 1 or more", opt.Readers)
			}
			if err := checkIO(gs); err != nil {
				return err
			}
			target := args[0]
			if err := needTarget("bench-read", target); err != nil {
				return err
			}
			var fetched *bench.Fetched
			if cloudsrc.IsRemote(target) {
				dir, err := os.MkdirTemp(stagingDir(staging), "prep-bench-")
				if err != nil {
					return fmt.Errorf("bench-read: staging folder: %w (choose another with --staging or PREP_STAGING)", err)
				}
				defer os.RemoveAll(dir)
				add, done := byteBar(cmd.ErrOrStderr(), 0)
				fetched, err = bench.Fetch(cmd.Context(), gs.OpenURI, target, dir, bench.FetchOptions{Parallel: parallel, Progress: add, Formats: shardFormats})
				done()
				if err != nil {
					return fmt.Errorf("bench-read: %w", err)
				}
				target = fetched.Target
			}
			shards, err := bench.Find(target, shardFormats)
			if err != nil {
				return fmt.Errorf("bench-read: %w", err)
			}
			var total int64
			for _, s := range shards {
				total += 2 * s.Bytes // the loader pass and the raw pass
			}
			var done func()
			opt.Progress, done = byteBar(cmd.ErrOrStderr(), total)
			res, err := bench.Read(cmd.Context(), shards, opt)
			done()
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), struct {
					Download *bench.Fetched `json:"download,omitempty"`
					*bench.ReadResult
				}{fetched, res})
			}
			if fetched != nil {
				verified := "no manifest: not verified"
				if fetched.Verified {
					verified = "sha256 verified"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "downloaded %d files, %.1f MB from %s in %.2f s (%.0f MB/s, %d at once); %s\n\n",
					fetched.Files, float64(fetched.Bytes)/1e6, fetched.Source, fetched.Seconds, fetched.MBps, fetched.Parallel, verified)
			}
			return res.WriteText(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opt.Direct, "direct", false, "read with O_DIRECT into aligned buffers, bypassing the page cache")
	f.BoolVar(&opt.Cold, "cold", false, "drop the shards from the page cache before each pass (posix_fadvise)")
	f.StringVar(&opt.Via, "via", bench.ViaRaw, "how HDF5 datasets are read: raw (plain reads at their offsets) or hdf5 (the library)")
	f.IntVar(&opt.Readers, "readers", 1, "shards read at the same time")
	f.BoolVar(&opt.Decode, "decode", false, "decode the PNG/WAV members of tar shards")
	f.BoolVar(&jsonOut, "json", false, "print the result as JSON on stdout")
	f.StringVar(&staging, "staging", "", "where gs:// and s3:// shards are downloaded to before reading (default $PREP_STAGING, else the system temp folder)")
	f.IntVar(&parallel, "downloads", 4, "gs:// and s3:// shards downloaded at once")
	// A whole shard (256 MiB by default) is one object: its deadline is
	// generous.
	ioFlags(f, &gs, 30*time.Minute)
	return cmd
}

// ioFlags adds the gs:// and s3:// transfer flags that convert and bench-read share,
// filling o; objectDefault is the command's default for --object-timeout.
func ioFlags(f *pflag.FlagSet, o *cloudsrc.Opener, objectDefault time.Duration) {
	f.DurationVar(&o.Timeout, "io-timeout", 60*time.Second, "gs://, s3://: abandon and retry a storage request that gets no answer and moves no bytes for this long")
	f.DurationVar(&o.ObjectTimeout, "object-timeout", objectDefault, "gs://, s3://: stop the run when one object is not read within this long, retries included")
	f.IntVar(&o.Attempts, "io-attempts", 8, "gs://, s3://: tries of one request that fails with 429, 5xx, a connection error or a stall before the run stops")
}

// checkIO refuses the negative values of the flags ioFlags adds.
func checkIO(o cloudsrc.Opener) error {
	if o.Timeout < 0 || o.ObjectTimeout < 0 || o.Attempts < 0 {
		return usagef("--io-timeout, --object-timeout and --io-attempts must not be negative (0: the default)")
	}
	return nil
}

// stagingDir is where remote shards are staged: flag, then $PREP_STAGING,
// then the system temp folder.
func stagingDir(flag string) string {
	if flag != "" {
		return flag
	}
	if d := os.Getenv("PREP_STAGING"); d != "" {
		return d
	}
	return os.TempDir()
}

// byteBar shows a pb progress bar of bytes on w when w is a terminal, and
// nothing otherwise; total 0 means unknown. add is safe for concurrent
// use; done removes the bar.
func byteBar(w io.Writer, total int64) (add func(int64), done func()) {
	fd, ok := terminal(w)
	if !ok {
		return nil, func() {}
	}
	bar := newBar(w, fd, total).Set(pb.Bytes, true).Start()
	return func(n int64) { bar.Add64(n) }, func() { bar.Finish() }
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
