package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/prep-dev/prep/convert"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/formats/manifest"
	"github.com/prep-dev/prep/formats/tarshard"
)

func init() { commands = append(commands, newInspectCmd) }

func newInspectCmd() *cobra.Command {
	var verify, jsonOut bool
	cmd := &cobra.Command{
		Use:   "inspect DIR|SHARD",
		Short: "Show what shards hold; --verify checks them against the manifest",
		Long: `inspect prints a shard directory's manifest (recipe, seed, classes, shards,
datasets with their shapes and byte offsets, skipped inputs), or the datasets
of a single .h5 shard or the first sample of a .tar shard.

--verify recomputes every shard's sha256 and size, and for HDF5 re-reads the
dataset offsets and shapes, and exits 1 on any mismatch. Given one shard, it
checks that shard against the manifest.json in the same folder.`,
		Example: `  prep inspect ./shards
  prep inspect ./shards --verify
  prep inspect ./shards/shard-000000.h5
  prep inspect ./shards/shard-000000.h5 --verify`,
		Args: positional("DIR|SHARD"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runInspect(cmd.OutOrStdout(), args[0], verify, jsonOut)
		},
	}
	cmd.Flags().BoolVar(&verify, "verify", false, "recompute checksums and dataset offsets; exit 1 on a mismatch")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the manifest (or the shard's description) as JSON")
	return cmd
}

func runInspect(w io.Writer, target string, verify, jsonOut bool) error {
	st, err := os.Stat(target)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", target, err)
	}
	if !st.IsDir() {
		if err := inspectShard(w, target, jsonOut); err != nil || !verify {
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
	if jsonOut && !verify {
		data, err := manifest.Marshal(m)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	if !jsonOut {
		printManifest(w, m)
	}
	if !verify {
		return nil
	}
	var bad []string
	checked := 0 // a shard whose inputs were all skipped has no file to check
	for _, s := range m.Shards {
		if s.File == "" {
			continue
		}
		checked++
		if problem := verifyShard(filepath.Join(target, s.File), s); problem != "" {
			bad = append(bad, s.File+": "+problem)
		}
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
	if !strings.HasSuffix(path, ".h5") {
		return ""
	}
	got, err := hdf5.Datasets(path)
	if err != nil {
		return err.Error()
	}
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
	fmt.Fprintf(w, "recipe: %s\n", orNone(m.Recipe))
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
		fmt.Fprintf(w, "  %s  %d samples  %s  %s\n", s.File, s.Count, humanBytes(s.Bytes), strings.Join(ds, "  "))
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
	var v any
	switch {
	case strings.HasSuffix(path, ".h5"):
		ds, err := hdf5.Datasets(path)
		if err != nil {
			return err
		}
		meta, err := hdf5.Meta(path)
		if err != nil {
			return err
		}
		samples := 0
		if i := slices.IndexFunc(ds, func(d formats.DatasetInfo) bool { return d.Name == "labels" }); i >= 0 && len(ds[i].Shape) > 0 {
			samples = ds[i].Shape[0]
		}
		if !jsonOut {
			fmt.Fprintf(w, "%s: %d samples, prep %s, seed %d\nrecipe: %s\n", filepath.Base(path), samples, meta.Version, meta.Seed, orNone(meta.Recipe))
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
			Classes  []string              `json:"classes,omitempty"`
			Datasets []formats.DatasetInfo `json:"datasets"`
		}{filepath.Base(path), samples, meta.Version, meta.Recipe, meta.Seed, meta.Classes, ds}
	case strings.HasSuffix(path, ".tar"):
		s, err := tarshard.Describe(path)
		if err != nil {
			return err
		}
		if !jsonOut {
			fmt.Fprintf(w, "%s: %d samples, %s, sha256 %s\nfirst sample %s: members %s, %s%v", s.File, s.Count, humanBytes(s.Bytes), s.SHA256, s.Key, strings.Join(s.Members, " "), s.DType, s.Shape)
			if s.Rate > 0 {
				fmt.Fprintf(w, " at %d Hz", s.Rate)
			}
			fmt.Fprintln(w)
			return nil
		}
		v = s
	default:
		return usagef("inspect %s: want a folder with manifest.json, an .h5 or a .tar shard", path)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
