"""The embedded SmolLM2 written in another llama.cpp weight type, for serving benchmarks.

    python -m benchmarks.requantize Q4_0 OUT.gguf

The embedded GGUF holds Q4_1 weights. On x86, ggml multiplies Q4_1 one sequence at a time, so a
decoding step of 4 sequences costs about 3x a step of one; Q4_0 and Q8_0 have kernels that reuse
a block of weights across the sequences of a batch, and batching pays more there. Requantizing
from Q4_1 loses some accuracy: this is for measuring the serving engine, not for answers.
"""

from __future__ import annotations

import argparse
import ctypes

import llama_cpp

from llamay.modelfiles.shipped import default_model_path

TYPES = {"Q4_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0, "Q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("type", choices=sorted(TYPES))
    ap.add_argument("out", help="the GGUF to write")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = TYPES[args.type]
    params.allow_requantize = True
    params.nthread = args.threads
    status = llama_cpp.llama_model_quantize(str(default_model_path()).encode(), args.out.encode(), ctypes.byref(params))
    if status != 0:
        raise SystemExit(f"llama.cpp could not requantize the model (status {status})")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
