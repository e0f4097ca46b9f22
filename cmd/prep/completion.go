package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/prep-dev/prep/augment"
	"github.com/prep-dev/prep/bench"
	"github.com/prep-dev/prep/convert"
)

func init() { commands = append(commands, newCompletionCmd) }

// shells are the shells cobra writes completion scripts for, with
// descriptions of the values where the shell shows them.
var shells = map[string]func(root *cobra.Command, w io.Writer) error{
	"bash":       genBash,
	"zsh":        (*cobra.Command).GenZshCompletion,
	"fish":       func(root *cobra.Command, w io.Writer) error { return root.GenFishCompletion(w, true) },
	"powershell": (*cobra.Command).GenPowerShellCompletionWithDesc,
}

// bashCommaFixes make cobra's bash script take completions holding a
// comma, as recipes do ("resize=256,crop="): bash 5's printf %q writes
// "\\,", so the escaped completion never starts with the word typed and
// none was offered. A comma is not special on a command line (only in
// braces), so the script drops that escape.
var bashCommaFixes = []struct{ old, new string }{
	{`printf -v comp "%q" "${compline%%$tab*}" &>/dev/null || comp=$(printf "%q" "${compline%%$tab*}")`,
		`printf -v comp "%q" "${compline%%$tab*}" &>/dev/null || comp=$(printf "%q" "${compline%%$tab*}")
        comp=${comp//\\,/,}`},
	{`COMPREPLY[0]=$(printf "%q" "${COMPREPLY[0]%%$tab*}")`,
		`COMPREPLY[0]=$(printf "%q" "${COMPREPLY[0]%%$tab*}")
        COMPREPLY[0]=${COMPREPLY[0]//\\,/,}`},
}

// genBash writes cobra's bash completion script with bashCommaFixes.
func genBash(root *cobra.Command, w io.Writer) error {
	var b strings.Builder
	if err := root.GenBashCompletionV2(&b, true); err != nil {
		return err
	}
	script := b.String()
	for _, f := range bashCommaFixes {
		if !strings.Contains(script, f.old) {
			return fmt.Errorf("completion bash: cobra's script changed, a fix no longer applies (%.40s...): update bashCommaFixes", f.old)
		}
		script = strings.ReplaceAll(script, f.old, f.new)
	}
	_, err := io.WriteString(w, script)
	return err
}

// newCompletionCmd replaces cobra's default completion command, which has
// no worked example (every prep command has one), with one that has.
func newCompletionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print the shell completion script for bash, zsh, fish or PowerShell",
		Long: `completion prints a script that completes prep's commands, flags and flag
values in your shell: --format, --order, --decoder, --sample-format, --via,
and the ops of --recipe (prep help recipes). Load it in your shell's
start-up file to keep it.`,
		Example: `  # bash (needs the bash-completion package); add the line to ~/.bashrc to keep it
  source <(prep completion bash)

  # zsh: into a folder on $fpath, then start a new shell
  prep completion zsh > "${fpath[1]}/_prep"

  # fish
  prep completion fish > ~/.config/fish/completions/prep.fish

  # PowerShell; add the line to $PROFILE to keep it
  prep completion powershell | Out-String | Invoke-Expression`,
		ValidArgs:             []string{"bash", "zsh", "fish", "powershell"},
		Args:                  positional("SHELL"),
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			gen, ok := shells[args[0]]
			if !ok {
				return usagef("completion %q: want bash, zsh, fish or powershell", args[0])
			}
			return gen(cmd.Root(), cmd.OutOrStdout())
		},
	}
}

// convertValues are the words convert's flags take, each with what it
// means; plan takes convert's flags too.
var convertValues = map[string][]cobra.Completion{
	"format": {
		cobra.CompletionWithDesc("hdf5", "HDF5 shards (the default, but for audio alone)"),
		cobra.CompletionWithDesc("png", "PNG-0 images in tar shards"),
		cobra.CompletionWithDesc("wav", "WAV in tar shards (the default for audio alone)"),
	},
	"order": {
		cobra.CompletionWithDesc(string(convert.OrderShuffle), "copy rounds, each a seeded permutation of the inputs (default)"),
		cobra.CompletionWithDesc(string(convert.OrderSorted), "key order, copies adjacent"),
	},
	"layout": {
		cobra.CompletionWithDesc(string(convert.LayoutAuto), "ImageFolder classes when files sit in folders, else no labels (default)"),
		cobra.CompletionWithDesc(string(convert.LayoutImageFolder), "require SRC/<class>/<file>"),
		cobra.CompletionWithDesc(string(convert.LayoutFlat), "every file at any depth, no labels"),
	},
	"decoder": {
		cobra.CompletionWithDesc("auto", "libjpeg-turbo and libpng where built in (default)"),
		cobra.CompletionWithDesc("turbo", "libjpeg-turbo with DCT scaling, libpng"),
		cobra.CompletionWithDesc("go", "Go's image/jpeg and image/png"),
	},
	"sample-format": {
		cobra.CompletionWithDesc("s16", "16-bit PCM (default)"),
		cobra.CompletionWithDesc("f32", "32-bit IEEE float"),
	},
}

// flagValues are the words flags take, by command and flag; the tests
// hold them to the flags' own checks.
var flagValues = map[string]map[string][]cobra.Completion{
	"convert": convertValues,
	"plan":    convertValues,
	"bench-read": {
		"via": {
			cobra.CompletionWithDesc(bench.ViaRaw, "plain reads at the offsets the manifest records (default)"),
			cobra.CompletionWithDesc(bench.ViaHDF5, "through the HDF5 library"),
		},
	},
}

// completeFlagValues registers the completion of flag values on the
// commands of root: the words of flagValues, and recipe ops.
func completeFlagValues(root *cobra.Command) {
	for _, cmd := range root.Commands() {
		for flag, words := range flagValues[cmd.Name()] {
			if cmd.Flags().Lookup(flag) == nil {
				continue // the tests catch a table entry gone stale
			}
			cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(words, cobra.ShellCompDirectiveNoFileComp))
		}
		if cmd.Flags().Lookup("recipe") != nil {
			cmd.RegisterFlagCompletionFunc("recipe", completeRecipe)
		}
	}
}

// completeRecipe completes the op being typed in a one-line recipe,
// "resize=256,cr" -> "resize=256,crop=", from augment's table of ops.
// With nothing that can start an op, it offers recipe files instead.
func completeRecipe(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	cut := max(strings.LastIndex(toComplete, ","), strings.LastIndex(toComplete, augment.Separator)) + 1
	cur := strings.TrimLeft(toComplete[cut:], " ")
	done := toComplete[:len(toComplete)-len(cur)]
	if strings.Contains(cur, "=") {
		return nil, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp // a value: see prep help recipes
	}
	var out []cobra.Completion
	for _, op := range augment.Ops() {
		if strings.HasPrefix(op.Name, cur) {
			out = append(out, cobra.CompletionWithDesc(done+op.Name+"=", op.Syntax))
		}
	}
	if len(out) == 0 && done == "" {
		return []cobra.Completion{"yaml", "yml", "json"}, cobra.ShellCompDirectiveFilterFileExt
	}
	return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
}
