#!/bin/bash
# bench/gpu/opcov.sh: the op-coverage check in one short device call
# (carry .gpucarry, built as bench/gpu/speed.sh says): regenerates the
# golden PTX ($OUT/exact.ptx), runs the twin suite (the new data-movement,
# broadcast, gather, batched MatMul and Div twins included; no -convbench),
# runs bench/gpu/lanes.sh on mobilenet_v2 and tiny_bert (row alone == in a
# batch, four lanes == serial, GPU == CPU bits), then vouch run on the GPU
# against the CPU on the other shared models and times tiny_bert's plan
# through the serving engine. Logs: $OUT/opcov.log, $OUT/gputest.log,
# $OUT/lanes.log.
set -u
: "${OUT:?set OUT}"
C=.gpucarry
T=/tmp/g14b
rm -rf $T && mkdir -p $T
for f in gputest.test kernels.test vouch; do
	gunzip -c $C/$f.gz >$T/$f && chmod +x $T/$f
done
exec > >(tee "$OUT/opcov.log") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv
(cd cuda/kernels && $T/kernels.test -test.run 'TestGolden$' -test.v -update && cp testdata/exact.ptx "$OUT/exact.ptx")
timeout 150 $T/gputest.test -test.run GPUSuite -test.v -seed "${SEED:-22}" -cases "${CASES:-12}" \
	-models $C/models/digits_cnn/model.onnx,$C/models/breast_cancer_mlp/model.onnx,$C/models/mobilenet_v2/model.onnx >"$OUT/gputest.log" 2>&1
echo "gputest exit $?"
grep -E "twin checks|FAIL|DIFFER|differ from|panic|error" "$OUT/gputest.log" | head -40
MODELS="mobilenet_v2 tiny_bert" OUT=$OUT timeout 120 bench/gpu/lanes.sh >/dev/null 2>&1
echo "lanes exit $?"
cat "$OUT/lanes.log" | head -60
V=$T/vouch
for m in digits_cnn breast_cancer_mlp tiny_bert; do
	$V build $C/models/$m/model.onnx -o $T/$m.plan --device cuda:0 --log $T/$m.build.jsonl | grep "^gpu"
	grep gpu-placement $T/$m.build.jsonl | grep -v '"backend":"cuda"' | cut -c1-220 | head -40
	td=$C/models/$m/test_data_set_0
	case $m in
	tiny_bert) in="--input input_ids=$td/input_0.pb --input attention_mask=$td/input_1.pb" ;;
	*) in="--input $td/input_0.pb" ;;
	esac
	$V run $T/$m.plan $in --device cuda:0 --out $T/o.gpu.$m | tail -2
	$V run $T/$m.plan $in --out $T/o.cpu.$m >/dev/null
	g=$(cd $T/o.gpu.$m && sha256sum * | sha256sum | cut -c1-16)
	c=$(cd $T/o.cpu.$m && sha256sum * | sha256sum | cut -c1-16)
	if [ "$g" = "$c" ]; then echo "BITS-EQUAL $m gpu=$g cpu=$c"; else echo "BITS-DIFFER $m gpu=$g cpu=$c"; fi
done
timeout 60 $T/gputest.test -test.run GPUSuite -test.v -notwins -plans $T/tiny_bert.plan -batches 1,32 2>&1 | grep -E "^bench plan|FAIL|panic|differ"
date -u
