package explain

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestDataRoundTrip(t *testing.T) {
	d := &Data{Features: []string{"income", "debt ratio", "âge"}, Background: []float32{1, float32(math.NaN()), -2.5, 3e-8, 0, 7}}
	b, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeData(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Features, d.Features) || len(back.Background) != 6 || !math.IsNaN(float64(back.Background[1])) || back.Background[3] != 3e-8 {
		t.Fatalf("round trip %+v", back)
	}
	for name, s := range map[string]string{
		"rows lie":     strings.Replace(string(b), `"rows":2`, `"rows":3`, 1),
		"version":      strings.Replace(string(b), `"version":1`, `"version":2`, 1),
		"unknown":      strings.Replace(string(b), `"version":1`, `"version":1,"x":1`, 1),
		"no features":  `{"version":1,"features":[]}`,
		"empty name":   `{"version":1,"features":[""]}`,
		"huge rows":    `{"version":1,"features":["a"],"background":{"rows":100000000,"values":[1]}}`,
		"newline name": `{"version":1,"features":["a\nb"]}`,
	} {
		if _, err := DecodeData([]byte(s)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseFeatures(t *testing.T) {
	f, err := ParseFeatures([]byte("income\n debt_ratio \n\nage\n"))
	if err != nil || !slices.Equal(f, []string{"income", "debt_ratio", "age"}) {
		t.Fatalf("%v %v", f, err)
	}
	if _, err := ParseFeatures([]byte("\n\n")); err == nil {
		t.Fatal("no names accepted")
	}
	if m := FeaturesFromMeta(map[string]string{"feature_names": "a, b"}); !slices.Equal(m, []string{"a", "b"}) {
		t.Fatalf("meta %v", m)
	}
}

func FuzzDecodeData(f *testing.F) {
	d := &Data{Features: []string{"a", "b"}, Background: []float32{1, 2, 3, float32(math.NaN())}}
	b, _ := d.Encode()
	f.Add(b)
	f.Add([]byte(`{"version":1,"features":["x"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DecodeData(b)
		if err != nil {
			return
		}
		again, err := d.Encode()
		if err != nil {
			t.Fatalf("decoded data does not encode: %v", err)
		}
		if _, err := DecodeData(again); err != nil {
			t.Fatalf("re-encoded data does not decode: %v", err)
		}
	})
}
