package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/convert"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/manifest"
	"github.com/prep-dev/prep/formats/tarshard"
)

func init() { commands = append(commands, newInspectCmd) }

// inspectFlags are inspect's flags.
type inspectFlags struct {
	verify, jsonOut bool
	rebuild         int             // items to re-convert; 0: none
	rebuildSeed     uint64          // picks them
	src             string          // SRC in place of the manifest's
	staging         string          // where gs:// shards are downloaded
	io              cloudsrc.Opener // gs:// transfer flags
}

func newInspectCmd() *cobra.Command {
	var f inspectFlags
	cmd := &cobra.Command{
		Use:   "inspect DIR|SHARD|gs://BUCKET/PREFIX",
		Short: "Show what shards hold; --verify checks them against the manifest, --rebuild against their inputs",
		Long: `inspect prints a shard directory's manifest (dataset ID, source, recipe,
seed, classes, shards, datasets with their shapes and byte offsets, skipped
inputs), or the datasets of a single .h5 shard or the first sample of a .tar
shard.

--verify recomputes every shard's sha256 and size, and for HDF5 re-reads the
dataset offsets and shapes, and checks the dataset ID against the shards'
checksums; it exits 1 on any mismatch. Given one shard, it checks that shard
against the manifest.json in the same folder.

--rebuild K re-converts K items, picked at random from --rebuild-seed, from
the inputs the manifest records (its source, or --src), with the recipe,
seed and options the manifest records, and compares every resulting
sample's label, tensors and (tar) augmentation parameters byte for byte
with the shards. It proves the shards are what the recipe makes from these
inputs, and catches a changed input or a damaged shard that checksums alone
cannot tell from a rewritten one. It names every mismatch (key, shard, what
differs) and exits 1 on any. For a gs:// folder it downloads only the
shards it compares (--staging).`,
		Example: `  prep inspect ./shards
  prep inspect ./shards --verify
  prep inspect ./shards/shard-000000.h5
  prep inspect ./shards/shard-000000.h5 --verify
  # re-convert 32 random items from their inputs and compare with the shards
  prep inspect ./shards --rebuild 32
  prep inspect gs://bkt/shards --rebuild 32 --src gs://bkt/raw`,
		Args: positional("DIR|SHARD"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.rebuild < 0 {
				return usagef("--rebuild %d: want a number of items to re-convert (0: none)", f.rebuild)
			}
			if err := checkIO(f.io); err != nil {
				return err
			}
			if cloudsrc.IsRemote(args[0]) {
				return inspectRemote(cmd, args[0], &f)
			}
			return runInspect(cmd, args[0], &f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.verify, "verify", false, "recompute checksums, dataset offsets and the dataset ID; exit 1 on a mismatch")
	fl.BoolVar(&f.jsonOut, "json", false, "print the manifest (or the shard's description, or the --rebuild result) as JSON")
	fl.IntVar(&f.rebuild, "rebuild", 0, "re-convert this many random items from their inputs and compare them with the shards; exit 1 on a mismatch")
	fl.Uint64Var(&f.rebuildSeed, "rebuild-seed", 0, "seed that picks the --rebuild items")
	fl.StringVar(&f.src, "src", "", "--rebuild from these inputs instead of the source the manifest records (moved inputs, or a manifest of an older prep)")
	fl.StringVar(&f.staging, "staging", "", "where --rebuild downloads gs:// and s3:// shards (default $PREP_STAGING, else the system temp folder)")
	ioFlags(fl, &f.io, 30*time.Minute)
	return cmd
}

func runInspect(cmd *cobra.Command, target string, f *inspectFlags) error {
	w := cmd.OutOrStdout()
	if err := needTarget("inspect", target); err != nil {
		return err
	}
	st, err := os.Stat(target)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", target, err)
	}
	if !st.IsDir() {
		if f.rebuild > 0 {
			return usagef("inspect %s --rebuild: give the shard folder, whose manifest names the inputs", target)
		}
		if err := inspectShard(w, target, f.jsonOut); err != nil || !f.verify {
			return err
		}
		return verifyOne(w, target)
	}
	m, err := manifest.Read(target)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s has no %s: not a prep output folder, or the run did not finish (rerun convert with --resume)", target, manifest.FileName)
		}
		return err
	}
	if f.jsonOut && !f.verify && f.rebuild == 0 {
		data, err := manifest.Marshal(m)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	if !f.jsonOut {
		printManifest(w, m)
	}
	if f.verify {
		if err := verifyDir(w, target, m); err != nil {
			return err
		}
	}
	if f.rebuild == 0 {
		return nil
	}
	local := func(_ context.Context, file string) (string, error) { return filepath.Join(target, file), nil }
	return rebuild(cmd, m, target, local, f)
}

