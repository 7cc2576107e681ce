#!/bin/bash
# gpu-proof.sh: the served-on-GPU, replayed-on-CPU proof of issue 14, and
# GPU-vs-CPU bit equality of whole plans through the product's commands.
#
#   scripts/gpu-proof.sh prepare        here: build the CGO_ENABLED=0 binary
#                                       and copy the models into .gpucarry/
#                                       (git-ignored through .git/info/exclude)
#   scripts/gpu-proof.sh device         on the GPU machine (the device tool:
#                                       carry .gpucarry; $OUT receives
#                                       proof.log and proof.tgz)
#   scripts/gpu-proof.sh replay DIR     here, on a CPU: unpack DIR/proof.tgz
#                                       and vouch replay every served trace
#                                       ($VOUCH names the binary; default
#                                       go run ./cmd/vouch)
#
# On the GPU machine, for each model: vouch build --device cuda:0 (NVRTC
# compiles the exact kernels into the plan), vouch run on the GPU and on the
# CPU from the same GPU plan, and the output files' SHA-256 compared; then
# vouch serve --device cuda:0 --capture-inputs takes requests (vouch infer),
# and the audit data, the plans and the trace ids come back. resnet18 is
# exported there from torchvision (random weights, seed 0): the shared
# file is too large to travel with the binary.
set -eu -o pipefail

models="breast_cancer_mlp digits_cnn mobilenet_v2 tiny_bert"
carry=.gpucarry

prepare() {
	rm -rf "$carry" && mkdir -p "$carry/models"
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$carry/vouch" ./cmd/vouch
	gzip -9 -f "$carry/vouch"
	for m in $models; do
		mkdir -p "$carry/models/$m"
		cp ../shared/models/$m/model.onnx "$carry/models/$m/"
		cp -r ../shared/models/$m/test_data_set_0 "$carry/models/$m/"
	done
	du -sh "$carry"
}

# inputs MODEL DIR: the --input flags for a model's test data.
inputs() {
	case $1 in
	tiny_bert) echo "--input input_ids=$2/input_0.pb --input attention_mask=$2/input_1.pb" ;;
	*) echo "--input $2/input_0.pb" ;;
	esac
}

