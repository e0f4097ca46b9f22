package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/prep-dev/prep/augment"
)

func init() { commands = append(commands, newRecipesHelp) }

// newRecipesHelp is the help topic "prep help recipes": a command with
// no Run, which cobra lists under "Additional help topics". Its op list
// comes from augment's table of ops, the one the parser looks names up
// in, so a new op cannot be missing from it.
func newRecipesHelp() *cobra.Command {
	return &cobra.Command{
		Use:   "recipes",
		Short: "The --recipe grammar: every augmentation op, its values and an example",
		Long:  recipesHelp(augment.Ops()),
	}
}

func recipesHelp(ops []augment.Op) string {
	var b strings.Builder
	fmt.Fprintf(&b, `A recipe lists augmentation ops, applied in order to every sample; each
sample (and each --copies copy) draws its own random values from --seed, so
the same inputs, recipe and seed give the same bytes. On the command line
the ops are comma-separated:

  prep convert SRC DST --recipe "resize=256,crop=224:random,hflip=0.5"

S, W and H are sizes in pixels, 1 to %d; P is a probability in [0,1];
LO-HI is a range drawn from uniformly, and a single number X means exactly X
("-6-6" is -6 to 6). "file:" names an op's parameters in a recipe file.
`, augment.MaxSide)
	for _, kind := range []struct {
		title string
		audio bool
	}{
		{"Image ops (video frames too; audio inputs ignore them):", false},
		{"Audio ops (on PCM in [-1, 1], which every op clips to; images ignore them):", true},
	} {
		fmt.Fprintf(&b, "\n%s\n", kind.title)
		for _, op := range ops {
			if op.Audio == kind.audio {
				fmt.Fprintf(&b, "  %s\n%s      e.g. %s  file: %s\n", op.Syntax, wrap(op.Doc, "      ", 80), op.Example, op.File)
			}
		}
	}
	b.WriteString(`
A recipe file (--recipe recipe.yaml, .yml or .json) holds a list of ops:
each a one-line op, or a map from the op name to its value or to its
named parameters:

  # recipe.yaml
  - resize: 256
  - crop: 224:random
  - hflip=0.5
  - jitter: {brightness: 0.4, contrast: 0.4, saturation: 0.4, hue: 0.1}
  - blur: {sigma: [0.1, 2]}

The values each sample drew are in the "params" of its .json member in tar
shards (--format png or wav).

Online ops: a "|" splits a recipe. convert runs the ops before it once; the
ops after it (crop, hflip, vflip, rrc: a strided copy or a batch op) are
recorded in the manifest, and prepshards runs them on every sample afresh
each epoch, so that the stored data stays 1x and the crops vary as online
augmentation's do. In a recipe file, a "|" element splits the list, or give
{offline: [...], online: [...]}:

  prep convert ./photos ./shards --recipe "resize=256,crop=256 | crop=224:random,hflip=0.5"

Examples:
  # ImageFolder -> 224x224 training crops, two differently augmented copies of each photo
  prep convert ./photos ./shards --recipe "rrc=224,hflip=0.5,jitter=0.4/0.4/0.4" --copies 2 --seed 7

  # audio clips: random gain, time shift and noise, one second each at 16 kHz
  prep convert ./clips ./shards --recipe "gain=-6-6,shift=0.1,noise=20-40" --duration 1

  # the same recipe from a file
  prep convert ./photos ./shards --recipe recipe.yaml

  # resize once, crop and flip afresh each epoch in the reader
  prep convert ./photos ./shards --recipe "resize=256,crop=256 | crop=224:random,hflip=0.5"`)
	return b.String()
}

// wrap breaks text into lines of at most width columns (a longer word
// gets its own line), each starting with indent and ending in "\n".
func wrap(text, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, w := range strings.Fields(text) {
		if line != indent && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += w
	}
	b.WriteString(line + "\n")
	return b.String()
}