// verifyDir checks every shard of a folder, and the dataset ID, against
// the manifest.
func verifyDir(w io.Writer, dir string, m *manifest.Manifest) error {
	var bad []string
	checked := 0 // a shard whose inputs were all skipped has no file to check
	for _, s := range m.Shards {
		if s.File == "" {
			continue
		}
		checked++
		if problem := verifyShard(filepath.Join(dir, s.File), s); problem != "" {
			bad = append(bad, s.File+": "+problem)
		}
	}
	if id := manifest.DatasetID(m); m.DatasetID != "" && m.DatasetID != id {
		bad = append(bad, fmt.Sprintf("%s: dataset_id %s, but its recipe, seed, order and shard checksums give %s: the manifest was edited", manifest.FileName, m.DatasetID, id))
	}
	if len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintln(w, "FAIL", b)
		}
		return fmt.Errorf("%d of %d shards failed verification: rerun convert with --resume to rewrite them", len(bad), checked)
	}
	fmt.Fprintf(w, "verified %s: checksums and sizes match the manifest\n", count(checked, "shard"))
	return nil
}

// inspectRemote prints, or rebuilds from, a manifest in a bucket.
func inspectRemote(cmd *cobra.Command, target string, f *inspectFlags) error {
	ctx := cmd.Context()
	base := strings.TrimSuffix(target, "/")
	if f.verify {
		return usagef("inspect %s --verify reads every shard: for gs:// use --rebuild K (downloads only the shards it compares), or bench-read %s (downloads all and checks their sha256)", target, target)
	}
	data, err := readURI(ctx, &f.io, base+"/"+manifest.FileName)
	if err != nil {
		return fmt.Errorf("inspect %s: %w (is it the DST of a finished prep convert?)", target, err)
	}
	m, err := manifest.Parse(data)
	if err != nil {
		return fmt.Errorf("%s/%s: %w", base, manifest.FileName, err)
	}
	if f.jsonOut && f.rebuild == 0 {
		_, err := cmd.OutOrStdout().Write(data)
		return err
	}
	if !f.jsonOut {
		printManifest(cmd.OutOrStdout(), m)
	}
	if f.rebuild == 0 {
		return nil
	}
	dir, err := os.MkdirTemp(stagingDir(f.staging), "prep-rebuild-")
	if err != nil {
		return fmt.Errorf("inspect --rebuild: staging folder: %w (choose another with --staging or PREP_STAGING)", err)
	}
	defer os.RemoveAll(dir)
	return rebuild(cmd, m, base, stager(&f.io, base, dir), f)
}

// stager downloads shards of the folder base into dir, one at a time:
// Rebuild asks for each shard once, in order, so the one before is
// removed.
func stager(o *cloudsrc.Opener, base, dir string) func(context.Context, string) (string, error) {
	var prev string
	return func(ctx context.Context, file string) (string, error) {
		if prev != "" {
			os.Remove(prev)
		}
		prev = filepath.Join(dir, file)
		rc, err := o.OpenURI(ctx, base+"/"+file)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		out, err := os.Create(prev)
		if err != nil {
			return "", fmt.Errorf("stage %s: %w (choose another --staging)", file, err)
		}
		if _, err := io.Copy(out, rc); err != nil {
			out.Close()
			return "", fmt.Errorf("download %s/%s: %w", base, file, err)
		}
		return prev, out.Close()
	}
}