device() {
	: "${OUT:?set OUT}"
	W=/tmp/gpuproof
	rm -rf $W && mkdir -p $W/out $W/in
	V=$W/vouch
	gunzip -c $carry/vouch.gz >$V && chmod +x $V
	exec > >(tee "$OUT/proof.log") 2>&1
	set +e -x
	# DEV=cpu rehearses the whole run on a machine without a GPU (CPU plans).
	dev=${DEV:-cuda:0}
	gpuflag="--device $dev"
	[ "$dev" = cpu ] && gpuflag=""
	date -u
	nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,clocks.max.sm,memory.total --format=csv
	$V version || true
	cp -r $carry/models $W/models
	# resnet18, torchvision's architecture, random weights (seed 0), batch dynamic.
	PYTHONUNBUFFERED=1 python3 - <<'EOF' || echo "resnet18 export failed"
import os, torch, torchvision, numpy as np
torch.manual_seed(0)
m = torchvision.models.resnet18().eval()
d = "/tmp/gpuproof/models/resnet18"; os.makedirs(d + "/test_data_set_0", exist_ok=True)
x = torch.rand(1, 3, 224, 224)
try:
    torch.onnx.export(m, x, d + "/model.onnx", input_names=["input"], output_names=["logits"], opset_version=17, dynamo=False)
except TypeError:
    torch.onnx.export(m, x, d + "/model.onnx", input_names=["input"], output_names=["logits"], opset_version=17)
np.save(d + "/test_data_set_0/input_0.npy", x.numpy())
EOF
	[ -f $W/models/resnet18/test_data_set_0/input_0.npy ] && cp $W/models/resnet18/test_data_set_0/input_0.npy $W/models/resnet18/test_data_set_0/input_0.pb.npy
	for m in $models resnet18; do
		src=$W/models/$m/model.onnx
		[ -f $src ] || continue
		td=$W/models/$m/test_data_set_0
		in=$(inputs $m $td)
		[ $m = resnet18 ] && in="--input $td/input_0.npy"
		$V build $src -o $W/$m.gpu.plan $gpuflag || continue
		$V inspect $W/$m.gpu.plan >$W/out/$m.inspect.txt 2>&1 || true
		$V run $W/$m.gpu.plan $in --device $dev --out $W/out/$m.gpu || continue
		$V run $W/$m.gpu.plan $in --out $W/out/$m.cpu || continue
		g=$(cd $W/out/$m.gpu && sha256sum * | sha256sum | cut -c1-16)
		c=$(cd $W/out/$m.cpu && sha256sum * | sha256sum | cut -c1-16)
		if [ "$g" = "$c" ]; then echo "BITS-EQUAL $m gpu=$g cpu=$c"; else echo "BITS-DIFFER $m gpu=$g cpu=$c"; fi
	done
	# Serve the two small GPU plans on the GPU and send requests.
	PYTHONUNBUFFERED=1 python3 - <<'EOF'
import numpy as np
r = np.random.default_rng(14)
np.save("/tmp/gpuproof/in/digits_b2.npy", r.uniform(0, 16, (2, 1, 8, 8)).astype(np.float32))
np.save("/tmp/gpuproof/in/digits_b5.npy", r.uniform(0, 16, (5, 1, 8, 8)).astype(np.float32))
np.save("/tmp/gpuproof/in/bc_b3.npy", r.normal(0, 1, (3, 30)).astype(np.float32))
EOF
	# Serve the GPU plans on the GPU and send requests; each input three
	# times: the first run of a shape runs directly, the second captures
	# the CUDA graph (plans all on the GPU), the third replays it.
	plans=""
	for m in digits_cnn breast_cancer_mlp resnet18 mobilenet_v2 tiny_bert; do
		[ -f $W/$m.gpu.plan ] && plans="$plans --plan $W/$m.gpu.plan,$m"
	done
	$V serve $plans --device $dev --capture-inputs --data $W/data --listen 127.0.0.1:18080 --grpc 127.0.0.1:18081 --access-log "" >$W/serve.log 2>&1 &
	sp=$!
	for i in $(seq 1 300); do grep -q "^http" $W/serve.log && break; sleep 0.2; done
	cat $W/serve.log
	url=http://127.0.0.1:18080
	: >$W/traces.txt
	M=$W/models
	for req in "digits_cnn image=$M/digits_cnn/test_data_set_0/input_0.pb" "digits_cnn image=$W/in/digits_b2.npy" "digits_cnn image=$W/in/digits_b5.npy" \
		"breast_cancer_mlp features=$M/breast_cancer_mlp/test_data_set_0/input_0.pb" "breast_cancer_mlp features=$W/in/bc_b3.npy" \
		"resnet18 input=$M/resnet18/test_data_set_0/input_0.npy" "mobilenet_v2 input=$M/mobilenet_v2/test_data_set_0/input_0.pb" \
		"tiny_bert input_ids=$M/tiny_bert/test_data_set_0/input_0.pb attention_mask=$M/tiny_bert/test_data_set_0/input_1.pb"; do
		set -- $req
		model=$1
		shift
		args=""
		for a; do args="$args --input $a"; done
		for rep in 1 2 3; do
			$V infer $model --url $url $args | tee $W/infer.txt
			t=$(awk '/^trace id/ {print $3}' $W/infer.txt)
			[ -n "$t" ] && echo "$model $t" >>$W/traces.txt
		done
	done
	kill -INT $sp
	wait $sp || true
	cat $W/serve.log
	while read -r model trace; do
		$V audit show $trace --data $W/data --json 2>/dev/null | python3 -c "import json,sys; r=json.load(sys.stdin)['record']; print('record', r['trace_id'], r['model'], 'backend=' + r['backend'], 'device=' + repr(r['device']), r['output_digest'])"
	done <$W/traces.txt
	small=""
	for m in digits_cnn breast_cancer_mlp tiny_bert; do [ -f $W/$m.gpu.plan ] && small="$small $m.gpu.plan"; done
	tar czf "$OUT/proof.tgz" -C $W data traces.txt $small in
	[ -f $W/mobilenet_v2.gpu.plan ] && cp $W/mobilenet_v2.gpu.plan "$OUT/"
	# NO_BIG=1 leaves resnet18's 47 MB plan behind (the device tool brings back 64 MiB at most).
	[ -f $W/resnet18.gpu.plan ] && [ -z "${NO_BIG:-}" ] && split -b 15000000 $W/resnet18.gpu.plan "$OUT/resnet18.gpu.plan.part-"
	ls -la "$OUT"
	# Speed: the GPU plans end to end (input upload, the layers as one CUDA
	# graph per shape where all run on the GPU, output download).
	for b in 1 32 256; do
		$V bench $M/resnet18/model.onnx --device $dev --batch $b --runs 20 --warmup 3 || true
	done
	$V bench $M/resnet18/model.onnx --threads 16 --batch 1 --runs 10 --warmup 2 || true
	$V bench $M/mobilenet_v2/model.onnx --device $dev --batch 1 --runs 20 --warmup 3 || true
	# The peer on the same GPU: PyTorch, FP32, TF32 off, channels_last, CUDA graphs.
	[ "$dev" = cpu ] || PYTHONUNBUFFERED=1 timeout 240 python3 bench/gpu/torch_resnet.py --models resnet18,mobilenet_v2 --batches 1,32,256 || true
	date -u
}

replay() {
	dir=$1
	w=$(mktemp -d)
	tar xzf "$dir/proof.tgz" -C "$w"
	for m in mobilenet_v2 resnet18; do
		[ -f "$dir/$m.gpu.plan" ] && cp "$dir/$m.gpu.plan" "$w/"
		ls "$dir/$m.gpu.plan.part-"* >/dev/null 2>&1 && cat "$dir/$m.gpu.plan.part-"* >"$w/$m.gpu.plan"
	done
	fail=0
	while read -r model trace; do
		if [ ! -f "$w/$model.gpu.plan" ]; then
			echo "SKIPPED   trace $trace: $model's plan did not come back (NO_BIG)"
			continue
		fi
		if ! ${VOUCH:-go run ./cmd/vouch} replay "$trace" --data "$w/data" --plan "$w/$model.gpu.plan"; then
			fail=1
		fi
	done <"$w/traces.txt"
	[ -s "$w/traces.txt" ] || fail=1
	rm -rf "$w"
	return $fail
}

case ${1:-} in
prepare) prepare ;;
device) device ;;
replay) replay "${2:?replay DIR}" ;;
*)
	echo "usage: scripts/gpu-proof.sh prepare | device | replay DIR" >&2
	exit 2
	;;
esac
