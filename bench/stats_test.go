package bench

import (
	"math"
	"testing"
	"time"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name          string
		in            []time.Duration
		med, p90, min time.Duration
	}{
		{"one", ms(7), 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond},
		{"odd unsorted", ms(5, 1, 3), 3 * time.Millisecond, 5 * time.Millisecond, time.Millisecond},
		{"even: mean of the middle two", ms(4, 1, 3, 2), 2500 * time.Microsecond, 4 * time.Millisecond, time.Millisecond},
		{"ten: p90 is the 9th", ms(10, 9, 8, 7, 6, 5, 4, 3, 2, 1), 5500 * time.Microsecond, 9 * time.Millisecond, time.Millisecond},
		{"eleven: p90 is the 10th", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100), 6 * time.Millisecond, 10 * time.Millisecond, time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := append([]time.Duration(nil), tc.in...)
			s := Summarize(tc.in)
			if s.Median != tc.med || s.P90 != tc.p90 || s.Min != tc.min || s.N != len(tc.in) {
				t.Errorf("Summarize(%v) = %+v; want median %v p90 %v min %v", tc.in, s, tc.med, tc.p90, tc.min)
			}
			for i := range orig {
				if orig[i] != tc.in[i] {
					t.Fatalf("Summarize reordered its input")
				}
			}
		})
	}
	if s := Summarize(nil); s != (Summary{}) {
		t.Errorf("Summarize(nil) = %+v", s)
	}
}

func TestRatio(t *testing.T) {
	if r := Ratio(30*time.Millisecond, 20*time.Millisecond); r != 1.5 {
		t.Errorf("Ratio = %v, want 1.5", r)
	}
	if r := Ratio(time.Millisecond, 0); !math.IsNaN(r) {
		t.Errorf("Ratio(x, 0) = %v, want NaN", r)
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1500 * time.Nanosecond:   "1.5µs",
		12345 * time.Microsecond: "12.3ms",
		12 * time.Second:         "12s",
		1500 * time.Millisecond:  "1.5s",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
