package value

import (
	"errors"
	"math"
	"testing"
)

func TestJSON_IntegersExactNonFiniteNullObjectsRefused(t *testing.T) {
	v, err := DecodeJSON([]byte(`[9007199254740993, 18446744073709551615, -1, 2.5]`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := EncodeJSON(v)
	if err != nil || string(b) != `[9007199254740993,18446744073709551615,-1,2.5]` {
		t.Fatalf("round trip %s %v", b, err)
	}
	if b, _ := EncodeJSON([]any{math.NaN(), math.Inf(1), 1.5}); string(b) != `[null,null,1.5]` {
		t.Fatalf("non-finite %s", b)
	}
	if _, err := DecodeJSON([]byte(`[1, {"a": 2}]`)); !errors.Is(err, ErrJSONObject) {
		t.Fatalf("object: %v", err)
	}
	if v, err := DecodeJSON(nil); v != nil || err != nil {
		t.Fatalf("empty: %v %v", v, err)
	}
}
