package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/prep-dev/prep/augment"
	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/convert"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/imgdec"
	"github.com/prep-dev/prep/media"
	"github.com/prep-dev/prep/media/ffmpeg"
)

func init() { commands = append(commands, newConvertCmd) }

type convertFlags struct {
	recipe        string
	format        string
	shardSize     string
	itemsPerShard int
	workers       int
	ioWorkers     int
	seed          uint64
	copies        int
	order         string
	taskIndex     int
	taskCount     int
	noMerge       bool
	resume        bool
	overwrite     bool
	strict        bool
	jsonOut       bool
	maxPixels     int64
	decoder       string
	splitAxis     int
	maxSampleSize string
	maxSkipped    string
	labels        convert.LabelRules
	io            cloudsrc.Opener // the gs:// transfer flags (ioFlags)
	video         convert.VideoOptions
	audio         convert.AudioOptions
}

func newConvertCmd() *cobra.Command {
	var f convertFlags
	cmd := &cobra.Command{
		Use:   "convert SRC DST",
		Short: "Convert raw inputs into uncompressed, augmented shards",
		Long: `convert reads SRC — a folder in ImageFolder layout (SRC/<class>/<file>; the
sorted class names become labels 0..K-1), a flat folder (no labels), a CSV or
JSONL list of path,label, or gs://bucket/prefix — decodes and augments every
input ahead of time, and writes shards plus manifest.json into DST (a folder
or gs://bucket/prefix).

Shards are written under NAME.tmp and renamed when complete; after Ctrl-C,
rerun with --resume to keep the finished shards and redo the rest.

In a distributed run (--task-count above 1) each task writes its shards and
a manifest part; the last task to finish merges the parts into
manifest.json (--no-merge leaves that to prep merge-manifest).`,
		Example: `  # ImageFolder of photos -> 224x224 HDF5 shards, two augmented copies each
  prep convert ./photos ./shards --recipe "resize=256,crop=224:random,hflip=0.5" --seed 7 --copies 2

  # resume an interrupted run; inputs, recipe and seed must be unchanged
  prep convert ./photos ./shards --recipe "resize=256,crop=224:random,hflip=0.5" --seed 7 --copies 2 --resume

  # task 3 of 16 on a batch engine (defaults come from BATCH_TASK_INDEX/COUNT etc.)
  prep convert gs://bkt/raw gs://bkt/shards --recipe recipe.yaml --task-index 3 --task-count 16`,
		Args: positional("SRC", "DST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConvert(cmd, args[0], args[1], &f)
		},
	}
	addConvertFlags(cmd.Flags(), &f)
	return cmd
}

