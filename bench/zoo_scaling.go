package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/tensor"
)

// ZooScalingCommand is `vouch bench --zoo DIR --scaling`: issue 16's
// scaling check. Every zoo model's plan is profiled layer by layer at 1
// and at 2 kernel threads, the two alternating for Rounds rounds, and
// each layer's median of the rounds' medians compared: a layer is slower
// on 2 threads when its 2-thread median passes its 1-thread median by
// more than SlowFrac and SlowMin (the noise floor of a shared machine).
type ZooScalingCommand struct {
	Dir    string
	Only   []string
	Rounds int // alternations of the two thread counts (default 3)
	Runs   int // timed runs per profile (default 10)
	Warmup int // untimed runs per profile (default 2)
	// SlowFrac and SlowMin are the margins a layer must pass to count as
	// slower on 2 threads (defaults 0.10 and 20µs).
	SlowFrac float64
	SlowMin  time.Duration
	JSON     bool
	Stdout   io.Writer
	Stderr   io.Writer
}

// ScalingLayer is one layer slower on 2 threads than on 1.
type ScalingLayer struct {
	Name string        `json:"name"`
	Kind string        `json:"kind"`
	T1   time.Duration `json:"t1_ns"`
	T2   time.Duration `json:"t2_ns"`
}

// ScalingRow is one model's scaling.
type ScalingRow struct {
	Model  string `json:"model"`
	Layers int    `json:"layers"`
	// T1 and T2 are the sums of the layers' medians at 1 and 2 threads.
	T1      time.Duration `json:"t1_ns"`
	T2      time.Duration `json:"t2_ns"`
	Speedup float64       `json:"speedup"`
	// Run1 and Run2 are the medians of whole runs (no per-layer timing)
	// at 1 and 2 threads, timed alternately; RunSpeedup is Run1/Run2:
	// whether the model gains, with the costs between layers counted.
	Run1       time.Duration  `json:"run1_ns"`
	Run2       time.Duration  `json:"run2_ns"`
	RunSpeedup float64        `json:"run_speedup"`
	Slower     []ScalingLayer `json:"slower_layers,omitempty"`
	Reason     string         `json:"reason,omitempty"`
}

func (c ZooScalingCommand) withDefaults() ZooScalingCommand {
	if c.Rounds < 1 {
		c.Rounds = 3
	}
	if c.Runs < 1 {
		c.Runs = 10
	}
	if c.Warmup < 0 {
		c.Warmup = 0
	} else if c.Warmup == 0 {
		c.Warmup = 2
	}
	if c.SlowFrac <= 0 {
		c.SlowFrac = 0.10
	}
	if c.SlowMin <= 0 {
		c.SlowMin = 20 * time.Microsecond
	}
	return c
}

// Run profiles every selected model and prints the table.
func (c ZooScalingCommand) Run(ctx context.Context) error {
	c = c.withDefaults()
	// Two workers must be there for the 2-thread profile.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	names := c.Only
	if len(names) == 0 {
		var err error
		if names, err = ZooModels(c.Dir); err != nil {
			return err
		}
	}
	start := time.Now()
	var rows []ScalingRow
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		row := c.model(ctx, name)
		if c.Stderr != nil {
			fmt.Fprintf(c.Stderr, "zoo scaling: %-28s 1 thread %s ms, 2 threads %s ms, speed-up %s (whole runs %s), %d layers slower on 2 %s\n",
				row.Model, zooMS(row.T1), zooMS(row.T2), ratio(row.Speedup), ratio(row.RunSpeedup), len(row.Slower), cell(row.Reason))
		}
		rows = append(rows, row)
	}
	if c.JSON {
		b, err := json.MarshalIndent(map[string]any{"dir": c.Dir, "date": start.UTC().Format(time.RFC3339), "rounds": c.Rounds,
			"runs": c.Runs, "slow_frac": c.SlowFrac, "slow_min_ns": c.SlowMin, "rows": rows}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.Stdout, "%s\n", b)
		return err
	}
	fmt.Fprintf(c.Stdout, "zoo %s scaling, 1 vs 2 threads, batch 1: per-layer medians of %d alternating rounds of %d runs; a layer counts as slower on 2 threads past +%.0f%% and +%v (run %s, took %v)\n\n",
		c.Dir, c.Rounds, c.Runs, 100*c.SlowFrac, c.SlowMin, start.UTC().Format("2006-01-02 15:04 UTC"), time.Since(start).Round(time.Second))
	return writeScalingTable(c.Stdout, rows)
}

