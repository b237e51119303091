package value

import (
	"math"
	"strconv"
)

// Float32Decimal is the value a float32 tag holds for the float32 f: the
// float64 nearest to the shortest decimal that reads back as f
// (strconv.FormatFloat(f, 'g', -1, 32)), so a register holding 0.1f is
// 0.1, not 0.10000000149011612, in every answer (REST, WebSocket, MQTT,
// history, scripts), as OPC UA and Modbus clients show a Float/REAL.
// float32 of the result is f again, bit for bit: float64 carries more than
// twice float32's precision plus two bits, so rounding the decimal first to
// float64 and then to float32 is the same as rounding it to float32
// (docs/values.md, "Types"). NaN and the infinities are returned as they
// are.
func Float32Decimal(f float32) float64 {
	x := float64(f)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	// Integers below 2^24 are their own shortest decimal.
	if t := math.Trunc(x); t == x && math.Abs(x) < 1<<24 {
		return x
	}
	if d, ok := shortestFloat32(f); ok {
		return d
	}
	var buf [32]byte
	d, err := strconv.ParseFloat(string(strconv.AppendFloat(buf[:0], x, 'e', -1, 32)), 64)
	if err != nil {
		return x // cannot happen: AppendFloat's output parses
	}
	return d
}

// pow10 are the powers of ten that float64 holds exactly (10^22 is the
// last: 5^22 < 2^53).
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// isFloat32Value reports whether x is a value a float32 tag may hold: a
// float32 exactly, or Float32Decimal of one.
func isFloat32Value(x float64) bool {
	if math.IsNaN(x) {
		return true
	}
	f := float32(x)
	return float64(f) == x || Float32Decimal(f) == x
}