// addConvertFlags registers convert's flags; plan takes the same, so that
// a convert command line plans as it is.
func addConvertFlags(fl *pflag.FlagSet, f *convertFlags) {
	def := media.Defaults()
	fl.StringVar(&f.recipe, "recipe", "", `augmentations, e.g. "resize=256,crop=224:random,hflip=0.5", or a .yaml/.json file; every op: prep help recipes`)
	fl.StringVar(&f.format, "format", "", "shard format: hdf5, png (PNG-0 in tar) or wav (WAV in tar); default hdf5, wav for audio")
	fl.StringVar(&f.shardSize, "shard-size", "256MiB", "target shard size (B, KB, MB, GB, KiB, MiB, GiB)")
	fl.IntVar(&f.itemsPerShard, "items-per-shard", 0, "inputs × copies per shard; 0 derives it from --shard-size")
	fl.IntVar(&f.workers, "workers", 0, "decode workers, each with an augmenting goroutine beside it (default: number of CPUs)")
	fl.IntVar(&f.ioWorkers, "io-workers", convert.DefaultIOWorkers, "concurrent reads from the source")
	fl.Uint64Var(&f.seed, "seed", 0, "random seed: the same inputs, recipe and seed give byte-identical shards")
	fl.IntVar(&f.copies, "copies", 1, "independently augmented copies of each input")
	fl.StringVar(&f.order, "order", string(convert.OrderShuffle), "write order: shuffle (copy rounds, each a seeded permutation of the inputs: shards mix classes) or sorted (key order, copies adjacent)")
	fl.IntVar(&f.taskIndex, "task-index", -1, "this task's index in a distributed run (default from CLOUD_RUN_TASK_INDEX, BATCH_TASK_INDEX, JOB_COMPLETION_INDEX, AWS_BATCH_JOB_ARRAY_INDEX or SLURM_ARRAY_TASK_ID)")
	fl.IntVar(&f.taskCount, "task-count", 0, "number of tasks in a distributed run (default from CLOUD_RUN_TASK_COUNT, BATCH_TASK_COUNT or SLURM_ARRAY_TASK_COUNT, else 1; required with JOB_COMPLETION_INDEX and AWS_BATCH_JOB_ARRAY_INDEX)")
	fl.BoolVar(&f.noMerge, "no-merge", false, "in a distributed run, leave manifest.json to prep merge-manifest instead of the last task to finish")
	fl.BoolVar(&f.resume, "resume", false, "keep finished shards of an earlier run into DST and redo the rest")
	fl.BoolVar(&f.overwrite, "overwrite", false, "replace an earlier run in DST, or write beside other files")
	fl.BoolVar(&f.strict, "strict", false, "fail on the first bad input instead of skipping it")
	fl.BoolVar(&f.jsonOut, "json", false, "print the summary as JSON on stdout")
	fl.Int64Var(&f.maxPixels, "max-pixels", def.MaxPixels, "refuse images whose header declares more pixels")
	fl.StringVar(&f.decoder, "decoder", def.Decoder, "image decoders: auto, turbo (libjpeg-turbo with DCT scaling, libpng) or go (image/jpeg, image/png)")
	ioFlags(fl, &f.io, 5*time.Minute)
	fl.Float64Var(&f.video.FPS, "fps", def.FPS, "video: resample to this frame rate first (0 keeps every decoded frame)")
	fl.IntVar(&f.video.Every, "every", def.Every, "video: keep every Nth frame")
	fl.IntVar(&f.video.Clip, "clip", def.Clip, "video: T consecutive frames form one (T,H,W,3) sample; 1 makes every frame a sample")
	fl.IntVar(&f.video.MaxFrames, "max-frames", def.MaxFrames, "video: keep at most this many frames per video (0: all)")
	fl.IntVar(&f.audio.Rate, "rate", def.Rate, "audio: sample rate in Hz")
	fl.IntVar(&f.audio.Channels, "channels", def.Channels, "audio: channels (to 1: the average of the file's channels; from 1: copied)")
	fl.Float64Var(&f.audio.Duration, "duration", def.Duration, "audio: trim or pad every file to this many seconds (0 keeps each whole)")
	fl.StringVar(&f.audio.SampleFormat, "sample-format", def.SampleFormat, "audio: s16 (16-bit PCM) or f32 (IEEE float)")
	fl.IntVar(&f.splitAxis, "split-axis", def.SplitAxis, ".npy/.npz: -1 makes each file one sample, 0 makes each row along axis 0 a sample")
	fl.StringVar(&f.maxSampleSize, "max-sample-bytes", defaultMaxSample, ".npz: skip an archive whose compressed members would inflate to more than this; audio and video: skip a file whose samples would be larger")
	fl.StringVar((*string)(&f.labels.Layout), "layout", string(convert.LayoutAuto), "a folder's labels: auto (ImageFolder classes when files sit in folders, else none), imagefolder (require SRC/<class>/<file>) or flat (every file at any depth, no labels)")
	fl.BoolVar(&f.labels.KeepEmptyClasses, "keep-empty-classes", false, "keep the index of a class folder with no convertible file (or whose every input fails), with a warning, instead of refusing the run")
	fl.BoolVar(&f.labels.IgnoreStrays, "ignore-stray-files", false, "leave out convertible files beside the class folders (as torchvision's ImageFolder does), with a warning, instead of refusing the run")
	fl.StringVar(&f.maxSkipped, "max-skipped", defaultMaxSkipped, "fail the run (exit 1, after writing everything) when more than this share of its inputs is skipped; 100% never fails")
}

