//go:build !linux

package bench

import (
	"fmt"
	"os"
)

func openDirect(path string) (*os.File, error) {
	return nil, fmt.Errorf("open %s: --direct needs Linux (O_DIRECT)", path)
}

func dropCache(path string) error {
	return fmt.Errorf("%s: --cold needs Linux (posix_fadvise)", path)
}
