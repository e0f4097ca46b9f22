// Command prep converts raw training data into shards that feed a GPU at
// disk speed, and measures that they do.
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats/manifest"
	"github.com/prep-dev/prep/media/imgdec"
)

// Exit codes, documented in the README.
const (
	exitOK          = 0
	exitFailure     = 1   // the run failed: I/O, corrupt data under --strict, verification
	exitUsage       = 2   // bad flags, arguments or recipe
	exitNoGPU       = 3   // no GPU, driver library or device
	exitThreshold   = 4   // a measurement missed its --need / --max-idle goal
	exitInterrupted = 130 // Ctrl-C / SIGTERM
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// commands lists the constructors of the subcommands; each subcommand's
// file adds its own in init, so the files stay independent.
var commands []func() *cobra.Command

// usageError marks errors that are the caller's to fix (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// positional checks the number of arguments and, when it is wrong, names
// the ones the command takes: "convert takes SRC DST, got 1 argument".
func positional(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == len(names) {
			return nil
		}
		if len(names) == 0 {
			return usagef("%s takes no arguments, got %q", cmd.Name(), args)
		}
		return usagef("%s takes %s, got %d argument(s) (see prep %s --help)",
			cmd.Name(), strings.Join(names, " "), len(args), cmd.Name())
	}
}

// interruptedError is what a command returns when Ctrl-C or SIGTERM
// stopped it: its message says what to do next, and it is
// context.Canceled, which exits 130.
type interruptedError struct{ next string }

func (e interruptedError) Error() string { return "interrupted; " + e.next }
func (e interruptedError) Unwrap() error { return context.Canceled }

// interruptMessage is what an interrupted command says: its own
// interruptedError, or "interrupted" rather than the context's "context
// canceled", which reads like a failure.
func interruptMessage(err error) string {
	var ie interruptedError
	if errors.As(err, &ie) {
		return ie.Error()
	}
	return "interrupted"
}

// exitError carries a specific exit code with its message.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "prep",
		Short: "Turn a raw training dataset into shards a GPU can be fed from at full speed",
		Long: `prep moves JPEG decoding, augmentation and small-file reads out of the
training loop: one offline pass writes uncompressed shards (HDF5, PNG-0 tar,
WAV tar) that read sequentially at disk speed.

Exit codes:
  0    success
  1    the run failed (I/O, permissions, --strict, inspect --verify mismatch)
  2    usage: bad flag, argument or recipe
  3    no GPU: a driver library or the device is missing
  4    a measurement missed its goal (--need, --max-idle)
  130  interrupted (Ctrl-C / SIGTERM); rerun convert with --resume`,
		Example: `  # convert an ImageFolder into 224x224 HDF5 shards, two augmented copies each
  prep convert ./photos ./shards --recipe "resize=256,crop=224:random,hflip=0.5" --seed 7 --copies 2

  # check the shards against their manifest, then measure their read speed
  prep inspect ./shards --verify
  prep bench-read ./shards`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return usageError{flagError(cmd, err)} })
	// --version prints what `prep version` prints first; that command
	// adds the fast paths.
	root.Version = version
	root.SetVersionTemplate(fmt.Sprintf("prep {{.Version}} (%s, %s/%s); prep version lists this build's fast paths\n", runtime.Version(), runtime.GOOS, runtime.GOARCH))
	for _, c := range commands {
		root.AddCommand(c())
	}
	completeFlagValues(root)
	return root
}

func main() {
	// HEIF, AVIF and JPEG XL files are decoded in child processes, this
	// executable started again (imgdec/isolate.go): a crash of libheif or
	// libjxl then refuses one file instead of ending the run.
	if imgdec.ChildMain() {
		return
	}
	imgdec.Isolate()
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "prep:", interruptMessage(err))
		return exitInterrupted
	}
	fmt.Fprintln(os.Stderr, "prep:", err)
	var ue usageError
	var ee exitError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue), isCobraUsage(err):
		return exitUsage
	}
	return exitFailure
}

// isCobraUsage recognises cobra's own argument errors, which are plain.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "unknown flag", "unknown shorthand"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// flagError says what a flag wants instead of echoing strconv: pflag's
// `invalid argument "abc" for "--rebuild" flag: strconv.ParseInt: parsing
// "abc": invalid syntax` reads `--rebuild "abc": want a whole number`.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	m := pflagInvalid.FindStringSubmatch(msg)
	if m == nil {
		return err
	}
	want := "a number"
	switch m[3] {
	case "ParseInt", "ParseUint":
		want = "a whole number"
	case "ParseBool":
		want = "true or false"
	}
	if strings.Contains(msg, "value out of range") {
		want += " in range"
	}
	return fmt.Errorf("%s %q: want %s (see prep %s --help)", m[2], m[1], want, cmd.Name())
}

var pflagInvalid = regexp.MustCompile(`^invalid argument "(.*)" for "(.*?)" flag: strconv\.(Parse\w+)`)

// needTarget checks that a local shard folder or file given to cmd
// exists, so that a mistyped path gets a sentence rather than stat's.
func needTarget(cmd, target string) error {
	if cloudsrc.IsRemote(target) {
		return nil
	}
	if _, err := os.Stat(target); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s %s: no such folder or file: give the folder prep convert wrote (it holds %s) or one shard file", cmd, target, manifest.FileName)
		}
		return fmt.Errorf("%s %s: %w", cmd, target, err)
	}
	return nil
}