func checkMediaFlags(f *convertFlags) error {
	switch {
	case f.video.FPS < 0:
		return usagef("--fps %g: must be positive (or 0 to keep every frame)", f.video.FPS)
	case f.video.Every < 1:
		return usagef("--every %d: must be at least 1", f.video.Every)
	case f.video.Clip < 1:
		return usagef("--clip %d: must be at least 1", f.video.Clip)
	case f.video.MaxFrames < 0:
		return usagef("--max-frames %d: must be 0 (all) or more", f.video.MaxFrames)
	case f.audio.Rate < 1 || f.audio.Rate > 768000:
		return usagef("--rate %d: want a sample rate in Hz, e.g. 16000", f.audio.Rate)
	case f.audio.Channels < 1 || f.audio.Channels > 32:
		return usagef("--channels %d: want 1..32", f.audio.Channels)
	case f.audio.Duration < 0 || math.IsNaN(f.audio.Duration) || math.IsInf(f.audio.Duration, 0):
		return usagef("--duration %g: must be 0 (whole files) or positive", f.audio.Duration)
	case f.audio.SampleFormat != "s16" && f.audio.SampleFormat != "f32":
		return usagef("--sample-format %q: want s16 or f32", f.audio.SampleFormat)
	}
	return nil
}

// taskEngines are the batch engines' task variables, in the order they are
// looked at. A Kubernetes Indexed Job and an AWS Batch array job give no
// count. A Slurm job array
// numbers its tasks from the start of its --array range: the index is
// SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN, and the ids up to
// SLURM_ARRAY_TASK_MAX must be as many as the tasks, or some index is
// never run (--array=0-15:2 or 1,4,9).
var taskEngines = []taskEngine{
	{"CLOUD_RUN_TASK_INDEX", "CLOUD_RUN_TASK_COUNT", "", ""},
	{"BATCH_TASK_INDEX", "BATCH_TASK_COUNT", "", ""},
	{"JOB_COMPLETION_INDEX", "", "", ""},
	{"AWS_BATCH_JOB_ARRAY_INDEX", "", "", ""},
	{"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX"},
}

// taskEngine names an engine's variables: the task's index (or id) and
// count, and for a job array the first and last id.
type taskEngine struct{ index, count, first, last string }

// checkMediaInputs checks what needs SRC's listing, before DST is
// created: video or audio flags with no such inputs are a usage error
// (a flag silently ignored is a recipe the user did not get), and video or
// audio inputs need ffmpeg.
func checkMediaInputs(cmd *cobra.Command, src string, l *convert.Listing) error {
	has := map[media.Kind]bool{}
	for _, e := range l.Entries {
		has[media.KindOf(e.Key)] = true
	}
	for _, k := range []media.Kind{media.Video, media.Audio} {
		for _, name := range k.Flags() {
			if !has[k] && cmd.Flags().Changed(name) {
				return usagef("--%s applies to %s inputs (%s), and %s holds none", name, k, strings.Join(k.Exts(), " "), src)
			}
		}
	}
	if has[media.Video] || has[media.Audio] {
		return ffmpeg.Check()
	}
	return nil
}

// taskFromEnv fills --task-index/--task-count from the batch engines'
// variables when the flags are not given (index < 0, count <= 0): a flag
// always wins over a variable. An index without a count (a Kubernetes
// Indexed Job), or variables of two engines that disagree, are usage
// errors: either would silently make every task convert everything.
func taskFromEnv(index, count int) (int, int, error) {
	envInt := func(name string) (int, bool, error) {
		v := os.Getenv(name)
		if name == "" || v == "" {
			return 0, false, nil
		}
		i, err := strconv.Atoi(v)
		if err != nil || i < 0 {
			return 0, false, usagef("%s=%q is not a task number", name, v)
		}
		return i, true, nil
	}
	var from string // the engine whose variables are set
	engines := taskEngines
	if index >= 0 && count > 0 {
		engines = nil // both flags given: the variables do not matter
	}
	for _, e := range engines {
		i, ok, err := envInt(e.index)
		if err != nil {
			return 0, 0, err
		}
		c, cok, err := envInt(e.count)
		if err != nil {
			return 0, 0, err
		}
		if !ok && !cok {
			continue
		}
		if ok {
			if i, err = e.arrayIndex(i, c, cok); err != nil {
				return 0, 0, err
			}
		}
		if from != "" {
			return 0, 0, usagef("both %s and %s are set: pass --task-index and --task-count to say which task this is", from, e.index)
		}
		from = e.index
		if index < 0 && ok {
			index = i
		}
		if count <= 0 && cok {
			count = c
		}
	}
	if from != "" && count <= 0 {
		return 0, 0, usagef("%s is set but no task count is: set --task-count (the number of tasks, e.g. the Job's completions)", from)
	}
	if index < 0 {
		index = 0
	}
	if count <= 0 {
		count = 1
	}
	if index >= count {
		return 0, 0, usagef("task index %d is not below the task count %d: check --task-index and --task-count", index, count)
	}
	return index, count, nil
}

