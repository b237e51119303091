//go:build long

package value

import "testing"

// TestShortest32_EveryFloat32 (make test-long: about 3 minutes of two
// cores): Float32Decimal is its definition for every positive float32,
// finite or not; the sign only negates (TestShortest32_SubnormalsAndPowersOfTwo
// samples the negative ones).
func TestShortest32_EveryFloat32(t *testing.T) {
	checkFloat32Range(t, 0, 1<<31, 1)
}
