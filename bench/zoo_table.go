package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteZooTable writes the zoo table as Markdown: one row per model (ONNX
// nodes → plan layers, the medians, the ratio vouch/peer, and the reason of
// any mismatch or failure), then the summary line.
func WriteZooTable(w io.Writer, rows []ZooRow, peer string) error {
	if peer == "" {
		peer = "peer"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| model | ONNX nodes → layers | vouch ms | %s ms | ratio | max abs err vouch / %s | note |\n|---|---|---|---|---|---|---|\n", peer, peer)
	for _, r := range rows {
		layers := "—"
		if r.Layers > 0 {
			layers = fmt.Sprint(r.Layers)
		}
		note := ""
		if r.Status != ZooOK {
			note = string(r.Status) + ": "
		}
		note += r.Reason
		fmt.Fprintf(&b, "| %s | %d → %s | %s | %s | %s | %s | %s |\n", r.Model, r.Nodes, layers, zooMS(r.Vouch), zooMS(r.Peer), ratio(r.Ratio), errString(r), cell(note))
	}
	s := SummarizeZoo(rows)
	fmt.Fprintf(&b, "\n%d models: %d compared with %s", s.Models, s.Compared, peer)
	if s.Compared > 0 {
		fmt.Fprintf(&b, ", geometric mean vouch/%s %.2f, worst %.2f (%s)", peer, s.Geomean, s.Worst.Ratio, s.Worst.Model)
	}
	fmt.Fprintf(&b, "; %d mismatched, %d failed; %d of %d run bit-identical at 1 and 2 threads\n", s.Mismatched, s.Failed, s.ThreadInvariant, s.Models-s.Failed)
	_, err := io.WriteString(w, b.String())
	return err
}

func zooMS(d time.Duration) string {
	if d <= 0 {
		return "—"
	}
	v := float64(d) / 1e6
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

func ratio(r float64) string {
	if r <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", r)
}

func errString(r ZooRow) string {
	if r.Status == ZooFailed {
		return "—"
	}
	if r.PeerMaxAbsErr > 0 {
		return fmt.Sprintf("%.1e / %.1e", r.MaxAbsErr, r.PeerMaxAbsErr)
	}
	return fmt.Sprintf("%.1e", r.MaxAbsErr)
}

// cell keeps a reason on one table row and bounded in length.
func cell(s string) string {
	s = strings.NewReplacer("|", "/", "\n", " ").Replace(s)
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}