// arrayIndex turns the id of a task in a job array, whose ids run from
// e.first to e.last, into an index from 0, and checks that the ids are as
// many as the count (when hasCount) says.
func (e taskEngine) arrayIndex(id, count int, hasCount bool) (int, error) {
	if e.first == "" {
		return id, nil
	}
	first, last := 0, -1
	for _, v := range []struct {
		name string
		dst  *int
	}{{e.first, &first}, {e.last, &last}} {
		s := os.Getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, usagef("%s=%q is not a task id", v.name, s)
		}
		*v.dst = n
	}
	if id < first {
		return 0, usagef("%s=%d is below %s=%d", e.index, id, e.first, first)
	}
	if hasCount && last >= first && last-first+1 != count {
		return 0, usagef("the job array's ids %d..%d (%s..%s) are not its %d tasks (%s) in a row: submit it with contiguous ids, e.g. --array=0-%d",
			first, last, e.first, e.last, count, e.count, count-1)
	}
	return id - first, nil
}

// The defaults of --max-sample-bytes and --max-skipped.
const (
	defaultMaxSample  = "1GiB"
	defaultMaxSkipped = "1%"
)

// parseShare reads a share of the inputs: "1%", "0.5%", "100%".
func parseShare(s string) (float64, error) {
	num, ok := strings.CutSuffix(strings.TrimSpace(s), "%")
	v, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || v < 0 || v > 100 {
		return 0, fmt.Errorf("%q: want a percentage from 0%% to 100%%, such as 1%%", s)
	}
	return v / 100, nil
}

// checkSkipped fails a run that skipped more than max of its items: the
// shards and manifest are written, but a dataset that lost that much
// must not pass for a converted one.
func checkSkipped(sum *convert.Summary, max float64) error {
	if sum.Items == 0 || len(sum.Skipped) == 0 {
		return nil
	}
	share := float64(len(sum.Skipped)) / float64(sum.Items)
	if share <= max {
		return nil
	}
	return fmt.Errorf("%d of %d inputs skipped (%.1f%%), over --max-skipped %g%%: the shards and %s are written; fix or remove the inputs the summary lists and rerun with --overwrite, or raise --max-skipped",
		len(sum.Skipped), sum.Items, 100*share, 100*max, sum.Manifest)
}

// parseSize reads "512MiB", "1GB", "4096".
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("size %q: want a positive number with an optional unit, e.g. 256MiB", s)
	}
	return int64(v * float64(mult)), nil
}

// checkedFlags is what convert's flags give once checked.
type checkedFlags struct {
	shardSize            int64
	maxSampleBytes       int64
	maxSkipped           float64 // a share, 0..1
	recipe               *augment.Recipe
	online               *augment.Recipe // after "|": recorded for the reader
	order                convert.Order
	taskIndex, taskCount int
}

