package server

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/vouchml/vouch/server/oippb"
)

var bigRequests = flag.Bool("big-requests", false, "measure the decoders' memory on 60 MiB requests (issue 20 B figures)")

// memoryOf runs f and returns the bytes it allocated and the peak heap
// growth above the heap before it (sampled every 200 µs).
func memoryOf(f func()) (allocated, peak uint64) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var top atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > top.Load() {
				top.Store(m.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	f()
	close(stop)
	<-done
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if after.HeapAlloc > top.Load() {
		top.Store(after.HeapAlloc)
	}
	return after.TotalAlloc - before.TotalAlloc, top.Load() - min(top.Load(), before.HeapAlloc)
}

// fp16JSON is an OIP JSON request of one FP16 input of n elements, each
// written as "0.333" (6 bytes with its comma).
func fp16JSON(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"inputs":[{"name":"x","datatype":"FP16","shape":[` + strconv.Itoa(n) + `],"data":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("0.333")
	}
	b.WriteString(`]}]}`)
	return b.Bytes()
}

// TestDecodeMemoryBounded: decoding a JSON request costs a small multiple
// of its body, not 65 times it (issue 20 B: one 60 MiB FP16 JSON request
// cost 3.9 GiB). The body itself is held by the caller.
func TestDecodeMemoryBounded(t *testing.T) {
	sizes := []int{2 << 20}
	if *bigRequests {
		sizes = append(sizes, 10<<20) // 60 MiB of JSON
	}
	for _, n := range sizes {
		body := fp16JSON(n)
		var err error
		alloc, peak := memoryOf(func() { _, err = decodeRequest(body, -1, Limits{}) })
		if err != nil {
			t.Fatal(err)
		}
		ratio := float64(peak) / float64(len(body))
		t.Logf("FP16 JSON body %.1f MiB: allocated %.1f MiB, peak heap growth %.1f MiB (%.2fx the body)",
			float64(len(body))/(1<<20), float64(alloc)/(1<<20), float64(peak)/(1<<20), ratio)
		if ratio > 1.5 {
			t.Errorf("decoding a %d-byte request grew the heap by %d bytes (%.1fx)", len(body), peak, ratio)
		}
	}
}

func fmtMiB(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// TestDecodeProtoMemoryBounded: a gRPC request costs its message plus its
// tensors, not tens of times its size (issue 20 B: gRPC requests amplified
// 57–62×). Typed contents of the tensor's own type are taken without a
// copy; narrower integers are converted straight into their type.
func TestDecodeProtoMemoryBounded(t *testing.T) {
	n := 1 << 20
	if *bigRequests {
		n = 16 << 20
	}
	f32 := make([]float32, n)
	i32 := make([]int32, n)
	for i := range f32 {
		f32[i], i32[i] = float32(i%1000)/7, int32(i%100)
	}
	for _, c := range []struct {
		name     string
		in       *oippb.ModelInferRequest_InferInputTensor
		raw      [][]byte
		maxRatio float64 // peak heap growth over the wire size
	}{
		{"FP32 fp32_contents", &oippb.ModelInferRequest_InferInputTensor{Name: "x", Datatype: "FP32", Shape: []int64{int64(n)}, Contents: &oippb.InferTensorContents{Fp32Contents: f32}}, nil, 1.5},
		{"INT8 int_contents", &oippb.ModelInferRequest_InferInputTensor{Name: "x", Datatype: "INT8", Shape: []int64{int64(n)}, Contents: &oippb.InferTensorContents{IntContents: i32}}, nil, 6},
		{"FP32 raw_input_contents", &oippb.ModelInferRequest_InferInputTensor{Name: "x", Datatype: "FP32", Shape: []int64{int64(n)}}, [][]byte{make([]byte, 4*n)}, 2.5},
	} {
		wire, err := proto.Marshal(&oippb.ModelInferRequest{ModelName: "m", Inputs: []*oippb.ModelInferRequest_InferInputTensor{c.in}, RawInputContents: c.raw})
		if err != nil {
			t.Fatal(err)
		}
		alloc, peak := memoryOf(func() {
			var pr oippb.ModelInferRequest
			if err = proto.Unmarshal(wire, &pr); err == nil {
				_, err = decodeProto(&pr, Limits{TensorBytes: 1 << 30})
			}
		})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ratio := float64(peak) / float64(len(wire))
		t.Logf("gRPC %s: message %s, allocated %s, peak heap growth %s (%.2fx the message)", c.name, fmtMiB(uint64(len(wire))), fmtMiB(alloc), fmtMiB(peak), ratio)
		if ratio > c.maxRatio {
			t.Errorf("%s: %.1fx the message, want at most %.1fx", c.name, ratio, c.maxRatio)
		}
	}
}

// TestClaimedBodyNotPreallocated: clients that claim a 60 MiB body and send
// a few bytes make the server hold a few bytes each, not the 60 MiB they
// claimed (issue 20 B).
func TestClaimedBodyNotPreallocated(t *testing.T) {
	s := New(Options{MaxBodyBytes: 64 << 20})
	if err := s.AddModel(&slowRunner{}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := s.NewHTTPServer()
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	const clients = 20
	var conns []net.Conn
	_, peak := memoryOf(func() {
		for range clients {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			fmt.Fprintf(c, "POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n{\"inputs\":", 60<<20)
		}
		time.Sleep(500 * time.Millisecond)
	})
	for _, c := range conns {
		c.Close()
	}
	t.Logf("%d clients claiming 60 MiB bodies: heap grew by %s", clients, fmtMiB(peak))
	if peak > 32<<20 {
		t.Errorf("%d clients claiming 60 MiB each grew the heap by %s", clients, fmtMiB(peak))
	}
}
