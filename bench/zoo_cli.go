package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
)

// ZooCommand is `vouch bench --zoo DIR`: the command layer parses the flags
// into it and calls Run (the zoo's whole command lives here, so that the
// shared bench command file carries one hunk).
type ZooCommand struct {
	Dir     string
	Only    []string // model names (the command's positional arguments)
	Peer    string   // "", or one of Peers
	Threads int
	Batch   int
	Runs    int // most timed runs per engine and model
	Warmup  int
	ORTLib  string
	JSON    bool
	// Stdout gets the table; Stderr one progress line per model.
	Stdout, Stderr io.Writer
}

// zooReport is the --json output.
type zooReport struct {
	Dir     string     `json:"dir"`
	Peer    string     `json:"peer,omitempty"`
	Threads int        `json:"threads"`
	Batch   int        `json:"batch"`
	Date    string     `json:"date"`
	Rows    []ZooRow   `json:"rows"`
	Summary ZooSummary `json:"summary"`
}

// Run runs the zoo at c.Threads threads (vouch's GOMAXPROCS, the peer's
// intra-op threads) and prints the table.
func (c ZooCommand) Run(ctx context.Context) error {
	if c.Peer != "" && !knownPeer(c.Peer) {
		return fmt.Errorf("bench: zoo: unknown peer %q (known: %s)", c.Peer, strings.Join(Peers, ", "))
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(c.Threads, 1)))
	o := ZooOptions{
		Batch: c.Batch, Runs: c.Runs, Warmup: c.Warmup, Peer: c.Peer, Only: c.Only,
		Config: PeerConfig{Threads: max(c.Threads, 1), ORTLib: c.ORTLib},
	}
	if c.Stderr != nil {
		o.Progress = func(r ZooRow) {
			fmt.Fprintf(c.Stderr, "zoo: %-30s %-8s vouch %s ms, %s ms, ratio %s %s\n", r.Model, r.Status, zooMS(r.Vouch), zooMS(r.Peer), ratio(r.Ratio), cell(r.Reason))
		}
	}
	start := time.Now()
	rows, err := Zoo(ctx, c.Dir, o)
	if err != nil {
		return err
	}
	if c.JSON {
		b, err := json.MarshalIndent(zooReport{Dir: c.Dir, Peer: c.Peer, Threads: c.Threads, Batch: o.Batch,
			Date: start.UTC().Format(time.RFC3339), Rows: rows, Summary: SummarizeZoo(rows)}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.Stdout, "%s\n", b)
		return err
	}
	fmt.Fprintf(c.Stdout, "zoo %s: %d threads, batch %d, %s (run %s, took %v)\n\n", c.Dir, max(c.Threads, 1), o.Batch,
		map[bool]string{true: "vouch/" + c.Peer, false: "vouch alone"}[c.Peer != ""], start.UTC().Format("2006-01-02 15:04 UTC"), time.Since(start).Round(time.Second))
	return WriteZooTable(c.Stdout, rows, c.Peer)
}

func knownPeer(p string) bool {
	for _, k := range Peers {
		if k == p {
			return true
		}
	}
	return false
}
