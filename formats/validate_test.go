package formats

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    Tensor
		err  string // "" when valid
	}{
		{"2x3 uint8", Tensor{DType: Uint8, Shape: []int{2, 3}, Data: make([]byte, 6)}, ""},
		{"scalar float64", Tensor{DType: Float64, Shape: []int{}, Data: make([]byte, 8)}, ""},
		{"empty with large dims", Tensor{DType: Float32, Shape: []int{1 << 40, 0, 1 << 20}}, ""},
		{"short data", Tensor{DType: Int16, Shape: []int{3}, Data: make([]byte, 4)}, "needs 6 bytes, have 4"},
		{"unknown dtype", Tensor{DType: "int7", Shape: []int{1}, Data: make([]byte, 1)}, "unknown dtype"},
		// The product is right (6 bytes), the shape is not.
		{"negative dims", Tensor{DType: Uint8, Shape: []int{-2, -3}, Data: make([]byte, 6)}, "negative dimension"},
		{"negative dim, empty", Tensor{DType: Uint8, Shape: []int{-1, 0}}, "negative dimension"},
		// 2^62 × 4 wraps to 0 in int arithmetic.
		{"overflow to zero", Tensor{DType: Uint8, Shape: []int{1 << 62, 4}}, "too large"},
		{"overflow by item size", Tensor{DType: Float64, Shape: []int{1 << 61}}, "too large"},
		// numpy refuses these too: the non-zero dimensions overflow.
		{"empty, overflowing", Tensor{DType: Uint8, Shape: []int{1 << 62, 4, 0}}, "too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.t.Validate()
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}