func readURI(ctx context.Context, o *cloudsrc.Opener, uri string) ([]byte, error) {
	rc, err := o.OpenURI(ctx, uri)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// rebuild re-converts --rebuild items from the run's inputs and compares
// them with its shards, which shard opens; dir is the run's folder (or
// gs:// prefix), where its input list lies.
func rebuild(cmd *cobra.Command, m *manifest.Manifest, dir string, shard func(context.Context, string) (string, error), f *inspectFlags) error {
	ctx, w := cmd.Context(), cmd.OutOrStdout()
	src := f.src
	if src == "" {
		src = string(m.Source)
	}
	if src == "" {
		return usagef("the manifest records no source (written by an older prep): pass the inputs with --src SRC")
	}
	flags, recipe, err := flagsOf(m)
	if err != nil {
		return fmt.Errorf("inspect --rebuild: %w", err)
	}
	handler := flags.handler(recipe)
	listing, err := listInputs(ctx, &f.io, src, func(k string) bool { return handler(k) != nil })
	if err != nil {
		return fmt.Errorf("inspect --rebuild: list the inputs: %w", err)
	}
	// The classes the run kept are in the manifest; Rebuild compares them.
	if _, err := listing.Check(src, convert.LabelRules{Layout: flags.labels.Layout, KeepEmptyClasses: true, IgnoreStrays: true}); err != nil {
		return fmt.Errorf("inspect --rebuild: %w", err)
	}
	if err := checkMediaInputs(cmd, src, listing); err != nil {
		return err
	}
	format, err := pickFormat(m.Format, listing)
	if err != nil {
		return fmt.Errorf("inspect --rebuild: manifest format: %w", err)
	}
	res, err := convert.Rebuild(ctx, listing, m, convert.RebuildOptions{
		Format: format, Handler: handler, Items: f.rebuild, Seed: f.rebuildSeed, Shard: shard,
		Inputs: func(ctx context.Context) ([]byte, error) {
			return readURI(ctx, &f.io, strings.TrimSuffix(dir, "/")+"/"+manifest.InputsFileName)
		},
	})
	if err != nil {
		return fmt.Errorf("inspect --rebuild from %s: %w", src, err)
	}
	if f.jsonOut {
		if err := writeJSON(w, struct {
			DatasetID string       `json:"dataset_id"`
			Source    formats.Name `json:"source"`
			*convert.Rebuilt
		}{m.DatasetID, formats.Name(src), res}); err != nil {
			return err
		}
	} else {
		if res.SourceChanged != "" {
			fmt.Fprintf(w, "the source changed since the run (%s); the inputs kept their names and labels, so they are compared all the same\n", res.SourceChanged)
		}
		for _, mm := range res.Mismatches {
			fmt.Fprintf(w, "MISMATCH %s %s: %s\n", mm.Shard, mm.Key, mm.Problem)
		}
		fmt.Fprintf(w, "rebuilt %s from %s (seed %d): %s compared byte for byte with %s, %d skipped as the run skipped them, %d mismatched\n",
			count(res.Items, "item"), src, f.rebuildSeed, count(res.Samples, "sample"), count(res.Shards, "shard"), res.Skipped, len(res.Mismatches))
	}
	if len(res.Mismatches) > 0 && res.SourceChanged != "" {
		return fmt.Errorf("--rebuild: %s (listed above) between the shards and what the recipe makes from %s: the source changed since the run (%s); rebuild from the inputs the run read (--src) to check the shards themselves",
			plural(len(res.Mismatches), "mismatch", "mismatches"), src, res.SourceChanged)
	}
	if len(res.Mismatches) > 0 && m.InputsSHA256 != "" {
		return fmt.Errorf("--rebuild: %s (listed above) between the shards and what the recipe makes from %s, whose inputs are the run's (names, labels, sizes and times): the bytes differ, so a shard was damaged (prep inspect --verify) or this prep converts differently",
			plural(len(res.Mismatches), "mismatch", "mismatches"), src)
	}
	if len(res.Mismatches) > 0 {
		return fmt.Errorf("--rebuild: %s (listed above) between the shards and what the recipe makes from %s: an input changed since the run, or a shard was damaged",
			plural(len(res.Mismatches), "mismatch", "mismatches"), src)
	}
	return nil
}

// verifyOne checks a single shard against the manifest.json beside it.
func verifyOne(w io.Writer, path string) error {
	dir, file := filepath.Split(path)
	m, err := manifest.Read(filepath.Clean(dir))
	if errors.Is(err, os.ErrNotExist) {
		return usagef("inspect %s --verify: no %s beside the shard to check it against; keep the shard in its folder, or verify the folder (prep inspect DIR --verify)", path, manifest.FileName)
	}
	if err != nil {
		return err
	}
	i := slices.IndexFunc(m.Shards, func(s manifest.Shard) bool { return s.File == file })
	if i < 0 {
		return fmt.Errorf("inspect %s --verify: %s does not list %s: it belongs to another run", path, filepath.Join(dir, manifest.FileName), file)
	}
	if problem := verifyShard(path, m.Shards[i]); problem != "" {
		fmt.Fprintln(w, "FAIL", file+": "+problem)
		return fmt.Errorf("%s failed verification: rerun convert with --resume to rewrite it", path)
	}
	fmt.Fprintf(w, "verified %s: checksum and size match the manifest\n", file)
	return nil
}

// verifyShard returns what is wrong with one shard, or "".
func verifyShard(path string, s manifest.Shard) string {
	sum, size, err := convert.FileSHA256(path)
	if err != nil {
		return err.Error()
	}
	if size != s.Bytes {
		return fmt.Sprintf("size %d, manifest says %d", size, s.Bytes)
	}
	if sum != s.SHA256 {
		return "sha256 mismatch: the file changed after it was written"
	}
	r, err := shardFormats.Open(path, nil) // the file's own layout, not the manifest's
	if err != nil {
		return err.Error()
	}
	got := r.Spans()
	r.Close()
	byName := map[string]formats.DatasetInfo{}
	for _, d := range got {
		byName[d.Name] = d
	}
	for _, want := range s.Datasets {
		d, ok := byName[want.Name]
		switch {
		case !ok:
			return fmt.Sprintf("dataset %s missing", want.Name)
		case d.Offset != want.Offset:
			return fmt.Sprintf("dataset %s at offset %d, manifest says %d", want.Name, d.Offset, want.Offset)
		case !slices.Equal(d.Shape, want.Shape):
			return fmt.Sprintf("dataset %s shape %v, manifest says %v", want.Name, d.Shape, want.Shape)
		}
	}
	return ""
}

func printManifest(w io.Writer, m *manifest.Manifest) {
	fmt.Fprintf(w, "format %s (version %d), prep %s, seed %d, copies %d, order %s\n", m.Format, m.FormatVersion, m.Version, m.Seed, m.Copies, m.Order)
	if m.DatasetID != "" {
		fmt.Fprintf(w, "dataset id: %s\n", m.DatasetID)
	} else {
		fmt.Fprintf(w, "dataset id: none recorded (an older prep); its shards give %s\n", manifest.DatasetID(m))
	}
	if m.Source != "" {
		fmt.Fprintf(w, "source: %s\n", m.Source)
	}
	fmt.Fprintf(w, "recipe: %s\n", orNone(m.Recipe))
	if m.OnlineRecipe != "" {
		fmt.Fprintf(w, "online recipe: %s (prepshards runs it on every sample, every epoch)\n", m.OnlineRecipe)
	}
	if len(m.Classes) > 0 {
		fmt.Fprintf(w, "classes (%d): %s\n", len(m.Classes), strings.Join(first(m.Classes, 20), ", "))
	}
	fmt.Fprintf(w, "%s in %s, %s; %d skipped, %d ignored\n",
		count(m.Samples, "sample"), count(len(m.Shards), "shard"), humanBytes(m.Bytes), len(m.Skipped), len(m.Ignored))
	for _, s := range m.Shards {
		if s.File == "" {
			fmt.Fprintf(w, "  shard %d: empty (%d inputs skipped)\n", s.Index, len(s.Skipped))
			continue
		}
		var ds []string
		for _, d := range s.Datasets {
			ds = append(ds, fmt.Sprintf("%s %s%v@%d", d.Name, d.DType, d.Shape, d.Offset))
		}
		fmt.Fprintf(w, "  %s  %s  %s  %s\n", s.File, count(s.Count, "sample"), humanBytes(s.Bytes), strings.Join(ds, "  "))
	}
	for _, k := range firstSkipped(m.Skipped, 20) {
		fmt.Fprintf(w, "  skipped %s: %s\n", k.Key, k.Reason)
	}
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("... %d more", len(s)-n))
	}
	return s
}

