// Package bench measures vouch against its peers: it generates seeded inputs
// for a model, runs vouch and each peer engine alternately on them, and
// summarises the latencies (median, p90, the ratio vouch/peer). It also
// profiles a plan layer by layer and measures GEMM throughput against the
// machine's FP32 FMA peak.
//
// The peers are optional and live behind build tags, so that a plain
// `go build ./...` needs neither cgo nor their modules:
//
//	-tags ort     ONNX Runtime through github.com/yalue/onnxruntime_go (cgo;
//	              the shared library comes from scripts/fetch-ort.sh)
//	-tags gomlx   github.com/gomlx/onnx-gomlx on GoMLX's pure-Go backend
//
// A peer built without its tag is reported as unavailable, never as an
// error: a benchmark of vouch alone still runs.
//
// Numbers from a shared machine are noisy. Runs alternate between engines
// (rotating which goes first) so that a slow spell hurts every engine alike,
// and the summary is the median, not the mean.
package bench