// check validates every flag that needs no look at SRC; the deploy test
// runs it on each convert invocation in deploy/.
func (f *convertFlags) check() (checkedFlags, error) {
	var c checkedFlags
	var err error
	if c.shardSize, err = parseSize(f.shardSize); err != nil {
		return c, usageError{fmt.Errorf("--shard-size: %w", err)}
	}
	if f.copies < 1 {
		return c, usagef("--copies %d: must be at least 1", f.copies)
	}
	if f.itemsPerShard < 0 {
		return c, usagef("--items-per-shard %d: want a positive count, or 0 to derive it from --shard-size", f.itemsPerShard)
	}
	// Callers that fill convertFlags without the flag set (the deploy
	// test, inspect --rebuild) leave these empty: the flags' defaults.
	if f.maxSampleSize == "" {
		f.maxSampleSize = defaultMaxSample
	}
	if f.maxSkipped == "" {
		f.maxSkipped = defaultMaxSkipped
	}
	if c.maxSampleBytes, err = parseSize(f.maxSampleSize); err != nil || c.maxSampleBytes < 1 {
		return c, usagef("--max-sample-bytes %q: want a positive size such as 1GiB", f.maxSampleSize)
	}
	if d := f.audio.Duration; d > 0 {
		// Every clip is allocated at its full length up front.
		bytes := d * float64(f.audio.Rate) * float64(f.audio.Channels) * map[string]float64{"s16": 2, "f32": 4}[f.audio.SampleFormat]
		if bytes > float64(c.maxSampleBytes) {
			return c, usagef("--duration %g at %d Hz × %d channels makes every audio sample %s, over --max-sample-bytes %s: shorten it, or raise --max-sample-bytes",
				d, f.audio.Rate, f.audio.Channels, humanBytes(int64(min(bytes, 1<<62))), f.maxSampleSize)
		}
	}
	if c.maxSkipped, err = parseShare(f.maxSkipped); err != nil {
		return c, usageError{fmt.Errorf("--max-skipped: %w", err)}
	}
	if c.order, err = convert.ParseOrder(f.order); err != nil {
		return c, usageError{fmt.Errorf("--%w", err)}
	}
	if f.resume && f.overwrite {
		return c, usagef("--resume keeps an earlier run and --overwrite replaces it: pass one of them")
	}
	if f.workers < 0 || f.ioWorkers < 1 {
		return c, usagef("--workers must be >= 0 and --io-workers >= 1")
	}
	// imgdec reads 0 as its default and a negative limit as none: from the
	// command line either would silently drop the guard against
	// decompression bombs.
	if f.maxPixels < 1 {
		return c, usagef("--max-pixels %d: want a positive number of pixels (default %d)", f.maxPixels, imgdec.DefaultMaxPixels)
	}
	if err := checkIO(f.io); err != nil {
		return c, err
	}
	if c.taskIndex, c.taskCount, err = taskFromEnv(f.taskIndex, f.taskCount); err != nil {
		return c, err
	}
	if c.recipe, c.online, err = parseRecipe(f.recipe); err != nil {
		return c, usageError{err}
	}
	switch f.decoder {
	case "auto", "go", "turbo":
	default:
		return c, usagef("--decoder %q: want auto, turbo or go", f.decoder)
	}
	if f.splitAxis != -1 && f.splitAxis != 0 {
		return c, usagef("--split-axis %d: want -1 (a file is a sample) or 0 (rows are samples)", f.splitAxis)
	}
	switch f.labels.Layout {
	case "":
		f.labels.Layout = convert.LayoutAuto // flags parsed without their defaults (deploy's checks)
	case convert.LayoutAuto, convert.LayoutImageFolder, convert.LayoutFlat:
	default:
		return c, usagef("--layout %q: want auto, imagefolder or flat", f.labels.Layout)
	}
	if f.format != "" { // "" is decided from the inputs
		if _, err := pickFormat(f.format, nil); err != nil {
			return c, err
		}
	}
	return c, checkMediaFlags(f)
}

