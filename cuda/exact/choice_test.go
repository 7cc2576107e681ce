package exact

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// resnetConvs counts the convolutions of torchvision's ResNets by shape
// key "H C->M kK sS" (input height, channels, kernel, stride; padding k/2),
// as the GPU suite's conv benchmark prints them.
func resnetConvs(blocks []int, bottleneck bool) map[string]int {
	n := map[string]int{}
	add := func(h, c, m, k, s int) { n[fmt.Sprintf("%d %d->%d k%d s%d", h, c, m, k, s)]++ }
	add(224, 3, 64, 7, 2)
	h, cin := 56, 64
	for i, w := range []int{64, 128, 256, 512} {
		for b := 0; b < blocks[i]; b++ {
			s := 1
			if b == 0 && i > 0 {
				s = 2
			}
			out := w
			if bottleneck {
				out = 4 * w
				add(h, cin, w, 1, 1)
				add(h, w, w, 3, s)
				add(h/s, w, out, 1, 1)
				if b == 0 {
					add(h, cin, out, 1, s)
				}
			} else {
				add(h, cin, w, 3, s)
				add(h/s, w, w, 3, 1)
				if b == 0 && (s != 1 || cin != out) {
					add(h, cin, out, 1, s)
				}
			}
			cin, h = out, h/s
		}
	}
	return n
}

// TestConvChoiceMeasured replays the H200's measured time of every tile
// kernel on every convolution of resnet18 and ResNet-50 at batch 1, 32
// and 256 (docs/gpu/gputest-2026-12-02-speed4.log): the kernels
// chooseConv picks must come within 3% of the per-layer fastest, network
// by network and batch by batch. (The batch-folded choice before this
// model was 13-15% off at batch 32.)
func TestConvChoiceMeasured(t *testing.T) {
	f, err := os.Open("../../docs/gpu/gputest-2026-12-02-speed4.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := regexp.MustCompile(`^conv (\S+) b(\d+) (\d+)x(\d+) (\d+)->(\d+) k(\d+) s(\d+): (.*) \| chosen`)
	count := map[string]map[string]int{"resnet18": resnetConvs([]int{2, 2, 2, 2}, false), "resnet50": resnetConvs([]int{3, 4, 6, 3}, true)}
	type tot struct{ chosen, fastest float64 }
	sums := map[string]*tot{}
	layers := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		v := make([]int, 7)
		for i := range v {
			v[i], _ = strconv.Atoi(m[i+2])
		}
		B, H, W, C, M, k, s := v[0], v[1], v[2], v[3], v[4], v[5], v[6]
		times := map[string]float64{}
		fastest := 0.0
		fs := strings.Fields(m[9])
		for i := 0; i+1 < len(fs); i += 2 {
			x, err := strconv.ParseFloat(fs[i+1], 64)
			if err != nil {
				t.Fatalf("%q: %v", sc.Text(), err)
			}
			times["vx_"+fs[i]] = x
			if fastest == 0 || x < fastest {
				fastest = x
			}
		}
		p := k / 2
		g := ConvGeom{N: B, C: C, H: H, W: W, M: M, OH: (H+2*p-k)/s + 1, OW: (W+2*p-k)/s + 1, G: 1, KH: k, KW: k, SH: s, SW: s, PH: p, PW: p, DH: 1, DW: 1}
		kn := chooseConv(g, 132, true)
		x, ok := times[kn]
		if !ok {
			t.Fatalf("%s: chose %s, which the table did not time", sc.Text(), kn)
		}
		n := count[m[1]][fmt.Sprintf("%d %d->%d k%d s%d", H, C, M, k, s)]
		if n == 0 {
			t.Fatalf("%s: no such convolution in %s", sc.Text(), m[1])
		}
		key := fmt.Sprintf("%s b%d", m[1], B)
		if sums[key] == nil {
			sums[key] = &tot{}
		}
		sums[key].chosen += float64(n) * x
		sums[key].fastest += float64(n) * fastest
		layers++
	}
	if layers != 102 || len(sums) != 6 {
		t.Fatalf("read %d layers in %d configurations, want 102 in 6", layers, len(sums))
	}
	for key, s := range sums {
		t.Logf("%s: chosen %.3f ms, fastest per layer %.3f ms (%.3f)", key, s.chosen, s.fastest, s.chosen/s.fastest)
		if s.chosen > 1.03*s.fastest {
			t.Errorf("%s: the chosen kernels take %.3f ms, %.1f%% over the per-layer fastest %.3f ms", key, s.chosen, 100*(s.chosen/s.fastest-1), s.fastest)
		}
	}
}
