#!/bin/bash
# bench/gpu/nodetests.sh: the ONNX node tests and zoo models on the GPU,
# GPU exact plan vs the same plan on the CPU, bit for bit (issue 14), in one
# short device call.
#
#   bench/gpu/nodetests.sh prepare   here: packs libonnx-testdata's node tests
#                                    into .gpucarry/nodetests.tgz and the zoo
#                                    models of ZOO_MODELS (in that order, while
#                                    the working tree and the carry stay under
#                                    62 MiB, or the carry under CARRY_MB) into
#                                    .gpucarry/zoo/NAME.tgz
#                                    (and the other backend suites);
#                                    builds .gpucarry/gputest.test.gz when it is
#                                    missing (BUILD=1: always). Run it after
#                                    scripts/gpu-proof.sh prepare (which
#                                    empties .gpucarry).
#   OUT=$OUT bench/gpu/nodetests.sh  on the GPU machine (the device tool,
#                                    carry .gpucarry): $OUT/nodetests.log and
#                                    the results, $OUT/nodetests.jsonl (two
#                                    files; STANDIN_RUN=1: no GPU,
#                                    the portable CPU engine stands in: a
#                                    rehearsal)
#
# The harness is cuda/gputest's TestNodeTests (NodeTests): every test is
# built as vouch build --device cuda builds it; those with a layer on the
# GPU run through the serving engine on cuda:0 and on the CPU, and every
# output is compared bit for bit (NaN payloads aside, docs/determinism.md);
# the GPU output is checked against the test's reference too. A test that
# runs past its time or leaves a sticky CUDA error stops the process, which
# is started again on the same results file and goes on after that test.
# Time: node tests start until NODE_S (default 70) seconds after the start,
# the shared models (.gpucarry/models, when there) and the zoo models until
# TOTAL - 12; everything stops at TOTAL (default 115).
set -u
C=.gpucarry

# The zoo models for the GPU, most useful first (ConvTranspose, LSTM/GRU,
# 1-D convolutions, tabular MLPs, then the CNNs with Concat, SE/HardSwish,
# channel shuffle, Resize); prepare takes them in this order while the
# carry fits.
ZOO_MODELS=${ZOO_MODELS:-"unet_small lstm_64x128 gru_64x128 bilstm_64x128 lstm_classifier mlp_tabular mlp_tabular_bn ecg_cnn1d tcn1d kws_dwconv1d squeezenet1_1 lstm2_128x256 SUITES shufflenet_v2_x1_0 mobilenet_v3_small bigru2_128x256 lraspp_mobilenet_v3_large mnasnet1_0"}
# SUITES in that list is the rest of the backend test suite
# (pytorch-converted, pytorch-operator, simple: 4.8 MB), run after the node
# tests in the same phase.
DATA=/usr/share/libonnx-testdata/data

