#!/bin/bash
# bench/gpu/lanes.sh: the serving engine's streams on the GPU machine, in
# one short device call (carry .gpucarry, as bench/gpu/speed.sh): builds
# GPU plans of the shared models there, compares vouch run on the GPU with
# the CPU, then gputest -plans runs each plan at batch 1 and 3 and checks
# row 0 alone == in a batch of 3 and four concurrent runs (four lanes:
# streams) == the serial run, three rounds (direct, capture, graph).
set -u
: "${OUT:?set OUT}"
C=.gpucarry
T=/tmp/g14
rm -rf $T && mkdir -p $T
for f in gputest.test vouch; do
	gunzip -c $C/$f.gz >$T/$f && chmod +x $T/$f
done
exec > >(tee "$OUT/lanes.log") 2>&1
date -u
V=$T/vouch
plans=""
for m in ${MODELS:-digits_cnn breast_cancer_mlp mobilenet_v2 tiny_bert}; do
	$V build $C/models/$m/model.onnx -o $T/$m.plan --device cuda:0 | grep "^gpu" || continue
	td=$C/models/$m/test_data_set_0
	case $m in
	tiny_bert) in="--input input_ids=$td/input_0.pb --input attention_mask=$td/input_1.pb" ;;
	*) in="--input $td/input_0.pb" ;;
	esac
	$V run $T/$m.plan $in --device cuda:0 --out $T/o.gpu.$m >/dev/null && $V run $T/$m.plan $in --out $T/o.cpu.$m >/dev/null &&
		g=$(cd $T/o.gpu.$m && sha256sum * | sha256sum | cut -c1-16) && c=$(cd $T/o.cpu.$m && sha256sum * | sha256sum | cut -c1-16) &&
		{ [ "$g" = "$c" ] && echo "BITS-EQUAL $m gpu=$g cpu=$c" || echo "BITS-DIFFER $m gpu=$g cpu=$c"; }
	plans="$plans,$T/$m.plan"
done
timeout 150 $T/gputest.test -test.run GPUSuite -test.v -notwins -plans "${plans#,}" -batches 1,3 2>&1 | grep -v "0 differ  ok"
date -u
