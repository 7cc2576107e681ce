package audit

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/vouchml/vouch/tensor"
)

func TestCanonicalGolden(t *testing.T) {
	c := 0.96
	// A schema version 1 record: its bytes are those every version 1 entry
	// in a log has, and they must still parse and re-encode unchanged.
	r := &Record{
		SchemaVersion: 1,
		TraceID:       "4bf92f3577b34da6a3ce929d0e0e4736",
		RequestID:     "42",
		TraceParent:   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		Time:          time.Date(2025, 1, 2, 3, 4, 5, 120000000, time.FixedZone("x", 3600)),
		Principal:     "alice",
		Model:         "credit",
		ModelVersion:  "3",
		InputDigest:   "sha256:1ecc0bdc29fb96d249c058166db012fe2c554016303a540d2ec4be6e05c48f04",
		Inputs:        []TensorDigest{{Name: "x", DType: "float32", Shape: []int64{1, 2}, Digest: "sha256:e802f8801f685d67ccb368b2e2edeed01140e910d095aaa682febe53babda39b"}},
		OutputLabel:   "fraud <&>",
		Confidence:    &c,
		LatencyMicros: 1500,
		Code:          200,
	}
	got, err := r.MarshalCanonical()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"code":200,"confidence":0.96,"input_digest":"sha256:1ecc0bdc29fb96d249c058166db012fe2c554016303a540d2ec4be6e05c48f04",` +
		`"inputs":[{"digest":"sha256:e802f8801f685d67ccb368b2e2edeed01140e910d095aaa682febe53babda39b","dtype":"float32","name":"x","shape":[1,2]}],` +
		`"kind":"inference","latency_us":1500,"model":"credit","model_version":"3","output_label":"fraud \u003c\u0026\u003e",` +
		`"principal":"alice","request_id":"42","schema_version":1,"status":"ok","time":"2025-01-02T02:04:05.12Z",` +
		`"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`
	if string(got) != want {
		t.Fatalf("canonical:\n got %s\nwant %s", got, want)
	}
	// Member names are in byte order: the encoding is what a sorted-key
	// encoder would write.
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	resorted, _ := json.Marshal(m)
	if string(resorted) != want {
		t.Fatalf("not in sorted-key form:\n%s", resorted)
	}
	back, err := Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := back.MarshalCanonical()
	if string(again) != want {
		t.Fatalf("round trip:\n%s", again)
	}
}

func TestStringsMatchEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\", "\x00\x01\b\t\n\f\r\x1f", "<a href='x'>&</a>", "\u2028\u2029", "é€𝄞", "\u007f"} {
		w := &canonWriter{}
		w.appendString(s)
		want, _ := json.Marshal(s)
		if string(w.buf) != string(want) {
			t.Errorf("%q: got %s, encoding/json %s", s, w.buf, want)
		}
	}
	w := &canonWriter{}
	w.appendString("\xff")
	if w.err == nil {
		t.Error("invalid UTF-8 accepted")
	}
}

var tenth, fifth = 0.1, 0.2
var point3 = tenth + fifth