func runConvert(cmd *cobra.Command, src, dst string, f *convertFlags) (err error) {
	ctx := cmd.Context()
	c, err := f.check()
	if err != nil {
		return err
	}
	warnSlowBuild(cmd.ErrOrStderr())
	shardSize, recipe, taskIndex, taskCount := c.shardSize, c.recipe, c.taskIndex, c.taskCount
	handler := f.handler(recipe)

	opener := &f.io
	listing, format, err := listConvertible(cmd, src, f, handler)
	if err != nil {
		return err
	}
	_, statErr := os.Stat(dst)
	newDst := !cloudsrc.IsRemote(dst) && errors.Is(statErr, fs.ErrNotExist)
	sink, err := opener.OpenSink(ctx, dst)
	if err != nil {
		return err
	}
	if c, ok := sink.(io.Closer); ok {
		defer c.Close()
	}
	defer func() {
		// A run that failed before writing anything leaves no empty
		// folder behind; os.Remove refuses a folder that holds files.
		if err != nil && newDst {
			os.Remove(dst)
		}
	}()
	opts := f.mediaOptions().Record()
	if f.labels.Layout != convert.LayoutAuto {
		opts["layout"] = string(f.labels.Layout) // recorded only when set, so that other runs' manifests stay as they were
	}
	progress, done := newProgress(cmd.ErrOrStderr())
	defer done()
	m, sum, err := convert.Run(ctx, listing, convert.Options{
		Sink: sink, Format: format, Handler: handler,
		Recipe: recipe.String(), OnlineRecipe: c.online.String(), Seed: f.seed, Copies: f.copies, Order: c.order, Options: opts, Version: version, Source: sourceOf(src),
		ShardSize: shardSize, ItemsPerShard: f.itemsPerShard, Workers: f.workers, IOWorkers: f.ioWorkers,
		TaskIndex: taskIndex, TaskCount: taskCount,
		Resume: f.resume, Overwrite: f.overwrite, Strict: f.strict,
		Progress: progress,
	})
	done()
	if err != nil {
		if ctx.Err() != nil {
			return interruptedError{"finished shards are kept: rerun with --resume to finish"}
		}
		return err
	}
	var merged *convert.MergeResult
	if taskCount > 1 && !f.noMerge {
		if merged, err = convert.MergeWhenComplete(ctx, sink, m); err != nil {
			return fmt.Errorf("task %d of %d wrote its shards and %s, but not manifest.json: %w", taskIndex, taskCount, sum.Manifest, err)
		}
	}
	if f.jsonOut {
		if err := writeJSON(cmd.OutOrStdout(), struct {
			*convert.Summary
			Merge *convert.MergeResult `json:"merge,omitempty"`
		}{sum, merged}); err != nil {
			return err
		}
		return checkRun(cmd, listing, sum, f, c.maxSkipped, taskCount)
	}
	printSummary(cmd.OutOrStdout(), m.Format, sum)
	printMerge(cmd.OutOrStdout(), merged)
	return checkRun(cmd, listing, sum, f, c.maxSkipped, taskCount)
}

// checkRun fails a finished run that lost too many inputs, or a class:
// a class whose every input was skipped keeps its index but no sample, so
// a model never learns it. A task of a distributed run sees only its own
// share of the inputs and cannot tell.
func checkRun(cmd *cobra.Command, l *convert.Listing, sum *convert.Summary, f *convertFlags, maxSkipped float64, tasks int) error {
	var lost []string
	if tasks <= 1 {
		for _, e := range l.EmptyAfterRun(sum.Skipped) {
			lost = append(lost, fmt.Sprintf("%q (index %d)", e.Name, e.Index))
		}
	}
	if len(lost) > 0 {
		what := fmt.Sprintf("every input of class %s failed to convert (the summary lists why)", strings.Join(lost, ", "))
		if !f.labels.KeepEmptyClasses {
			return fmt.Errorf("%s: the shards and %s are written, but a model trained on them never sees the class; fix the inputs and rerun with --overwrite, or pass --keep-empty-classes", what, sum.Manifest)
		}
		fmt.Fprintln(cmd.ErrOrStderr(), "warning:", what+"; index kept with no samples (--keep-empty-classes)")
	}
	return checkSkipped(sum, maxSkipped)
}

// printMerge says what a task's automatic merge did.
func printMerge(w io.Writer, r *convert.MergeResult) {
	switch {
	case r == nil:
	case r.State == convert.MergeWritten:
		fmt.Fprintf(w, "merged the parts of %d tasks into %s: %s, %s\n", r.Tasks, r.Manifest, count(r.Shards, "shard"), count(r.Samples, "sample"))
	case r.State == convert.MergeFound:
		fmt.Fprintf(w, "%s: already written, and it is the merge of the parts\n", r.Manifest)
	default:
		tasks := "task"
		if len(r.Waiting) > 1 {
			tasks = "tasks"
		}
		fmt.Fprintf(w, "%s: left to the last task to finish (%d of %d parts here; waiting for %s %s)\n", r.Manifest, r.Parts, r.Tasks, tasks, r.WaitingFor())
	}
}

