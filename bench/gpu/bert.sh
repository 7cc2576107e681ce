#!/bin/bash
# bench/gpu/bert.sh: issue 19's BERT-base encoder on the GPU, exact mode,
# in one device call (carry C, default .gpucarry-bertg, holding
# gputest.test.gz and vouch.gz built as bench/gpu/speed.sh says, and
# models/tiny_bert). It exports the zoo's bert_base there
# (bench/gpu/torch_bert.py: make-zoo.py's module, a dynamic batch), builds
# GPU plans of it and tiny_bert with vouch build --device cuda:0, prints
# each plan's layers kept on the CPU (none expected), compares vouch run on
# the GPU with the CPU at batch 1 and 64, times the plans through the
# serving engine at batch 1 and 64 (gputest -plans: each batch's outputs
# also checked against the CPU engine, row 0 alone == in a batch of 3, four
# lanes == serial), then times PyTorch FP32/FP16 on the same GPU.
# FAST=1 runs the fast-mode (fp16) checks and timings instead (below).
# SKIP_BERT_RUN=1 leaves out bert_base's vouch run comparisons (gputest's
# check the same batches); TWINS=1 also runs the twin suite (CASES per
# kernel, default 4) into $OUT/twins.log.
# Log: $OUT/bert.log.
set -u
: "${OUT:?set OUT}"
C=${C:-.gpucarry-bertg}
T=/tmp/bertg
rm -rf $T && mkdir -p $T
for f in gputest.test vouch; do
	[ -f $C/$f.gz ] && gunzip -c $C/$f.gz >$T/$f && chmod +x $T/$f
done
exec > >(tee "$OUT/bert.log") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv
if [ -n "${FAST:-}" ]; then
	# Fast mode (issue 19's FP16 bars): bert_base exported with its last
	# encoder state as a second output ("hidden", 128 x 768 a row: the
	# batch-invariance count over every value, not the 2 probabilities).
	# cuda/gputest TestFastAttention: fast_attn.cu on attn.Cases(19) against
	# attn.Reference bit for bit (their output digests to
	# $OUT/attn-record.txt, for cuda/attn's recorded test), a BERT-base row
	# alone vs in a batch of 64 and 20 runs, the kernel timed; then
	# bert_base as fp16 fast plans with its Attention layers exact and
	# fused, each: row 0 alone vs in batches of 2, 8 and 64, RUNS runs, 2/4
	# lanes, the CPU emulation at batch 1, the accuracy against the exact
	# plan, timed at batches 1 and 64 (and the exact plan); then PyTorch on
	# the same GPU. Log also $OUT/fast.log. The suite also profiles the
	# plans (engine.Profile: "profile" lines, each layer's GPU time in a
	# direct run with the launches queued ahead, summed per op and kernel;
	# every layer's "layer" line in fast.log). EXACT=false leaves out the
	# exact plan's timing, TORCH_DTYPES=fp16 PyTorch's FP32.
	# The export runs while the check compiles the kernels and tests them
	# (-attn-wait: it waits for the model file).
	(MAKE_ZOO=scripts/make-zoo.py PYTHONUNBUFFERED=1 timeout 150 python3 "$(dirname "$0")/torch_bert.py" --export $T --hidden --batches 1 2>&1 | grep -v Warning | tail -3) &
	exp=$!
	timeout "${SUITE_S:-240}" $T/gputest.test -test.run 'TestFastAttention$' -test.v -attn-models $T/bert_base/model.onnx -attn-wait 170s \
		-attn-record "$OUT/attn-record.txt" -attn-runs "${RUNS:-20}" -attn-exact="${EXACT:-true}" >"$OUT/fast.log" 2>&1
	echo "fast suite exit $?"
	# The export's pid: a bare wait would also wait for the log's tee (the
	# 2026-12-03 call hung there until its limit, before the PyTorch peer).
	wait $exp
	grep -E "^(bench|accuracy|model|attn:|kernel|time|emulation|profile|FAIL)|fast attention|panic|^---|^ok" "$OUT/fast.log" | head -120
	echo "invariance lines: $(grep -c "^invariant" "$OUT/fast.log"), failures: $(grep -c "^FAIL" "$OUT/fast.log")"
	MAKE_ZOO=scripts/make-zoo.py PYTHONUNBUFFERED=1 timeout 100 python3 "$(dirname "$0")/torch_bert.py" --time --hidden --batches 1,64 --dtypes "${TORCH_DTYPES:-fp32,fp16}" 2>&1 | grep -v Warning | tail -6
	date -u
	exit 0
