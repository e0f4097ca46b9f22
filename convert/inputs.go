package convert

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/manifest"
)

// inputRecord is how e appears in the run's input list. A modification
// time is written in UTC, so that tasks on machines in other time zones
// write the same text.
func inputRecord(e *Entry) manifest.Input {
	in := manifest.Input{Key: formats.Name(e.Key), Label: e.Label, Size: e.Size, Generation: e.Generation}
	if !e.ModTime.IsZero() {
		in.MTime = e.ModTime.UTC().Format(time.RFC3339Nano)
	}
	return in
}

// writeInputs writes l's input list, in key order, to w (nil: only
// hashes it) and returns how many inputs it holds and its SHA-256.
func writeInputs(w io.Writer, l *Listing) (int, string, error) {
	iw := manifest.NewInputsWriter(w)
	for i := range l.Entries {
		if err := iw.Write(inputRecord(&l.Entries[i])); err != nil {
			return 0, "", err
		}
	}
	n, sum := iw.Sum()
	return n, sum, nil
}

// InputList returns l's inputs as a run records them.
func InputList(l *Listing) []manifest.Input {
	ins := make([]manifest.Input, len(l.Entries))
	for i := range l.Entries {
		ins[i] = inputRecord(&l.Entries[i])
	}
	return ins
}

// InputsSum returns how many inputs l lists and the SHA-256 of its input
// list, as a manifest records them (Inputs, InputsSHA256).
func InputsSum(l *Listing) (int, string) {
	n, sum, _ := writeInputs(nil, l) // hashing alone never fails
	return n, sum
}

// publishInputs writes the input list beside the manifest. Only a single
// process or task 0 writes it: every task lists the same inputs, and one
// writer spares Cloud Storage many writes of one object.
func (r *run) publishInputs(ctx context.Context) error {
	if r.opt.TaskIndex != 0 {
		return nil
	}
	name := manifest.InputsFileName
	path := filepath.Join(r.opt.Sink.Dir(), name)
	tmp := formats.TempName(path)
	err := func() error {
		f, err := os.Create(tmp)
		if err != nil {
			return err
		}
		defer f.Close()
		zw := manifest.NewInputsGzip(f)
		if _, _, err := writeInputs(zw, r.l); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		return f.Close()
	}()
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return destErr(r.opt.Sink, name, err)
	}
	return r.opt.Sink.Publish(ctx, name)
}

// PriorInputs reads the input list a run left beside its manifest m, for
// naming what changed. It returns nil when the list is missing, unreadable
// or not the one m records (a later run rewrote it): the caller then has
// only m's count and hash to go on.
func PriorInputs(data []byte, m *manifest.Manifest) []manifest.Input {
	if m.InputsSHA256 == "" {
		return nil
	}
	ins, sum, err := manifest.ReadInputs(data)
	if err != nil || sum != m.InputsSHA256 {
		return nil
	}
	return ins
}

// inputsChange says how the inputs now (l) differ from those of the run m
// describes, whose input list, if found, is prior.
func inputsChange(m *manifest.Manifest, prior []manifest.Input, l *Listing) string {
	if prior != nil {
		if d := manifest.DiffInputs(prior, InputList(l)); d != "" {
			return d
		}
	}
	n, sum := InputsSum(l)
	return inputsSumDiff(m.Inputs, m.InputsSHA256, n, sum)
}

// inputsSumDiff says how two input lists known only by count and hash
// differ; "" if they do not.
func inputsSumDiff(n0 int, sum0 string, n1 int, sum1 string) string {
	switch {
	case n0 == n1 && sum0 == sum1:
		return ""
	case sum0 == "" || sum1 == "":
		return fmt.Sprintf("input list %s, now %s: prep cannot tell whether the inputs are the same", orOlder(sum0), orOlder(sum1))
	case n0 != n1:
		return fmt.Sprintf("%d inputs, now %d", n0, n1)
	}
	return fmt.Sprintf("the input list differs (inputs_sha256 %s, now %s): inputs were renamed, moved between classes or rewritten",
		short(sum0), short(sum1))
}

func orOlder(sum string) string {
	if sum == "" {
		return "not recorded (an older prep)"
	}
	return "recorded"
}

// sameSource reports whether two recorded sources name the same place.
func sameSource(a, b string) bool {
	return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}