func firstSkipped(s []manifest.Skipped, n int) []manifest.Skipped {
	return s[:min(n, len(s))]
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func inspectShard(w io.Writer, path string, jsonOut bool) error {
	if shardFormats.ForFile(path) == nil {
		return usagef("inspect %s: want a folder with manifest.json, or a shard (a file ending in %s)", path, strings.Join(shardFormats.Exts(), ", "))
	}
	r, err := shardFormats.Open(path, nil)
	if err != nil {
		return err
	}
	defer r.Close()
	var v any
	switch ds := r.Spans(); {
	case ds != nil:
		mr, ok := r.(formats.MetaReader)
		if !ok {
			return fmt.Errorf("inspect %s: its format records no run description", path)
		}
		meta, err := mr.Meta()
		if err != nil {
			return err
		}
		samples := r.Count()
		if !jsonOut {
			fmt.Fprintf(w, "%s: %s, prep %s, seed %d\nrecipe: %s\n", filepath.Base(path), count(samples, "sample"), meta.Version, meta.Seed, orNone(meta.Recipe))
			if len(meta.Classes) > 0 {
				fmt.Fprintf(w, "classes (%d): %s\n", len(meta.Classes), strings.Join(first(meta.Classes, 20), ", "))
			}
			for _, d := range ds {
				where := fmt.Sprintf("offset %d", d.Offset)
				if d.Offset < 0 {
					where = "chunked or filtered: read through the HDF5 library"
				}
				fmt.Fprintf(w, "%-10s %-8s %-20s %10s  %s\n", d.Name, d.DType, fmt.Sprint(d.Shape), humanBytes(d.Size), where)
			}
			return nil
		}
		v = struct {
			File     string                `json:"file"`
			Samples  int                   `json:"samples"`
			Version  string                `json:"version"`
			Recipe   string                `json:"recipe"`
			Seed     uint64                `json:"seed"`
			Classes  formats.Names         `json:"classes,omitempty"`
			Datasets []formats.DatasetInfo `json:"datasets"`
		}{filepath.Base(path), samples, meta.Version, meta.Recipe, meta.Seed, meta.Classes, ds}
	default:
		s, err := tarshard.Describe(path)
		if err != nil {
			return err
		}
		if !jsonOut {
			fmt.Fprintf(w, "%s: %s, %s, sha256 %s\nfirst sample %s: members %s, %s%v", s.File, count(s.Count, "sample"), humanBytes(s.Bytes), s.SHA256, s.Key, strings.Join(s.Members, " "), s.DType, s.Shape)
			if s.Rate > 0 {
				fmt.Fprintf(w, " at %d Hz", s.Rate)
			}
			fmt.Fprintln(w)
			return nil
		}
		v = s
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
