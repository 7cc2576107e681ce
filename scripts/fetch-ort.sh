#!/bin/sh
# fetch-ort.sh downloads ONNX Runtime 1.30's CPU shared library, the peer that
# `vouch bench --peer ort` measures against, from the npm package
# onnxruntime-node@1.30.0 (DESIGN.md, "Reference points"). --ignore-scripts:
# the package's install script would fetch CUDA binaries; we want only the .so
# that ships in the tarball.
#
# Usage: scripts/fetch-ort.sh [CACHE_DIR]   (default: .cache/ort at the repo root)
# Prints the path of libonnxruntime.so.1; pass it to `vouch bench --ort-lib`
# or export VOUCH_ORT_LIB=... for the bench tests (built with -tags ort).
set -eu

version=1.30.0
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${1:-"$root/.cache/ort"}
lib="$cache/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1"

case "$(uname -s)/$(uname -m)" in
Linux/x86_64) ;;
*) echo "fetch-ort.sh: only linux/x64 is wired up (the npm package has bin/napi-v6/<os>/<arch>)" >&2; exit 1 ;;
esac

if [ ! -f "$lib" ]; then
	mkdir -p "$cache"
	# A package.json of our own keeps npm from walking up into the repo.
	[ -f "$cache/package.json" ] || echo '{"name":"vouch-ort-cache","private":true}' >"$cache/package.json"
	(cd "$cache" && npm install --ignore-scripts --no-audit --no-fund --silent "onnxruntime-node@$version" >&2)
fi
if [ ! -f "$lib" ]; then
	echo "fetch-ort.sh: $lib not found after npm install" >&2
	exit 1
fi
echo "$lib"
