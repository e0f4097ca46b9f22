package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/prep-dev/prep/augment"
)

// parseRecipe reads --recipe: a recipe file when s names a .yaml, .yml or
// .json file, the one-line form otherwise; "" is the identity. A file name
// that does not exist is still loaded when it holds no "=", so that a
// mistyped path reports the missing file rather than an unknown op. The
// ops after "|" (online) are the reader's, every epoch.
func parseRecipe(s string) (offline, online *augment.Recipe, err error) {
	if augment.IsRecipeFile(s) {
		if fi, err := os.Stat(s); (err == nil && fi.Mode().IsRegular()) || !strings.Contains(s, "=") {
			return loadRecipe(s)
		}
	}
	return augment.ParseSplit(s)
}

// loadRecipe reads and parses the recipe file at path. The reading is
// here, not in augment, which does no I/O.
func loadRecipe(path string) (offline, online *augment.Recipe, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("recipe: %w", err)
	}
	return augment.ParseFileSplit(path, data)
}
