package hdf5

import (
	"testing"

	"github.com/prep-dev/prep/formats/formattest"
)

func TestConformance(t *testing.T) {
	formattest.Run(t, Format{}, formattest.Caps{
		Images: true, Ragged: true, Extra: true, Groups: true, Audio: true, Clips: true,
	})
}
