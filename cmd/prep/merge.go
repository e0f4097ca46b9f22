package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/convert"
)

func init() { commands = append(commands, newMergeCmd) }

func newMergeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "merge-manifest DST",
		Short: "Join the manifest parts of a distributed conversion into manifest.json",
		Long: `Each task of a distributed run (--task-index/--task-count) writes its shards
and a manifest part, manifest-task-NNNNN.json. merge-manifest checks that the
parts agree on the plan and cover every shard exactly once — it names any gap,
overlap or missing task — and writes the manifest.json one process would have
written, replacing any.

The last task to finish does this itself unless the tasks ran with
--no-merge; run merge-manifest after tasks run that way, or to write
manifest.json again.`,
		Example: `  # after 16 tasks of: prep convert gs://bkt/raw gs://bkt/shards --task-count 16 --no-merge ...
  prep merge-manifest gs://bkt/shards`,
		Args: positional("DST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			// A local sink would create a missing folder, only to find no
			// parts in it.
			if !cloudsrc.IsRemote(args[0]) {
				if st, err := os.Stat(args[0]); err != nil || !st.IsDir() {
					return fmt.Errorf("merge-manifest %s: no such folder: give the DST the tasks of a distributed prep convert wrote into (it holds manifest-task-*.json)", args[0])
				}
			}
			sink, err := cloudsrc.OpenSink(ctx, args[0])
			if err != nil {
				return err
			}
			if c, ok := sink.(io.Closer); ok {
				defer c.Close()
			}
			m, err := convert.MergeSink(ctx, sink)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "merged %s, %s, %d skipped into %s/manifest.json\n",
				count(len(m.Shards), "shard"), count(m.Samples, "sample"), len(m.Skipped), sink.URI())
			return nil
		},
	}
}
