package probe

import (
	"testing"
	"time"
)

func TestBucket_UpperBoundHoldsTheLatency(t *testing.T) {
	tests := []struct {
		d      time.Duration
		bucket int
		upper  time.Duration
	}{
		{-time.Millisecond, 0, 50 * time.Microsecond},
		{0, 0, 50 * time.Microsecond},
		{49 * time.Microsecond, 0, 50 * time.Microsecond},
		{50 * time.Microsecond, 1, 100 * time.Microsecond},
		{140*time.Millisecond + 700*time.Microsecond, 2814, 140*time.Millisecond + 750*time.Microsecond},
		{999 * time.Millisecond, 19980, 999*time.Millisecond + 50*time.Microsecond},
		{time.Second, 20000, time.Second + time.Millisecond},
		{2500 * time.Millisecond, 21500, 2501 * time.Millisecond},
		{2 * time.Minute, 79000, 60*time.Second + time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			b := Bucket(tt.d)
			if b != tt.bucket {
				t.Fatalf("Bucket(%s) = %d, want %d", tt.d, b, tt.bucket)
			}
			if u := BucketUpper(b); u != tt.upper {
				t.Errorf("BucketUpper(%d) = %s, want %s", b, u, tt.upper)
			}
		})
	}
}
