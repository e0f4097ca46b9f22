package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

func init() { commands = append(commands, newVersionCmd) }

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print prep's version and the fast paths it runs on this machine",
		Long: `version prints prep's version, then which fast paths this binary runs on
this machine: the SIMD loops (built with GOEXPERIMENT=simd for amd64, on a
CPU with AVX-512 or AVX2; scalar otherwise, with the same output) and the
libjpeg-turbo, libpng and libwebp decoders (built with cgo), libheif
(HEIC, AVIF) and libjxl (JPEG XL), which prep opens at run time where they
are installed, the image formats decoded in Go, and the audio decoders
that run in process (libFLAC, libmpg123 and libopusfile, built with cgo). A build or
machine that lacks one says so, and how to get it.`,
		Example: "  prep version",
		Args:    positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "prep %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			for _, p := range detectFastPaths().lines() {
				fmt.Fprintf(w, "%-6s %s\n", p.name+":", p.what)
			}
			return nil
		},
	}
}
