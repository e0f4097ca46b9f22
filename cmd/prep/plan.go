package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/prep-dev/prep/augment"
	"github.com/prep-dev/prep/bench"
	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/convert"
)

func init() { commands = append(commands, newPlanCmd) }

// planFlags are plan's own flags; it takes convert's besides.
type planFlags struct {
	sample    int
	cores     int
	need      string
	disk      string
	probeSize string
}

// convertOnly are convert's flags that change how a run goes, not what it
// makes: plan accepts them, so that a convert command line plans as it is,
// and hides them.
var convertOnly = []string{"task-index", "no-merge", "resume", "overwrite", "strict"}

func newPlanCmd() *cobra.Command {
	var f convertFlags
	var p planFlags
	cmd := &cobra.Command{
		Use:   "plan SRC [DST]",
		Short: "Predict a conversion's shards, bytes, time and GPU feed before running it",
		Long: `plan lists SRC, converts a seeded random sample of its inputs (--sample) in
memory with convert's own decoders, recipe and flags, writes shards of them
with the format's own writer into a temporary folder, and predicts the run
that prep convert SRC DST with the same flags would make:

  - inputs: how many, their bytes; the sample's shape, dtype and bytes;
  - shards: how many (as convert decides them), their size and the total,
    with a range for samples of varying size, taken from the sample's spread;
  - time: the convert rate measured here, the wall time it predicts here and
    on --task-count tasks of --cores cores;
  - feed: the read rate the shards need for --need samples/s (or a preset),
    against DST's disk, measured with a short O_DIRECT read (--probe-size),
    or a cloud disk type (--disk), and which disk types' published limits
    reach it;
  - verdict: whether the shards fit DST's free space and DST's disk feeds
    the need.

It exits 4 when the shards do not fit or the disk cannot feed --need (as
feed-test does when a goal is missed), 2 on a usage error, 1 on a failure.
With DST on gs:// (or none) there is no free space or disk to measure:
--disk names the disk the shards will be read from.

Presets for --need (published training throughputs):
` + needPresets() + `

Disk types for --disk (published sequential read limits; the machine type
can keep a VM below them):
` + diskTypes(),
		Example: `  # what will this conversion make, and can a local disk feed an A100?
  prep plan ./photos /mnt/ssd/shards --recipe "resize=256,crop=224:random,hflip=0.5" --copies 2 --need resnet50-a100
  # the same on 16 tasks of 8 cores, shards read from pd-balanced
  prep plan gs://bkt/raw gs://bkt/shards --recipe recipe.yaml --task-count 16 --cores 8 --need 2470/s --disk pd-balanced --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usagef("plan takes SRC [DST], got %d argument(s) (see prep plan --help)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			dst := ""
			if len(args) == 2 {
				dst = args[1]
			}
			return runPlan(cmd, args[0], dst, &f, &p)
		},
	}
	fl := cmd.Flags()
	addConvertFlags(fl, &f)
	for _, name := range convertOnly {
		fl.MarkHidden(name)
	}
	fl.Lookup("json").Usage = "print the plan as JSON on stdout"
	fl.IntVar(&p.sample, "sample", convert.DefaultEstimateSample, "inputs to convert, picked at random from --seed")
	fl.IntVar(&p.cores, "cores", 0, "cores of each of --task-count machines, for the time it predicts there (default: this machine's)")
	fl.StringVar(&p.need, "need", "", `samples per second training reads, e.g. "2470/s", or a preset: `+strings.Join(needNames(), ", "))
	fl.StringVar(&p.disk, "disk", "", "the cloud disk type the shards will be read from: "+strings.Join(tierNames(), ", "))
	fl.StringVar(&p.probeSize, "probe-size", "256MiB", "bytes written and read back to measure DST's disk; 0 skips it")
	return cmd
}

func needNames() []string {
	var names []string
	for _, n := range bench.Needs {
		names = append(names, n.Name)
	}
	return names
}

func tierNames() []string {
	var names []string
	for _, t := range bench.DiskTiers {
		names = append(names, t.Name)
	}
	return names
}

func diskTypes() string {
	var b strings.Builder
	for _, t := range bench.DiskTiers {
		limit := fmt.Sprintf("%s MiB/s", bench.Commas(t.MiBps))
		if t.PerGiB > 0 {
			limit = fmt.Sprintf("%.2f MiB/s a GiB, up to %s MiB/s a VM", t.PerGiB, bench.Commas(t.MiBps))
		}
		note := ""
		if t.Note != "" {
			note = "; " + t.Note
		}
		fmt.Fprintf(&b, "  %-20s %s%s\n", t.Name, limit, note)
	}
	seen := map[string]bool{}
	for _, t := range bench.DiskTiers {
		if !seen[t.Source] {
			seen[t.Source] = true
			fmt.Fprintf(&b, "  source: %s\n", t.Source)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func needPresets() string {
	var b strings.Builder
	for _, n := range bench.Needs {
		fmt.Fprintf(&b, "  %-20s %7s/s  %s\n", n.Name, bench.Commas(n.SamplesPerSec), n.What)
	}
	fmt.Fprintf(&b, "  (source: %s)", bench.Needs[0].Source)
	return b.String()
}

// planOutput is what plan reports.
type planOutput struct {
	Source string `json:"source"`
	Dest   string `json:"dest,omitempty"`
	Format string `json:"format"`
	Recipe string `json:"recipe"`
	Seed   uint64 `json:"seed"`
	Order  string `json:"order"`

	*convert.Estimate
	Time    planTime        `json:"time"`
	Need    *planNeed       `json:"need,omitempty"`
	Disk    *planDisk       `json:"disk,omitempty"`
	Tiers   []planTier      `json:"tiers,omitempty"`
	Verdict planVerdict     `json:"verdict"`
	Tier    *bench.DiskTier `json:"-"`

	Storage    *planStorage  `json:"storage,omitempty"`
	ClassTable []planClass   `json:"class_table,omitempty"`
	IgnoredBy  []planIgnored `json:"ignored_by_type,omitempty"`
	Refused    []string      `json:"refused,omitempty"` // why convert will refuse the run, as it would say it
	maxSkipped float64
}

// planStorage weighs a split recipe against baking its online ops in
// offline: the split stores one copy of the larger samples; baking stores
// the smaller ones, one copy per fresh view.
type planStorage struct {
	OnlineRecipe string  `json:"online_recipe"`
	SplitBytes   float64 `json:"split_bytes"`      // the shards of this run
	BakedCopy    float64 `json:"baked_copy_bytes"` // one copy with the online ops run by convert
	Copies       []int   `json:"copies"`           // the --copies shown
	Fits         []bool  `json:"fits,omitempty"`   // per Copies, in DST's free space; the split's first
}

// storageOf fills Storage for a recipe with online ops and samples of
// one shape, whose size after the online ops the recipe tells.
func (o *planOutput) storageOf(online *augment.Recipe) {
	e := o.Estimate
	sh := e.Sample.Shape
	if online.String() == "" || len(sh) < 2 || e.Copies < 1 {
		return
	}
	ow, oh, err := online.OutputSize(sh[1], sh[0])
	if err != nil {
		return
	}
	st := &planStorage{OnlineRecipe: online.String(), SplitBytes: e.Bytes.Mean, Copies: []int{1, 5, 10, 30}}
	st.BakedCopy = e.Bytes.Mean / float64(e.Copies) * float64(ow*oh) / float64(sh[0]*sh[1])
	if o.Disk != nil && o.Disk.FreeBytes >= 0 {
		free := float64(o.Disk.FreeBytes)
		st.Fits = append(st.Fits, st.SplitBytes <= free)
		for _, k := range st.Copies {
			st.Fits = append(st.Fits, float64(k)*st.BakedCopy <= free)
		}
	}
	o.Storage = st
}

func (o *planOutput) storageText() string {
	st := o.Storage
	fits := func(i int) string {
		if len(st.Fits) == 0 {
			return ""
		}
		if st.Fits[i] {
			return " (fits)"
		}
		return " (DOES NOT FIT)"
	}
	var baked []string
	for i, k := range st.Copies {
		baked = append(baked, fmt.Sprintf("%d: %s%s", k, humanBytes(int64(float64(k)*st.BakedCopy)), fits(i+1)))
	}
	return fmt.Sprintf("split recipe: %s%s, fresh crops every epoch; the online ops baked in offline, about, with --copies %s (K copies: K fresh views)",
		humanBytes(int64(st.SplitBytes)), fits(0), strings.Join(baked, ", "))
}

// planClass is one class of the run: torchvision's ImageFolder gives a
// folder's classes the same names and indices.
type planClass struct {
	Index  int    `json:"index"`
	Name   string `json:"name"`
	Inputs int    `json:"inputs"`
}

// planIgnored counts the files of one type that no handler takes.
type planIgnored struct {
	Type     string   `json:"type"`
	Files    int      `json:"files"`
	Examples []string `json:"examples"`
}

type planTime struct {
	HereSeconds float64 `json:"here_seconds"` // with this machine's workers
	Tasks       int     `json:"tasks"`
	Cores       int     `json:"cores"`
	Seconds     float64 `json:"seconds"` // on Tasks × Cores at this machine's speed a core
}

type planNeed struct {
	Name          string  `json:"name,omitempty"`
	SamplesPerSec float64 `json:"samples_per_s"`
	SampleBytes   float64 `json:"sample_bytes"` // shard bytes read per sample
	MBps          float64 `json:"mb_per_s"`
	Source        string  `json:"source,omitempty"`
}

type planDisk struct {
	Dir       string          `json:"dir"`
	FreeBytes int64           `json:"free_bytes"`
	Read      *bench.DiskRead `json:"read,omitempty"`
}

type planTier struct {
	bench.DiskTier
	ReadMBps float64 `json:"read_mb_per_s"` // the most it reads, a disk of any size
	Feeds    bool    `json:"feeds"`
	// SizeFor is the disk size at which a per-GiB type reaches the need.
	SizeFor int64 `json:"size_for_need,omitempty"`
}

type planVerdict struct {
	// ConvertExit is the status prep convert will exit with as far as
	// the plan can tell: 1 when it refuses the labels or the sampled inputs
	// fail over --max-skipped.
	ConvertExit int      `json:"convert_exit"`
	ConvertWhy  []string `json:"convert_why,omitempty"`
	Fits        *bool    `json:"fits,omitempty"`  // shards fit DST's free space; absent when unknown
	Feeds       *bool    `json:"feeds,omitempty"` // the judged disk reads fast enough; absent without --need or a disk
	By          string   `json:"by,omitempty"`    // what Feeds judged: the measured disk or a --disk type
	OK          bool     `json:"ok"`
}

// planChecked is what plan's own flags give once checked.
type planChecked struct {
	need  *planNeed       // nil without --need
	tier  *bench.DiskTier // nil without --disk
	probe int64           // bytes of the disk read; 0: none
}

func (p *planFlags) check() (planChecked, error) {
	var c planChecked
	var err error
	if p.sample < 1 || p.cores < 0 {
		return c, usagef("--sample must be 1 or more and --cores 0 (this machine's) or more")
	}
	if c.need, err = planNeedOf(p.need); err != nil {
		return c, err
	}
	if p.disk != "" {
		t, ok := bench.Tier(p.disk)
		if !ok {
			return c, usagef("--disk %q: want one of %s", p.disk, strings.Join(tierNames(), ", "))
		}
		c.tier = &t
	}
	if p.probeSize != "0" {
		if c.probe, err = parseSize(p.probeSize); err != nil {
			return c, usageError{fmt.Errorf("--probe-size: %w", err)}
		}
	}
	return c, nil
}

func runPlan(cmd *cobra.Command, src, dst string, f *convertFlags, p *planFlags) error {
	ctx := cmd.Context()
	c, err := f.check()
	if err != nil {
		return err
	}
	pc, err := p.check()
	if err != nil {
		return err
	}
	handler := f.handler(c.recipe)
	listing, format, err := listConvertible(cmd, src, f, handler)
	var labelErr *convert.LabelError
	if err != nil && !errors.As(err, &labelErr) {
		return err
	}
	local := dst != "" && !cloudsrc.IsRemote(dst)
	base := os.TempDir()
	if local {
		if base, err = filepath.Abs(probeDir(dst)); err != nil {
			return fmt.Errorf("plan: %s: %w", dst, err)
		}
	}
	work, err := os.MkdirTemp(base, ".prep-plan-")
	if err != nil {
		return fmt.Errorf("plan: a work folder in %s: %w (plan measures DST's disk there; set TMPDIR, or give no DST)", base, err)
	}
	defer os.RemoveAll(work)

	est, err := convert.EstimateRun(ctx, listing, convert.EstimateOptions{
		Format: format, Handler: handler,
		Recipe: c.recipe.String(), Seed: f.seed, Copies: f.copies, Order: c.order, Version: version,
		ShardSize: c.shardSize, ItemsPerShard: f.itemsPerShard,
		Sample: p.sample, Workers: f.workers, IOWorkers: f.ioWorkers, TempDir: work,
	})
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	out := &planOutput{Source: src, Dest: dst, Format: format.Name(), Recipe: c.recipe.String(), Seed: f.seed, Order: string(c.order), Estimate: est, Tier: pc.tier}
	out.labels(listing, labelErr, c.maxSkipped)
	out.timeOn(c.taskCount, p.cores)
	out.needOf(pc.need)
	if local {
		if out.Disk, err = measureDisk(cmd, base, work, pc.probe); err != nil {
			return err
		}
	}
	out.storageOf(c.online)
	out.judge()
	if f.jsonOut {
		err = writeJSON(cmd.OutOrStdout(), out)
	} else {
		err = out.writeText(cmd.OutOrStdout())
	}
	if err != nil {
		return err
	}
	if !out.Verdict.OK {
		return exitError{exitThreshold, errors.New("plan: " + out.failure())}
	}
	return nil
}

// timeOn predicts the wall time here and on tasks machines of cores
// cores (0: as many as here).
func (o *planOutput) timeOn(tasks, cores int) {
	if cores == 0 {
		cores = runtime.NumCPU()
	}
	o.Time = planTime{HereSeconds: o.Estimate.Seconds(1, 0), Tasks: tasks, Cores: cores, Seconds: o.Estimate.Seconds(tasks, cores)}
}

// needOf turns the samples/s training needs into the bytes/s it reads
// from the shards.
func (o *planOutput) needOf(n *planNeed) {
	if n == nil {
		return
	}
	n.SampleBytes = o.Bytes.Mean / max(o.Samples, 1)
	n.MBps = n.SamplesPerSec * n.SampleBytes / 1e6
	o.Need = n
}

// planNeedOf reads --need: a preset's name or samples per second.
func planNeedOf(s string) (*planNeed, error) {
	if s == "" {
		return nil, nil
	}
	if n, ok := bench.NeedNamed(s); ok {
		return &planNeed{Name: n.Name, SamplesPerSec: n.SamplesPerSec, Source: n.Source}, nil
	}
	rate, err := parseNeed(s, 0, 1)
	if err != nil {
		return nil, usagef(`--need %q: want samples per second, such as "2470/s", or a preset: %s`, s, strings.Join(needNames(), ", "))
	}
	return &planNeed{SamplesPerSec: rate}, nil
}

// probeDir is where plan writes on DST's file system: the nearest
// ancestor of DST that exists, never DST itself unless it is a mount of
// its own (a leftover of a killed plan would make convert refuse DST).
func probeDir(dst string) string {
	p := filepath.Clean(dst)
	for {
		parent := filepath.Dir(p)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			if p == filepath.Clean(dst) && parent != p && bench.SameFileSystem(p, parent) {
				return parent
			}
			return p
		}
		if parent == p {
			return p
		}
		p = parent
	}
}

// measureDisk reads DST's free space and, unless probe is 0 or would not
// fit, its sequential read speed.
func measureDisk(cmd *cobra.Command, dir, work string, probe int64) (*planDisk, error) {
	d := &planDisk{Dir: dir, FreeBytes: -1}
	free, err := bench.FreeBytes(dir)
	if err == nil {
		d.FreeBytes = free
	}
	if probe == 0 || (err == nil && free < 2*probe) {
		return d, nil
	}
	if d.Read, err = bench.ReadDisk(cmd.Context(), work, probe); err != nil {
		return nil, fmt.Errorf("plan: %w (--probe-size 0 skips the measurement)", err)
	}
	return d, nil
}

// judge decides whether the shards fit and the disk feeds the need.
func (o *planOutput) judge() {
	v := &o.Verdict
	v.OK = true
	v.ConvertWhy = append(v.ConvertWhy, o.Refused...)
	if e := o.Estimate; e.Sampled > 0 && len(e.Failed) > 0 {
		if share := float64(len(e.Failed)) / float64(e.Sampled); share > o.maxSkipped {
			v.ConvertWhy = append(v.ConvertWhy, fmt.Sprintf("%d of the %d sampled inputs failed (%.1f%%), over --max-skipped %g%%: convert would skip about %.0f of %s and exit 1",
				len(e.Failed), e.Sampled, 100*share, 100*o.maxSkipped, share*float64(e.Inputs), count(e.Inputs, "input")))
		}
	}
	if len(v.ConvertWhy) > 0 {
		v.ConvertExit = 1
		v.OK = false
	}
	if o.Disk != nil && o.Disk.FreeBytes >= 0 {
		fits := o.Bytes.High <= float64(o.Disk.FreeBytes)
		v.Fits = &fits
		v.OK = fits
	}
	if o.Need == nil {
		return
	}
	for _, t := range bench.DiskTiers {
		mbps := t.ReadMBps(0)
		o.Tiers = append(o.Tiers, planTier{DiskTier: t, ReadMBps: mbps, Feeds: mbps >= o.Need.MBps, SizeFor: t.SizeFor(o.Need.MBps)})
	}
	var feeds bool
	switch {
	case o.Tier != nil:
		// A disk of this type large enough (SizeFor) reads up to its cap.
		feeds = o.Tier.ReadMBps(0) >= o.Need.MBps
		v.By = "--disk " + o.Tier.Name
	case o.Disk != nil && o.Disk.Read != nil:
		feeds = o.Disk.Read.MBps >= o.Need.MBps
		v.By = "the disk under " + o.Disk.Dir
	default:
		return
	}
	v.Feeds = &feeds
	v.OK = v.OK && feeds
}

// failure says why the verdict is no.
func (o *planOutput) failure() string {
	var why []string
	if v := o.Verdict; v.Fits != nil && !*v.Fits {
		why = append(why, fmt.Sprintf("the shards (up to %s) do not fit the %s free under %s", humanBytes(int64(o.Bytes.High)), humanBytes(o.Disk.FreeBytes), o.Disk.Dir))
	}
	if n := len(o.Verdict.ConvertWhy); n > 0 {
		why = append(why, fmt.Sprintf("convert will exit %d (%s printed above)", o.Verdict.ConvertExit, count(n, "reason")))
	}
	if v := o.Verdict; v.Feeds != nil && !*v.Feeds {
		why = append(why, fmt.Sprintf("%s reads slower than the %.0f MB/s that %s samples/s need", v.By, o.Need.MBps, bench.Commas(o.Need.SamplesPerSec)))
	}
	return strings.Join(why, "; ")
}

// span prints an estimate, with its range when it is wider than the
// digits printed.
func span(s convert.Span) string {
	if s.High-s.Low < 0.002*s.Mean {
		return humanBytes(int64(s.Mean + 0.5))
	}
	return fmt.Sprintf("%s (%s–%s)", humanBytes(int64(s.Mean+0.5)), humanBytes(int64(s.Low+0.5)), humanBytes(int64(s.High+0.5)))
}

func duration(seconds float64) string {
	d := time.Duration(seconds * float64(time.Second))
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute).String()
	case d >= time.Second:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

// writeText prints the plan, a line a topic.
func (o *planOutput) writeText(w io.Writer) error {
	e := o.Estimate
	dst := o.Dest
	if dst == "" {
		dst = "(no DST)"
	}
	fmt.Fprintf(w, "plan      %s -> %s: %s, recipe %q, seed %d, %s, order %s\n", o.Source, dst, o.Format, o.Recipe, o.Seed, plural(e.Copies, "copy", "copies"), o.Order)
	fmt.Fprintf(w, "inputs    %s\n", o.inputsText())
	for _, line := range o.classLines() {
		fmt.Fprintf(w, "          %s\n", line)
	}
	for _, g := range o.IgnoredBy {
		fmt.Fprintf(w, "          ignored %s: %s\n", count(g.Files, g.Type+" file"), strings.Join(g.Examples, ", "))
	}
	fmt.Fprintf(w, "sample    %s\n", o.sampleText())
	for i, k := range e.Failed {
		if i == 5 {
			fmt.Fprintf(w, "          ... and %d more\n", len(e.Failed)-i)
			break
		}
		fmt.Fprintf(w, "          failed %s: %s\n", k.Key, k.Reason)
	}
	fmt.Fprintf(w, "shards    %s of %s: %s each, the last %s; %.0f samples, %s in all\n",
		count(e.Shards, "shard"), count(e.ItemsPerShard, "item"), span(e.ShardBytes), span(e.LastShard), e.Samples, span(e.Bytes))
	if o.Storage != nil {
		fmt.Fprintf(w, "storage   %s\n", o.storageText())
	}
	fmt.Fprintf(w, "convert   %s\n", o.timeText())
	if n := o.Need; n != nil {
		name := ""
		if n.Name != "" {
			name = " (" + n.Name + ")"
		}
		fmt.Fprintf(w, "need      %s samples/s%s × %s read a sample = %.1f MB/s\n", bench.Commas(n.SamplesPerSec), name, humanBytes(int64(n.SampleBytes+0.5)), n.MBps)
	}
	if o.Disk != nil {
		fmt.Fprintf(w, "disk      %s\n", o.diskText())
	}
	if len(o.Tiers) > 0 {
		fmt.Fprintf(w, "tiers     %s\n", o.tiersText())
	}
	for _, why := range o.Verdict.ConvertWhy {
		fmt.Fprintf(w, "refuses   %s\n", why)
	}
	fmt.Fprintf(w, "verdict   %s\n", o.verdictText())
	return nil
}

func (o *planOutput) inputsText() string {
	e := o.Estimate
	inputBytes := humanBytes(e.InputBytes)
	if e.InputBytesSampled {
		inputBytes = "about " + inputBytes
	}
	classes := ""
	if e.Classes > 0 {
		classes = ", " + plural(e.Classes, "class", "classes")
	}
	return fmt.Sprintf("%s, %s%s: %s", count(e.Inputs, "input"), inputBytes, classes, count(e.Items, "item"))
}

func (o *planOutput) sampleText() string {
	e := o.Estimate
	shape := "samples of varying shape"
	if e.Sample.Shape != nil {
		shape = dims(e.Sample.Shape)
	}
	size := humanBytes(int64(e.Sample.Bytes + 0.5))
	if e.Sample.Min != e.Sample.Max {
		size = fmt.Sprintf("%s on average (%s–%s)", size, humanBytes(e.Sample.Min), humanBytes(e.Sample.Max))
	}
	perItem := ""
	if e.Sample.PerItem != 1 {
		perItem = fmt.Sprintf(", %.3g samples an item", e.Sample.PerItem)
	}
	return fmt.Sprintf("%d of %s converted, %d failed: %s %s, %s a sample%s",
		e.Sampled, count(e.Inputs, "input"), len(e.Failed), shape, e.Sample.DType, size, perItem)
}

func (o *planOutput) timeText() string {
	r := o.Estimate.Rate
	write := ""
	if r.WriteMBps > 0 {
		write = fmt.Sprintf(", write %.0f MB/s", r.WriteMBps)
	}
	s := fmt.Sprintf("%.1f items/s here (%s, %.1f a core), fetch %.0f MB/s%s: %s here",
		r.ItemsPerSec, count(r.Workers, "worker"), r.CorePerSec, r.FetchMBps, write, duration(o.Time.HereSeconds))
	if o.Time.Tasks > 1 || o.Time.Cores != r.Workers {
		s += fmt.Sprintf(", %s of %s: %s", count(o.Time.Tasks, "task"), count(o.Time.Cores, "core"), duration(o.Time.Seconds))
	}
	return s
}

func (o *planOutput) diskText() string {
	d := o.Disk
	free := "free space unknown"
	if d.FreeBytes >= 0 {
		free = humanBytes(d.FreeBytes) + " free"
	}
	read := "read not measured"
	if r := d.Read; r != nil {
		read = fmt.Sprintf("reads %.0f MB/s sequentially (%s, %s)", r.MBps, r.Method, humanBytes(r.Bytes))
	}
	return fmt.Sprintf("%s: %s, %s", d.Dir, free, read)
}

func (o *planOutput) tiersText() string {
	var feed, slow []string
	for _, t := range o.Tiers {
		switch {
		case t.Feeds && t.SizeFor > 0:
			feed = append(feed, fmt.Sprintf("%s of %s or more", t.Name, humanBytes(t.SizeFor)))
		case t.Feeds:
			feed = append(feed, t.Name)
		default:
			slow = append(slow, fmt.Sprintf("%s (%.0f MB/s)", t.Name, t.ReadMBps))
		}
	}
	return fmt.Sprintf("published limits that reach %.1f MB/s: %s; too slow: %s",
		o.Need.MBps, orNone(strings.Join(feed, ", ")), orNone(strings.Join(slow, ", ")))
}

func (o *planOutput) verdictText() string {
	var parts []string
	v := o.Verdict
	if v.ConvertExit != 0 {
		parts = append(parts, fmt.Sprintf("CONVERT WILL EXIT %d (%s above)", v.ConvertExit, count(len(v.ConvertWhy), "reason")))
	}
	switch {
	case v.Fits == nil:
		parts = append(parts, "free space not checked (no local DST)")
	case *v.Fits:
		parts = append(parts, fmt.Sprintf("fits: %s of %s free", span(o.Bytes), humanBytes(o.Disk.FreeBytes)))
	default:
		parts = append(parts, fmt.Sprintf("DOES NOT FIT: %s, %s free", span(o.Bytes), humanBytes(o.Disk.FreeBytes)))
	}
	switch {
	case o.Need == nil:
		parts = append(parts, "no --need to judge the feed by")
	case v.Feeds == nil:
		parts = append(parts, "feed not judged (give a local DST or --disk)")
	case *v.Feeds:
		parts = append(parts, fmt.Sprintf("feeds: %s reads %.0f MB/s%s, %.1f× the %.1f MB/s needed", v.By, o.judgedMBps(), o.sized(), o.judgedMBps()/o.Need.MBps, o.Need.MBps))
	default:
		parts = append(parts, fmt.Sprintf("DOES NOT FEED: %s reads %.0f MB/s at most, %.1f MB/s needed", v.By, o.judgedMBps(), o.Need.MBps))
	}
	return strings.Join(parts, "; ")
}

func (o *planOutput) judgedMBps() float64 {
	if o.Tier != nil {
		return o.Tier.ReadMBps(0)
	}
	return o.Disk.Read.MBps
}

// sized says how large a --disk of a per-GiB type must be to feed.
func (o *planOutput) sized() string {
	if o.Tier == nil || o.Tier.PerGiB == 0 {
		return ""
	}
	return fmt.Sprintf(" (a disk of %s or more)", humanBytes(o.Tier.SizeFor(o.Need.MBps)))
}

// dims reads "224×224×3".
func dims(shape []int) string {
	s := make([]string, len(shape))
	for i, d := range shape {
		s[i] = fmt.Sprint(d)
	}
	return strings.Join(s, "×")
}

// plural says n things with the right form: "1 copy", "2 copies".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// labels records what convert will do to the labels: the class table, the
// files it ignores by type, and the label problems it will refuse.
func (o *planOutput) labels(l *convert.Listing, refused *convert.LabelError, maxSkipped float64) {
	o.maxSkipped = maxSkipped
	if refused != nil {
		o.Refused = refused.Problems
	}
	inputs := make([]int, len(l.Classes))
	for _, e := range l.Entries {
		if e.Label >= 0 && int(e.Label) < len(inputs) {
			inputs[e.Label]++
		}
	}
	for i, c := range l.Classes {
		o.ClassTable = append(o.ClassTable, planClass{Index: i, Name: c, Inputs: inputs[i]})
	}
	byType := map[string]*planIgnored{}
	for _, s := range l.Ignored {
		t := strings.ToLower(filepath.Ext(s.Key))
		if !strings.HasPrefix(s.Reason, "unsupported") {
			t = "other"
		} else if t == "" {
			t = "(no extension)"
		}
		g := byType[t]
		if g == nil {
			g = &planIgnored{Type: t}
			byType[t] = g
		}
		g.Files++
		if len(g.Examples) < 3 {
			g.Examples = append(g.Examples, s.Key)
		}
	}
	for _, g := range byType {
		o.IgnoredBy = append(o.IgnoredBy, *g)
	}
	slices.SortFunc(o.IgnoredBy, func(a, b planIgnored) int { return cmp.Or(b.Files-a.Files, strings.Compare(a.Type, b.Type)) })
}

// classLines prints the class table, the first and last classes of a long
// one.
func (o *planOutput) classLines() []string {
	const head = 20
	var lines []string
	for i, c := range o.ClassTable {
		if len(o.ClassTable) > head+5 && i == head {
			lines = append(lines, fmt.Sprintf("  ... %d more classes (--json lists them all)", len(o.ClassTable)-head-1))
			continue
		}
		if len(o.ClassTable) > head+5 && i > head && i < len(o.ClassTable)-1 {
			continue
		}
		lines = append(lines, fmt.Sprintf("class %d %q: %s", c.Index, c.Name, count(c.Inputs, "input")))
	}
	return lines
}
