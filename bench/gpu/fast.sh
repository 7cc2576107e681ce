#!/bin/bash
# bench/gpu/fast.sh: issue 19's fast-mode run, in one device call.
#
#   here:       C=DIR bench/gpu/fast.sh prepare  (builds DIR, default .gpucarry-fastk/:
#               the test binaries with CGO_ENABLED=0, gzipped, the shared models,
#               this script and torch_fast.py; DIR must be an ignored folder of the
#               checkout the device tool copies)
#   on the GPU: OUT=... .gpucarry-fastk/fast.sh  (the device tool, carry .gpucarry-fastk)
#
# It regenerates the fast golden PTX (cuda/kernels/testdata/fast.ptx -> $OUT;
# the exact golden is checked unchanged), exports torchvision's ResNet-50
# there (random weights, seed 0, a dynamic batch axis), runs the fast suite
# (cuda/gputest TestFast: the tensor-core kernels against the exact ones, a
# row alone vs in batches of 2..256, 100 runs, 1/2/4 streams; then the fast
# plans of ResNet-50 and the shared models: row 0 alone vs in batches, runs,
# lanes, accuracy against the exact plan, ResNet-50 timed at batch 1 and
# 256), and the PyTorch FP16 peer (bench/gpu/torch_fast.py) in the same
# call. Fast plans are built in memory through engine.FastSection until
# `vouch build --precision` lands. Logs: $OUT/fast.log, $OUT/torch.log.
set -u
if [ "${1:-}" = prepare ]; then
	set -e
	C=${C:-.gpucarry-fastk}
	rm -rf $C && mkdir -p $C/models
	CGO_ENABLED=0 go test -c -tags cuda -o $C/gputest.test ./cuda/gputest
	CGO_ENABLED=0 go test -c -tags cuda -o $C/kernels.test ./cuda/kernels
	gzip -9 $C/gputest.test $C/kernels.test
	cp bench/gpu/fast.sh bench/gpu/torch_fast.py $C/
	for m in ${MODELS:-breast_cancer_mlp digits_cnn mobilenet_v2 tiny_bert}; do
		[ -d ../shared/models/$m ] && cp -r ../shared/models/$m $C/models/
	done
	du -sh $C
	exit 0
fi
: "${OUT:?set OUT}"
C=$(cd "$(dirname "$0")" && pwd)
T=/tmp/fastk
rm -rf $T && mkdir -p $T
for f in gputest.test kernels.test; do
	gunzip -c $C/$f.gz >$T/$f && chmod +x $T/$f
done
exec > >(tee "$OUT/fast.log") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,clocks.max.sm,memory.total --format=csv
# The golden of fast.cu (embedded in the test binary), made in a scratch
# directory: the checkout there need not be this branch's.
mkdir -p $T/k/testdata && (cd $T/k && $T/kernels.test -test.run 'TestFastGolden$' -test.v -update && cp testdata/fast.ptx "$OUT/fast.ptx")
PYTHONUNBUFFERED=1 python3 - >$T/export.log 2>&1 <<'PY' &
import os, torch, torchvision
torch.manual_seed(0)
m = torchvision.models.resnet50().eval()
d = "/tmp/fastk/resnet50"
os.makedirs(d, exist_ok=True)
kw = dict(input_names=["input"], output_names=["logits"], opset_version=17,
          dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
try:
    torch.onnx.export(m, torch.rand(1, 3, 224, 224), d + "/model.onnx", dynamo=False, **kw)
except TypeError:
    torch.onnx.export(m, torch.rand(1, 3, 224, 224), d + "/model.onnx", **kw)
print("exported resnet50", os.path.getsize(d + "/model.onnx"))
PY
exp=$!
wait $exp
cat $T/export.log
models=""
[ -f $T/resnet50/model.onnx ] && models=$T/resnet50/model.onnx
for m in ${MODELS:-breast_cancer_mlp digits_cnn mobilenet_v2 tiny_bert}; do
	[ -f $C/models/$m/model.onnx ] && models="$models,$C/models/$m/model.onnx"
done
timeout "${SUITE_S:-200}" $T/gputest.test -test.run 'TestFast$' -test.v -fast-models "${models#,}" -fast-bench resnet50 \
	-fast-bench-batches "${BATCHES:-1,256}" -fast-precisions "${PRECS:-fp16,bf16}" -fast-runs "${RUNS:-100}" >"$OUT/suite.log" 2>&1
echo "suite exit $?"
grep -E "^(bench|accuracy model|model|fast:|kernel|FAIL|time)|fast suite|panic|^---|^ok" "$OUT/suite.log" | grep -v "not run" | head -150
echo "invariance lines: $(grep -c "^invariant" "$OUT/suite.log")"
if [ -z "${NO_TORCH:-}" ]; then
	PYTHONUNBUFFERED=1 timeout "${TORCH_S:-90}" python3 $C/torch_fast.py --batches 1,256 --inv-batch 64 2>&1 | tee "$OUT/torch.log"
fi
date -u