func pickFormat(name string, l *convert.Listing) (formats.ReadWriteFormat, error) {
	if name == "" {
		// Audio alone defaults to WAV; everything else to HDF5.
		var keys []string
		if l != nil {
			for _, e := range l.Entries {
				keys = append(keys, e.Key)
			}
		}
		name = media.DefaultFormat(keys)
	}
	if f := shardFormats.Format(name); f != nil {
		return f, nil
	}
	names := shardFormats.Names()
	return nil, usagef("--format %q: want %s or %s", name, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

// listConvertible lists SRC, refuses one with nothing prep converts or
// whose labels a run would get wrong (convert.Listing.Check, printing the
// warnings of what the flags allow), picks the shard format and checks the
// media flags: convert and plan both start so. A label problem comes back
// as a *convert.LabelError with the listing, so that plan can report it.
func listConvertible(cmd *cobra.Command, src string, f *convertFlags, handler func(string) convert.Handler) (*convert.Listing, formats.ReadWriteFormat, error) {
	listing, err := listInputs(cmd.Context(), &f.io, src, func(k string) bool { return handler(k) != nil })
	if err != nil {
		return nil, nil, err
	}
	warnings, labelErr := listing.Check(src, f.labels)
	for _, w := range warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
	}
	if labelErr != nil && !errors.As(labelErr, new(*convert.LabelError)) {
		return nil, nil, usageError{labelErr}
	}
	if len(listing.Entries) == 0 {
		return nil, nil, fmt.Errorf("%s holds no inputs prep converts (%d files of other types): it takes %s",
			src, len(listing.Ignored), strings.Join(media.Exts(), " "))
	}
	format, err := pickFormat(f.format, listing)
	if err != nil {
		return nil, nil, err
	}
	if err := checkMediaInputs(cmd, src, listing); err != nil {
		return nil, nil, err
	}
	return listing, format, labelErr
}

// listInputs lists SRC: a CSV/JSONL list of inputs, or a folder, glob or
// gs:// prefix.
func listInputs(ctx context.Context, o *cloudsrc.Opener, src string, handled func(string) bool) (*convert.Listing, error) {
	if convert.IsManifestFile(src) {
		data, err := readURI(ctx, o, src)
		if err != nil {
			return nil, fmt.Errorf("input list %s: %w", src, err)
		}
		base := filepath.Dir(src)
		if cloudsrc.IsRemote(src) {
			base = path.Dir(src)
		}
		return convert.ParseInputList(src, data, func(uri string) (cloudsrc.Source, string, error) {
			return o.Resolve(ctx, base, uri)
		}, handled)
	}
	s, err := o.OpenSource(ctx, src)
	if err != nil {
		return nil, err
	}
	return convert.ListSource(ctx, s, handled)
}

// count says n things, "1 shard" or "3 shards"; plural takes the
// irregular ones.
func count(n int, thing string) string { return plural(n, thing, thing+"s") }

func printSummary(w io.Writer, format string, s *convert.Summary) {
	if s.ShardsWritten == 0 && s.ShardsKept > 0 {
		// A resume with nothing left: no speed to report.
		fmt.Fprintf(w, "nothing to convert: all %s (%s, %s) were finished and are kept\n",
			count(s.ShardsKept, "shard"), count(s.Samples, "sample"), humanBytes(s.Bytes))
	} else {
		// The rate is that of this run's samples; the kept ones, which
		// it did not convert, get their own line.
		fmt.Fprintf(w, "converted %s (%s) into %s in %s: %.0f samples/s, %.1f MB/s\n",
			count(s.Samples-s.SamplesKept, "sample"), humanBytes(s.Bytes-s.BytesKept), count(s.ShardsWritten, "new shard"),
			time.Duration(s.Seconds*float64(time.Second)).Round(time.Millisecond), s.SamplesPerSec, s.MBPerSec)
		if s.ShardsKept > 0 {
			fmt.Fprintf(w, "kept %s (%s) in %s from the earlier run: %s in all\n",
				count(s.SamplesKept, "sample"), humanBytes(s.BytesKept), count(s.ShardsKept, "shard"), count(s.Samples, "sample"))
		}
	}
	if len(s.Skipped) > 0 {
		fmt.Fprintf(w, "skipped %s (listed in the manifest):\n", count(len(s.Skipped), "input"))
		for i, k := range s.Skipped {
			if i == 20 {
				fmt.Fprintf(w, "  ... and %d more\n", len(s.Skipped)-i)
				break
			}
			fmt.Fprintf(w, "  %s: %s\n", k.Key, k.Reason)
		}
	}
	if len(s.Ignored) > 0 {
		fmt.Fprintf(w, "ignored %s (listed in the manifest with why)\n", count(len(s.Ignored), "file"))
	}
	fmt.Fprintf(w, "manifest: %s\n", s.Manifest)
}

func humanBytes(n int64) string { return convert.ByteSize(n) }