fi
MAKE_ZOO=scripts/make-zoo.py PYTHONUNBUFFERED=1 timeout 150 python3 "$(dirname "$0")/torch_bert.py" --export $T --batches 1,64 2>&1 | grep -v Warning | tail -5
V=$T/vouch
prof='input_ids:1x128,64x128,64x128;attention_mask:1x128,64x128,64x128'
for m in tiny_bert bert_base; do
	src=$C/models/$m/model.onnx
	[ $m = bert_base ] && src=$T/bert_base/model.onnx
	[ -f $src ] || { echo "no $src"; continue; }
	pf=()
	[ $m = bert_base ] && pf=(--profile "$prof" --max-bytes 68719476736)
	$V build $src -o $T/$m.plan --device cuda:0 "${pf[@]}" --log $T/$m.build.jsonl | grep "^gpu"
	echo "$m: $(grep -c gpu-placement $T/$m.build.jsonl) placements, $(grep gpu-placement $T/$m.build.jsonl | grep -vc '"backend":"cuda"') on the CPU"
	grep gpu-placement $T/$m.build.jsonl | grep -v '"backend":"cuda"' | head -5 | cut -c1-250
done
td=$C/models/tiny_bert/test_data_set_0
runs=("tiny_bert:input_ids=$td/input_0.pb --input attention_mask=$td/input_1.pb")
[ -n "${SKIP_BERT_RUN:-}" ] || for b in 1 64; do runs+=("bert_base:input_ids=$T/bert_base/ids$b.npy --input attention_mask=$T/bert_base/mask$b.npy"); done
for r in "${runs[@]}"; do
	m=${r%%:*}
	[ -f $T/$m.plan ] || continue
	rm -rf $T/o.gpu $T/o.cpu
	$V run $T/$m.plan --input ${r#*:} --device cuda:0 --out $T/o.gpu | tail -1
	$V run $T/$m.plan --input ${r#*:} --out $T/o.cpu >/dev/null
	g=$(cd $T/o.gpu && sha256sum * | sha256sum | cut -c1-16)
	c=$(cd $T/o.cpu && sha256sum * | sha256sum | cut -c1-16)
	if [ "$g" = "$c" ]; then echo "BITS-EQUAL $m (${r#*:}) gpu=$g cpu=$c"; else echo "BITS-DIFFER $m (${r#*:}) gpu=$g cpu=$c"; fi
done
if [ -n "${TWINS:-}" ]; then
	# The twin suite (the small-product route's MatMul-as-1x1-conv twins
	# among the SGEMM cases).
	timeout 200 $T/gputest.test -test.run GPUSuite -test.v -seed "${SEED:-23}" -cases "${CASES:-4}" >"$OUT/twins.log" 2>&1
	echo "twins exit $?"
	grep -E "twin checks|FAIL|DIFFER|panic" "$OUT/twins.log" | head -20
	echo "MatMul-as-conv twins: $(grep -c 'as a 1x1 conv' "$OUT/twins.log"), $(grep 'as a 1x1 conv' "$OUT/twins.log" | grep -vc ' 0 differ  ok') differ"
fi
plans=""
for m in tiny_bert bert_base; do [ -f $T/$m.plan ] && plans="$plans,$T/$m.plan"; done
timeout 150 $T/gputest.test -test.run GPUSuite -test.v -notwins -plans "${plans#,}" -batches 1,64 >"$OUT/gputest.log" 2>&1
echo "gputest exit $?"
grep -E "^bench plan|twin plan|concurrent|FAIL|panic|rror" "$OUT/gputest.log" | grep -v "0 differ  ok" | head -40
echo "plan checks: $(grep -c '^twin plan' "$OUT/gputest.log"), $(grep '^twin plan' "$OUT/gputest.log" | grep -vc ' 0 differ  ok') differ"
MAKE_ZOO=scripts/make-zoo.py PYTHONUNBUFFERED=1 timeout 100 python3 "$(dirname "$0")/torch_bert.py" --time --batches 1,64 2>&1 | grep -v Warning | tail -6
date -u
