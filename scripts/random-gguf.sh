#!/usr/bin/env bash
# Writes tiny GGUFs that are other builds of one model, for the canary's
# measurements (docs/fingerprints.md), and caches them on this machine;
# prints their paths on stdout, one a line.
#
#   scripts/random-gguf.sh SEED... [SEED-q8_0...] [stories-f16]
#
# A SEED is a random-weight model of stories260K's shape (llama, 5
# layers, 64 wide, 8 heads, 4 KV heads, 172 FFN, 2048 context) around its
# own 512-token tokenizer, from ../shared/tools/gen_random_gguf.py with
# numpy's generator seeded with SEED instead of 0: two seeds differ in
# their weights alone, the same shape, size and metadata (their matrices
# in F16). SEED-q8_0 is that seed's model re-quantized to Q8_0 by
# gguf-py's own quantizer, as llama-quantize would: every matrix whose
# rows split into Q8_0's blocks of 32 (all but ffn_down, 172 wide, kept
# in F16), the file type declared Q8_0. stories-f16 is stories260K itself
# with its matrices in F16, as a re-quantized build is.
# They load in llama-server and Ollama in a blink. It needs gguf-py from
# the llama-server build (scripts/llama-server.sh) and Debian's
# python3-numpy, installed when missing.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ $# -gt 0 ]] || { echo "usage: $0 SEED... [SEED-q8_0...] [stories-f16]" >&2; exit 2; }
for arg in "$@"; do
	[[ $arg =~ ^[0-9]{1,9}(-q8_0)?$ || $arg == stories-f16 ]] || { echo "$0: '$arg' is neither a seed (a number), SEED-q8_0 nor stories-f16" >&2; exit 2; }
done

cache="${SYSTEM1_CACHE:-$HOME/.cache/system1}"
dir="$cache/models"
gen="$root/../shared/tools/gen_random_gguf.py"
stories="$root/../shared/models/stories260K.gguf"
path() { if [[ $1 == stories-f16 ]]; then echo "$dir/stories260K-f16.gguf"; else echo "$dir/random-stories-$1.gguf"; fi; }

mkdir -p "$dir"
# One writer at a time per cache: a second run waits, then finds the files.
exec 9>"$dir/random-gguf.lock"
flock 9

# A SEED-q8_0 is written from its seed's model, so that one comes first.
todo=()
for arg in "$@"; do
	for a in ${arg%-q8_0} $arg; do
		[[ -f $(path "$a") || " ${todo[*]} " == *" $a "* ]] || todo+=("$a")
	done
done
if [[ ${#todo[@]} -gt 0 ]]; then
	server=$("$root/scripts/llama-server.sh")
	gguf_py="$(dirname "$server")/gguf-py"
	for f in "$gen" "$stories" "$gguf_py"; do
		[[ -e $f ]] || { echo "$0: $f is missing" >&2; exit 1; }
	done
	need_numpy
	for arg in "${todo[@]}"; do
		out=$(path "$arg")
		if [[ $arg == *-q8_0 || $arg == stories-f16 ]]; then
			if [[ $arg == stories-f16 ]]; then from=$stories to=f16; else from=$(path "${arg%-q8_0}") to=q8_0; fi
			/usr/bin/python3 - "$gguf_py" "$from" "$out.part" "$to" >&2 <<'PY'
# Copies a GGUF's metadata as it is and writes its matrices in another
# precision, declaring that file type: f16, every matrix as F16, as a
# converter writing another precision does; q8_0, every matrix whose rows
# split into Q8_0's blocks re-quantized by gguf-py's own quantizer, as
# llama-quantize would (the others stay as they are).
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from gguf import GGUFReader, GGUFWriter, GGUFValueType, GGMLQuantizationType, LlamaFileType
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import quantize
r = GGUFReader(sys.argv[2])
w = GGUFWriter(sys.argv[3], r.fields["general.architecture"].contents())
for k, f in r.fields.items():
    if k.startswith("GGUF.") or k in ("general.architecture", "general.file_type"):
        continue
    vt = f.types[0]
    if vt == GGUFValueType.ARRAY:
        w.add_array(k, f.contents())
    elif vt == GGUFValueType.STRING:
        w.add_string(k, f.contents())
    else:
        w.add_key_value(k, f.contents(), vt)
f16 = sys.argv[4] == "f16"
w.add_file_type(LlamaFileType.MOSTLY_F16 if f16 else LlamaFileType.MOSTLY_Q8_0)
q8, block = GGMLQuantizationType.Q8_0, GGML_QUANT_SIZES[GGMLQuantizationType.Q8_0][0]
for t in r.tensors:
    shape = [int(n) for n in reversed(t.shape)]
    a = np.array(t.data).reshape(shape)
    if a.ndim == 2 and f16:
        w.add_tensor(t.name, a.astype(np.float16))
    elif a.ndim == 2 and shape[-1] % block == 0 and t.tensor_type in (GGMLQuantizationType.F16, GGMLQuantizationType.F32):
        w.add_tensor(t.name, quantize(a.astype(np.float32), q8), raw_dtype=q8)
    else:
        w.add_tensor(t.name, a)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
PY
		else
			SEED=$arg /usr/bin/python3 - "$gen" "$gguf_py" --vocab "$stories" --out "$out.part" \
				--arch llama --layers 5 --embd 64 --ff 172 --heads 8 --kv 4 --ctx 2048 >&2 <<'PY'
# Runs gen_random_gguf.py as it is, with numpy's generator seeded from
# $SEED instead of 0.
import os, runpy, sys
import numpy as np
seed = int(os.environ["SEED"])
default_rng = np.random.default_rng
np.random.default_rng = lambda *_args, **_kw: default_rng(seed)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
PY
		fi
		mv "$out.part" "$out"
	done
fi
for arg in "$@"; do
	path "$arg"
done