func (c ZooScalingCommand) model(ctx context.Context, name string) (row ScalingRow) {
	row.Model = name
	defer func() {
		if r := recover(); r != nil {
			row.Reason = fmt.Sprintf("panic: %v", r)
		}
	}()
	var zr ZooRow
	m, _, err := loadZooModel(filepath.Join(c.Dir, name), name, ZooOptions{}.withDefaults(), &zr)
	if err != nil {
		row.Reason = err.Error()
		return row
	}
	row.Layers = zr.Layers
	// per[t][layer] are the rounds' medians at t+1 threads.
	var per [2]map[string][]time.Duration
	kinds := map[string]string{}
	var order []string
	for r := 0; r < c.Rounds; r++ {
		for t := range 2 {
			// The first thread count of a round alternates.
			th := 1 + (t+r)%2
			ls, err := Profile(ctx, m.Plan, m.Inputs, Options{Warmup: c.Warmup, Runs: c.Runs, Threads: th})
			if err != nil {
				row.Reason = fmt.Sprintf("%d threads: %v", th, err)
				return row
			}
			if per[th-1] == nil {
				per[th-1] = map[string][]time.Duration{}
			}
			for _, l := range ls {
				if l.Part {
					continue
				}
				if _, ok := kinds[l.Name]; !ok {
					kinds[l.Name] = l.Kind
					order = append(order, l.Name)
				}
				per[th-1][l.Name] = append(per[th-1][l.Name], l.Median)
			}
		}
	}
	for _, name := range order {
		t1, t2 := Summarize(per[0][name]).Median, Summarize(per[1][name]).Median
		row.T1 += t1
		row.T2 += t2
		if t2 > t1+c.SlowMin && float64(t2) > float64(t1)*(1+c.SlowFrac) {
			row.Slower = append(row.Slower, ScalingLayer{Name: name, Kind: kinds[name], T1: t1, T2: t2})
		}
	}
	if row.T2 > 0 {
		row.Speedup = float64(row.T1) / float64(row.T2)
	}
	if err := c.wholeRuns(ctx, m, &row); err != nil {
		row.Reason = err.Error()
	}
	slices.SortFunc(row.Slower, func(a, b ScalingLayer) int { return int((b.T2 - b.T1) - (a.T2 - a.T1)) })
	return row
}

// wholeRuns times whole runs of m at 1 and at 2 threads, alternating.
func (c ZooScalingCommand) wholeRuns(ctx context.Context, m *Model, row *ScalingRow) error {
	g := m.Plan.Graph
	var engines []Engine
	for th := 1; th <= 2; th++ {
		eng, err := exec.NewEngine(g, builtin.Registry(), exec.Options{CPU: exec.CPU{Threads: th}})
		if err != nil {
			return err
		}
		inputs := make([]*tensor.Tensor, len(g.Inputs))
		shapes := make([][]int, len(g.Inputs))
		for i, v := range g.Inputs {
			inputs[i], shapes[i] = m.Inputs[v.Name], m.Inputs[v.Name].Shape
		}
		b, err := eng.Bind(shapes)
		if err != nil {
			return err
		}
		engines = append(engines, &vouchEngine{b: b, inputs: inputs})
	}
	res, err := Compare(ctx, engines, Options{Runs: c.Rounds * c.Runs, Warmup: c.Warmup})
	if err != nil {
		return err
	}
	row.Run1, row.Run2 = res[0].Summary.Median, res[1].Summary.Median
	if row.Run2 > 0 {
		row.RunSpeedup = float64(row.Run1) / float64(row.Run2)
	}
	return nil
}

func writeScalingTable(w io.Writer, rows []ScalingRow) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "model\tlayers\t1 thread ms\t2 threads ms\tspeed-up\trun 1 thread ms\trun 2 threads ms\trun speed-up\tlayers slower on 2\tmost slower (1 → 2 threads)")
	notFaster, runNotFaster, slowLayers, ok := 0, 0, 0, 0
	var logSum, runLogSum float64
	for _, r := range rows {
		if r.Reason != "" {
			fmt.Fprintf(tw, "%s\t%d\t\t\t\t\t%s\n", r.Model, r.Layers, cell(r.Reason))
			continue
		}
		worst := ""
		if len(r.Slower) > 0 {
			l := r.Slower[0]
			worst = fmt.Sprintf("%s %s %v → %v", l.Kind, l.Name, l.T1.Round(time.Microsecond), l.T2.Round(time.Microsecond))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.Model, r.Layers, zooMS(r.T1), zooMS(r.T2), ratio(r.Speedup),
			zooMS(r.Run1), zooMS(r.Run2), ratio(r.RunSpeedup), len(r.Slower), worst)
		if r.Speedup <= 1 {
			notFaster++
		}
		if r.RunSpeedup <= 1 {
			runNotFaster++
		}
		runLogSum += math.Log(r.RunSpeedup)
		slowLayers += len(r.Slower)
		logSum += math.Log(r.Speedup)
		ok++
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	geo, runGeo := 0.0, 0.0
	if ok > 0 {
		geo, runGeo = math.Exp(logSum/float64(ok)), math.Exp(runLogSum/float64(ok))
	}
	_, err := fmt.Fprintf(w, "\n%d models profiled: geomean speed-up %.2f× (layers' sums), %.2f× (whole runs); %d not faster on 2 threads by the layers' sums, %d by whole runs; %d layers slower on 2 threads\n",
		ok, geo, runGeo, notFaster, runNotFaster, slowLayers)
	return err
}
