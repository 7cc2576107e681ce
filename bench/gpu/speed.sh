#!/bin/bash
# bench/gpu/speed.sh: issue 14's speed run, in one device call.
#
#   here:       CGO_ENABLED=0 go test -c -tags cuda -o .gpucarry/gputest.test ./cuda/gputest
#               CGO_ENABLED=0 go test -c -tags cuda -o .gpucarry/kernels.test ./cuda/kernels
#               CGO_ENABLED=0 go build -o .gpucarry/vouch ./cmd/vouch
#               gzip -9 .gpucarry/{gputest.test,kernels.test,vouch}
#               (scripts/gpu-proof.sh prepare puts the shared models in .gpucarry/models)
#   on the GPU: OUT=... bench/gpu/speed.sh   (the device tool, carry .gpucarry)
#
# It regenerates the golden PTX (cuda/kernels/testdata/exact.ptx -> $OUT),
# runs the twin suite (and with CONVBENCH=1 every Conv kernel on resnet18's
# and ResNet-50's convolutions), exports torchvision's ResNet-50 and
# resnet18 (random weights, seed 0, a dynamic batch axis) there, builds
# their GPU plans with vouch build --device cuda:0, compares vouch run's
# GPU and CPU outputs of ResNet-50 at batch 1 and 3, times the plans
# through the serving engine at batch 1, 32 and 256 (end to end and the
# layers alone), and runs the PyTorch peer (bench/gpu/torch_resnet.py) in
# the same call. Logs: $OUT/speed.log and $OUT/gputest.log.
set -u
: "${OUT:?set OUT}"
C=.gpucarry
T=/tmp/g14
rm -rf $T && mkdir -p $T
for f in gputest.test kernels.test vouch; do
	gunzip -c $C/$f.gz >$T/$f && chmod +x $T/$f
done
exec > >(tee "$OUT/speed.log") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,clocks.max.sm,memory.total --format=csv
(cd cuda/kernels && $T/kernels.test -test.run 'TestGolden$' -test.v -update && cp testdata/exact.ptx "$OUT/exact.ptx")
PYTHONUNBUFFERED=1 python3 - >$T/export.log 2>&1 <<'EOF' &
import os, torch, torchvision, numpy as np
torch.manual_seed(0)
for name in ["resnet50", "resnet18"]:
    m = getattr(torchvision.models, name)().eval()
    d = "/tmp/g14/" + name
    os.makedirs(d, exist_ok=True)
    x = torch.rand(1, 3, 224, 224)
    kw = dict(input_names=["input"], output_names=["logits"], opset_version=17,
              dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    try:
        torch.onnx.export(m, x, d + "/model.onnx", dynamo=False, **kw)
    except TypeError:
        torch.onnx.export(m, x, d + "/model.onnx", **kw)
    for b in (1, 3):
        np.save(d + "/x%d.npy" % b, torch.rand(b, 3, 224, 224).numpy())
    print("exported", name, os.path.getsize(d + "/model.onnx"))
EOF
exp=$!
if [ -z "${SKIP_TWINS:-}" ]; then
	timeout 300 $T/gputest.test -test.run GPUSuite -test.v -seed "${SEED:-17}" -cases "${CASES:-16}" ${CONVBENCH:+-convbench} \
		-models $C/models/digits_cnn/model.onnx,$C/models/breast_cancer_mlp/model.onnx,$C/models/mobilenet_v2/model.onnx >"$OUT/gputest.log" 2>&1
	echo "gputest exit $?"
	grep -E "^kernel vx_(ct|conv)|^bench|twin checks|FAIL|differ from" "$OUT/gputest.log" | grep -v " 0 of " | head -150
fi
wait $exp
cat $T/export.log
V=$T/vouch
prof="input:1x3x224x224,32x3x224x224,256x3x224x224"
for m in resnet50 resnet18; do
	[ -f $T/$m/model.onnx ] || continue
	$V build $T/$m/model.onnx -o $T/$m.plan --device cuda:0 --profile "$prof" --max-bytes 68719476736 --log $T/$m.build.jsonl | grep "^gpu"
	grep gpu-placement $T/$m.build.jsonl | grep -v '"backend":"cuda"' | head -5
done
for m in mobilenet_v2 tiny_bert; do
	$V build $C/models/$m/model.onnx -o $T/$m.plan --device cuda:0 --log $T/$m.build.jsonl | grep "^gpu"
	grep gpu-placement $T/$m.build.jsonl | grep -v '"backend":"cuda"' | head -12 | cut -c1-300
done
for b in 1 3; do
	x=$T/resnet50/x$b.npy
	[ -f $T/resnet50.plan ] || break
	$V run $T/resnet50.plan --input $x --device cuda:0 --out $T/o.gpu.$b >/dev/null
	$V run $T/resnet50.plan --input $x --out $T/o.cpu.$b >/dev/null
	g=$(cd $T/o.gpu.$b && sha256sum * | sha256sum | cut -c1-16)
	c=$(cd $T/o.cpu.$b && sha256sum * | sha256sum | cut -c1-16)
	if [ "$g" = "$c" ]; then echo "BITS-EQUAL resnet50 batch $b gpu=$g cpu=$c"; else echo "BITS-DIFFER resnet50 batch $b gpu=$g cpu=$c"; fi
done
# The other models: GPU and CPU runs of the same GPU plan on their test data.
for m in resnet18 mobilenet_v2 tiny_bert digits_cnn breast_cancer_mlp; do
	pl=$T/$m.plan
	if [ ! -f $pl ] && [ -f $C/models/$m/model.onnx ]; then
		$V build $C/models/$m/model.onnx -o $pl --device cuda:0 >/dev/null || continue
	fi
	[ -f $pl ] || continue
	td=$C/models/$m/test_data_set_0
	case $m in
	resnet18) in="--input $T/resnet18/x3.npy" ;;
	tiny_bert) in="--input input_ids=$td/input_0.pb --input attention_mask=$td/input_1.pb" ;;
	*) in="--input $td/input_0.pb" ;;
	esac
	$V run $pl $in --device cuda:0 --out $T/o.gpu.$m >/dev/null || continue
	$V run $pl $in --out $T/o.cpu.$m >/dev/null || continue
	g=$(cd $T/o.gpu.$m && sha256sum * | sha256sum | cut -c1-16)
	c=$(cd $T/o.cpu.$m && sha256sum * | sha256sum | cut -c1-16)
	if [ "$g" = "$c" ]; then echo "BITS-EQUAL $m gpu=$g cpu=$c"; else echo "BITS-DIFFER $m gpu=$g cpu=$c"; fi
done
plans=""
for m in resnet50 resnet18 mobilenet_v2 tiny_bert; do [ -f $T/$m.plan ] && plans="$plans,$T/$m.plan"; done
timeout 200 $T/gputest.test -test.run GPUSuite -test.v -notwins -plans "${plans#,}" -batches 1,32,256 2>&1 | grep -E "^bench plan|FAIL|panic"
PYTHONUNBUFFERED=1 timeout 200 python3 bench/gpu/torch_resnet.py --models resnet50,resnet18,mobilenet_v2 --batches 1,32,256
date -u
