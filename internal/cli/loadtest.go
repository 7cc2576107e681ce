package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vouchml/vouch/tensor"
)

// LoadtestOptions are the settings of `vouch loadtest`.
type LoadtestOptions struct {
	URL         string
	Model       string
	Inputs      []string
	Concurrency []int
	Duration    time.Duration
	Warmup      time.Duration
	JSON        bool
	Token       string
	TokenFile   string
}

func runLoadtest(ctx context.Context, m *Main, args []string) error {
	var o LoadtestOptions
	fs := m.newFlagSet("loadtest", "loadtest MODEL --input NAME=FILE ... [--url URL] [--concurrency 1,8,64] [--duration 10s]", `
Drives a vouch server (or any Open Inference Protocol v2 server) with
closed-loop clients: at each concurrency level, that many clients each send
the same request again as soon as the last one is answered. Prints, per
level, the requests answered 200, the errors, throughput and latency
percentiles measured at the client.

Example:
  vouch loadtest breast_cancer_mlp --url http://127.0.0.1:8080 \
      --input features=../shared/models/breast_cancer_mlp/test_data_set_0/input_0.pb \
      --concurrency 1,8,64 --duration 10s`)
	var inputs multiFlag
	var conc string
	fs.Var(&inputs, "input", "an input as NAME=FILE (.pb or .npy); repeat for each input")
	fs.StringVar(&o.URL, "url", "http://127.0.0.1:8080", "server base URL")
	fs.StringVar(&conc, "concurrency", "1,8,64", "comma-separated client counts")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "measuring time per level")
	fs.DurationVar(&o.Warmup, "warmup", time.Second, "unmeasured time before each level")
	fs.BoolVar(&o.JSON, "json", false, "send tensors as JSON instead of binary")
	fs.StringVar(&o.Token, "token", "", "bearer token")
	fs.StringVar(&o.TokenFile, "token-file", "", "file holding the bearer token")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || len(inputs) == 0 {
		return fmt.Errorf("%w: want one MODEL and at least one --input", ErrUsage)
	}
	for _, c := range strings.Split(conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return fmt.Errorf("%w: --concurrency %q: want positive integers", ErrUsage, conc)
		}
		o.Concurrency = append(o.Concurrency, n)
	}
	o.Model, o.Inputs = pos[0], inputs
	return m.loadtest(ctx, o)
}

// LoadResult is one concurrency level's measurement.
type LoadResult struct {
	Concurrency int
	OK, Errors  int
	Elapsed     time.Duration
	P50, P99    time.Duration
	Mean        time.Duration
}

// Throughput is answered requests per second.
func (r LoadResult) Throughput() float64 { return float64(r.OK) / r.Elapsed.Seconds() }

func (m *Main) loadtest(ctx context.Context, o LoadtestOptions) error {
	feeds := map[string]*tensor.Tensor{}
	for _, s := range o.Inputs {
		name, file, ok := strings.Cut(s, "=")
		if !ok {
			return fmt.Errorf("%w: --input %q: want NAME=FILE", ErrUsage, s)
		}
		t, err := ReadTensorFile(file)
		if err != nil {
			return fmt.Errorf("input %q: %w", name, err)
		}
		feeds[name] = t
	}
	token, err := readToken(o.Token, o.TokenFile)
	if err != nil {
		return err
	}
	body, hdr, err := encodeInferRequest(feeds, "", !o.JSON, false)
	if err != nil {
		return err
	}
	u := inferURL(o.URL, o.Model, "")
	// One request first, so that a wrong model or input fails fast.
	resp, err := postInfer(ctx, http.DefaultClient, u, body, hdr, token)
	if err != nil {
		return err
	}
	if _, _, _, err := decodeInferResponse(resp); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "%11s %9s %7s %9s %9s %9s %9s\n", "concurrency", "requests", "errors", "req/s", "p50 ms", "p99 ms", "mean ms")
	for _, c := range o.Concurrency {
		r := runLevel(ctx, u, body, hdr, token, c, o.Warmup, o.Duration)
		fmt.Fprintf(m.Stdout, "%11d %9d %7d %9.1f %9.2f %9.2f %9.2f\n", c, r.OK, r.Errors, r.Throughput(), ms(r.P50), ms(r.P99), ms(r.Mean))
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func runLevel(ctx context.Context, u string, body []byte, hdr map[string]string, token string, conc int, warmup, dur time.Duration) LoadResult {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc, DisableCompression: true}}
	defer client.CloseIdleConnections()
	start := time.Now()
	measureFrom, end := start.Add(warmup), start.Add(warmup+dur)
	var mu sync.Mutex
	var lats []time.Duration
	errs := 0
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			var mine []time.Duration
			bad := 0
			for ctx.Err() == nil {
				t0 := time.Now()
				if t0.After(end) {
					break
				}
				resp, err := postInfer(ctx, client, u, body, hdr, token)
				ok := err == nil && resp.StatusCode == 200
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				t1 := time.Now()
				if t0.Before(measureFrom) || t1.After(end) {
					continue
				}
				if ok {
					mine = append(mine, t1.Sub(t0))
				} else {
					bad++
				}
			}
			mu.Lock()
			lats = append(lats, mine...)
			errs += bad
			mu.Unlock()
		})
	}
	wg.Wait()
	r := LoadResult{Concurrency: conc, OK: len(lats), Errors: errs, Elapsed: dur}
	if len(lats) > 0 {
		slices.Sort(lats)
		var sum time.Duration
		for _, l := range lats {
			sum += l
		}
		r.Mean = sum / time.Duration(len(lats))
		r.P50 = lats[len(lats)*50/100]
		r.P99 = lats[min(len(lats)-1, len(lats)*99/100)]
	}
	return r
}