prepare() {
	mkdir -p $C/zoo
	if [ "${BUILD:-0}" = 1 ] || [ ! -f $C/gputest.test.gz ]; then
		CGO_ENABLED=0 go test -c -tags cuda -o $C/gputest.test ./cuda/gputest && gzip -9 -f $C/gputest.test || exit 1
	fi
	tar czf $C/nodetests.tgz -C $DATA node || exit 1
	rm -f $C/zoo/*.tgz $C/suites.tgz
	# What travels is the working tree (tracked and untracked files that
	# git does not ignore) and the carry, 64 MiB in all: keep 2 MiB spare.
	tree=$({ git ls-files -z; git ls-files -z -o --exclude-standard; } | xargs -0 -r stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
	limit=$((62 * 1048576 - tree))
	[ -n "${CARRY_MB:-}" ] && limit=$((CARRY_MB * 1048576))
	echo "carry limit: $((limit / 1048576)) MiB (the working tree is $((tree / 1048576)) MiB)"
	# A model is taken from the first of ZOO's directories that holds it
	# (scripts/make-zoo.py --out DIR --only ... exports the same bytes).
	zoo=${ZOO:-/work/zoo /tmp/g4zoo}
	for m in $ZOO_MODELS; do
		if [ $m = SUITES ]; then
			f=$C/suites.tgz
			tar czf $f -C $DATA pytorch-converted pytorch-operator simple
		else
			src=""
			for z in $zoo; do
				if [ -f $z/$m/model.onnx ] && [ -f $z/$m/test_data_set_0/output_0.pb ]; then
					src=$z
					break
				fi
			done
			if [ -z "$src" ]; then
				echo "zoo: $m not exported (yet) in $zoo"
				continue
			fi
			f=$C/zoo/$m.tgz
			tar czf $f -C $src $m
		fi
		if [ "$(du -sb $C | cut -f1)" -gt "$limit" ]; then
			echo "carry: $m left out ($(du -b $f | cut -f1) bytes): the carry would pass $((limit / 1048576)) MiB"
			rm -f $f
		fi
	done
	[ -f $C/suites.tgz ] && echo "suites in the carry: pytorch-converted pytorch-operator simple"
	echo "zoo in the carry: $(cd $C/zoo && ls *.tgz 2>/dev/null | sed 's/\.tgz$//' | tr '\n' ' ')"
	for p in $C/nodetests.tgz $C/zoo $C; do du -sh $p; done
}

# phase NAME ROOTS RESULTS START_BY FLAGS...: the harness over ROOTS, started
# again (resuming) after a stop, until the results say done or time is up.
phase() {
	local name=$1 roots=$2 results=$3 startby=$4
	shift 4
	for i in $(seq 1 25); do
		left=$((END - $(date +%s)))
		[ $left -le 3 ] && { echo "nodetests: $name: out of time"; break; }
		echo "nodetests: $name: process $i, $left s left"
		before=$(cat "$results" 2>/dev/null | wc -l)
		timeout $left $T/gputest.test -test.run 'TestNodeTests$' -nodetests "$roots" -nodetests-results "$results" \
			-nodetests-deadline "$startby" -nodetests-image $T/kernels.img $STANDIN "$@" 2>&1 |
			grep -v '^=== RUN\|^PASS$\|^ok '
		grep -q '"status":"done"' "$results" 2>/dev/null && break
		if [ "$(cat "$results" 2>/dev/null | wc -l)" = "$before" ]; then
			echo "nodetests: $name: the process recorded nothing: not started again"
			break
		fi
	done
}

device() {
	: "${OUT:?set OUT}"
	T=${T:-/tmp/g4nt}
	# STANDIN=1 rehearses on a machine without a GPU (the portable CPU
	# engine stands in for the device).
	STANDIN=""
	[ "${STANDIN_RUN:-0}" = 1 ] && STANDIN=-nodetests-standin
	rm -rf $T && mkdir -p $T/zoo
	START=$(date +%s)
	END=$((START + ${TOTAL:-115}))
	exec > >(tee "$OUT/nodetests.log") 2>&1
	date -u
	nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
	gunzip -c $C/gputest.test.gz >$T/gputest.test && chmod +x $T/gputest.test || exit 1
	tar xzf $C/nodetests.tgz -C $T || exit 1
	roots=$T/node
	if [ -f $C/suites.tgz ]; then
		tar xzf $C/suites.tgz -C $T && roots=$roots,$T/pytorch-converted,$T/pytorch-operator,$T/simple
	fi
	for f in $C/zoo/*.tgz; do
		[ -f "$f" ] && tar xzf "$f" -C $T/zoo
	done
	echo "unpacked in $(($(date +%s) - START)) s: $roots, zoo: $(ls $T/zoo | tr '\n' ' ')"
	phase node $roots $T/node.jsonl $((START + ${NODE_S:-70})) -nodetests-timeout 20s
	# The shared models travel in .gpucarry/models when scripts/gpu-proof.sh
	# prepare made the carry: they run first, with the zoo's tolerances.
	zroots=""
	[ -d $C/models ] && zroots=$(realpath $C/models),
	[ -n "$(ls $T/zoo)" ] && zroots=$zroots$T/zoo
	if [ -n "${zroots%,}" ]; then
		phase zoo "${zroots%,}" $T/zoo.jsonl $((END - 12)) -nodetests-timeout 40s -nodetests-rtol 1e-4 -nodetests-atol 1e-5
	fi
	cat $T/node.jsonl $T/zoo.jsonl >"$OUT/nodetests.jsonl" 2>/dev/null
	echo "nodetests: the last SUMMARY line of each phase counts every process of it"
	date -u
}

case ${1:-device} in
prepare) prepare ;;
device) device ;;
*)
	echo "usage: bench/gpu/nodetests.sh [prepare|device]" >&2
	exit 2
	;;
esac