func TestES6Numbers(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {1, "1"}, {0.96, "0.96"}, {-2.5, "-2.5"},
		{1e-6, "0.000001"}, {1e-7, "1e-7"}, {1.5e-10, "1.5e-10"}, {1e20, "100000000000000000000"},
		{1e21, "1e+21"}, {point3, "0.30000000000000004"}, {5e-324, "5e-324"},
	} {
		if got := string(appendES6Number(nil, c.f)); got != c.want {
			t.Errorf("%v: got %s, want %s", c.f, got, c.want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	good, _ := testRecord(3).MarshalCanonical()
	for name, b := range map[string]string{
		"whitespace":     strings.Replace(string(good), `"kind":`, `"kind": `, 1),
		"order":          strings.Replace(string(good), `{"bundle_digest"`, `{"zz":1,"bundle_digest"`, 1),
		"unknown member": strings.Replace(string(good), `"code":200`, `"code":200,"extra":1`, 1),
		"schema 3":       strings.Replace(string(good), `"schema_version":2`, `"schema_version":3`, 1),
		"schema 0":       strings.Replace(string(good), `"schema_version":2`, `"schema_version":0`, 1),
		"no schema":      strings.Replace(string(good), `"schema_version":2,`, ``, 1),
		"escape":         strings.Replace(string(good), `"kind":"inference"`, `"kind":"inferenc\u0065"`, 1),
		"trailing":       string(good) + "\n",
		"not utc":        strings.Replace(string(good), `Z"`, `+00:00"`, 1),
		"trailing zero":  strings.Replace(string(good), `"time":"2025-03-01T12:00:00.000003Z"`, `"time":"2025-03-01T12:00:00.0000030Z"`, 1),
		"garbage":        "\x00{",
	} {
		if string(b) == string(good) {
			t.Fatalf("%s: test input unchanged", name)
		}
		if _, err := Parse([]byte(b)); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: Parse = %v, want ErrRecord", name, err)
		}
	}
}

func TestRecordCheck(t *testing.T) {
	nan := math.NaN()
	for name, r := range map[string]*Record{
		"no trace":     {Time: time.Unix(1, 0)},
		"no time":      {TraceID: "t"},
		"bad kind":     {TraceID: "t", Time: time.Unix(1, 0), Kind: "x"},
		"access no":    {TraceID: "t", Time: time.Unix(1, 0), Kind: KindAccess},
		"access extra": {TraceID: "t", Time: time.Unix(1, 0), Access: &Access{Action: "show"}},
		"bad status":   {TraceID: "t", Time: time.Unix(1, 0), Status: "meh"},
		"nan":          {TraceID: "t", Time: time.Unix(1, 0), Confidence: &nan},
		"unsorted":     {TraceID: "t", Time: time.Unix(1, 0), Inputs: []TensorDigest{{Name: "b"}, {Name: "a"}}},
	} {
		if _, err := r.MarshalCanonical(); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
	acc := &Record{TraceID: "t", Time: time.Unix(1, 0), Kind: KindAccess, Principal: "auditor", Access: &Access{Action: "show", Target: "abc"}}
	b, err := acc.MarshalCanonical()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(b); err != nil {
		t.Fatal(err)
	}
}

// The worked example of the package documentation.
func TestTensorDigestVector(t *testing.T) {
	x := tensor.From([]float32{1, -2.5}, 1, 2)
	var buf strings.Builder
	writeTensor(&buf, "x", x)
	const wantBytes = "01000000" + "78" + "01000000" + "02000000" + "0100000000000000" + "0200000000000000" + "0800000000000000" + "0000803f" + "000020c0"
	if got := hex.EncodeToString([]byte(buf.String())); got != wantBytes {
		t.Fatalf("encoding:\n got %s\nwant %s", got, wantBytes)
	}
	one, err := TensorDigestOf("x", x)
	if err != nil {
		t.Fatal(err)
	}
	if one.Digest != "sha256:e802f8801f685d67ccb368b2e2edeed01140e910d095aaa682febe53babda39b" {
		t.Fatalf("tensor digest %s", one.Digest)
	}
	all, per, err := InputDigest(map[string]*tensor.Tensor{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	if all != "sha256:1ecc0bdc29fb96d249c058166db012fe2c554016303a540d2ec4be6e05c48f04" {
		t.Fatalf("input digest %s", all)
	}
	if len(per) != 1 || per[0].Digest != one.Digest || per[0].DType != "float32" || len(per[0].Shape) != 2 {
		t.Fatalf("per-tensor %+v", per)
	}
}

func TestInputDigestProperties(t *testing.T) {
	a := tensor.From([]int64{1, 2, 3}, 3)
	b := tensor.From([]string{"hi", ""}, 2)
	c := tensor.From([]bool{true, false}, 2)
	d1, per, err := InputDigest(map[string]*tensor.Tensor{"b": b, "a": a, "c": c})
	if err != nil {
		t.Fatal(err)
	}
	if per[0].Name != "a" || per[1].Name != "b" || per[2].Name != "c" {
		t.Fatalf("not sorted: %+v", per)
	}
	// Same values, other shape: another digest.
	d2, _, _ := InputDigest(map[string]*tensor.Tensor{"b": b, "a": a.Reshaped(1, 3), "c": c})
	// Same bytes, other dtype: another digest.
	d3, _, _ := InputDigest(map[string]*tensor.Tensor{"b": b, "a": a, "c": tensor.From([]uint8{1, 0}, 2)})
	if d1 == d2 || d1 == d3 || d2 == d3 {
		t.Fatal("digest ignores shape or dtype")
	}
	// Large tensors cross the chunk boundary of the encoder.
	big := make([]float32, 5000)
	for i := range big {
		big[i] = float32(i)
	}
	var buf strings.Builder
	writeTensor(&buf, "big", tensor.From(big, 5000))
	if buf.Len() != 4+3+4+4+8+8+4*5000 {
		t.Fatalf("big encoding is %d bytes", buf.Len())
	}
	if _, _, err := InputDigest(map[string]*tensor.Tensor{"bad": {DType: tensor.Float32, Shape: []int{2}, Data: []float32{1}}}); err == nil {
		t.Fatal("invalid tensor accepted")
	}
}

func FuzzParse(f *testing.F) {
	for i := range 5 {
		b, _ := testRecord(i).MarshalCanonical()
		f.Add(b)
	}
	if b, err := v2Record().MarshalCanonical(); err == nil {
		f.Add(b)
	}
	if b, err := os.ReadFile("testdata/record_v2.golden"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err != nil {
			return
		}
		again, err := r.MarshalCanonical()
		if err != nil || string(again) != string(data) {
			t.Fatalf("accepted %q, re-encodes to %q (%v)", data, again, err)
		}
		if !utf8.Valid(data) {
			t.Fatalf("accepted invalid UTF-8")
		}
	})
}
