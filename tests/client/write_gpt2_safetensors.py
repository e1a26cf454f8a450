#!/usr/bin/python3
"""Writes a GPT-2 checkpoint in Hugging Face's names the way the safetensors
library lays it out, with numpy and json only (no safetensors package):

  write_gpt2_safetensors.py OUT --n_layer=2 --d_model=8 --vocab=11 --context=5
      [--prefix=transformer.] [--dtype=F32|BF16] [--mask_buffers] [--lm_head]

Element i (row-major, in the file's own Conv1D [in, out] layout) of the k-th
tensor holds k * 10000 + i; the k of every name is in __metadata__["tags"], so
a reader can check each value landed where it belongs."""
import argparse
import json
import struct

import numpy as np


def gpt2_tensors(n_layer, c, vocab, context):
    """(name, shape) of GPT2LMHeadModel's parameters, Conv1D weights [in, out]."""
    out = [("wte.weight", (vocab, c)), ("wpe.weight", (context, c))]
    for i in range(n_layer):
        h = f"h.{i}."
        out += [(h + "ln_1.weight", (c,)), (h + "ln_1.bias", (c,)),
                (h + "attn.c_attn.weight", (c, 3 * c)), (h + "attn.c_attn.bias", (3 * c,)),
                (h + "attn.c_proj.weight", (c, c)), (h + "attn.c_proj.bias", (c,)),
                (h + "ln_2.weight", (c,)), (h + "ln_2.bias", (c,)),
                (h + "mlp.c_fc.weight", (c, 4 * c)), (h + "mlp.c_fc.bias", (4 * c,)),
                (h + "mlp.c_proj.weight", (4 * c, c)), (h + "mlp.c_proj.bias", (c,))]
    out += [("ln_f.weight", (c,)), ("ln_f.bias", (c,))]
    return out


def encode(values, dtype):
    values = np.ascontiguousarray(values, dtype="<f4")
    if dtype == "F32":
        return values.tobytes()
    bits = values.view("<u4").astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # Round to nearest even.
    return rounded.astype("<u2").tobytes()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--n_layer", type=int, default=2)
    p.add_argument("--d_model", type=int, default=8)
    p.add_argument("--vocab", type=int, default=11)
    p.add_argument("--context", type=int, default=5)
    p.add_argument("--prefix", default="transformer.")
    p.add_argument("--dtype", default="F32", choices=["F32", "BF16"])
    p.add_argument("--mask_buffers", action="store_true")
    p.add_argument("--lm_head", action="store_true")
    a = p.parse_args()

    tensors, tags = [], {}
    for k, (name, shape) in enumerate(gpt2_tensors(a.n_layer, a.d_model, a.vocab, a.context)):
        values = (k * 10000 + np.arange(int(np.prod(shape)))).astype(np.float32).reshape(shape)
        tensors.append((a.prefix + name, values, a.dtype))
        tags[a.prefix + name] = k
    if a.mask_buffers:  # What older transformers versions saved: the causal mask.
        for i in range(a.n_layer):
            mask = np.tril(np.ones((a.context, a.context), np.float32)).reshape(1, 1, a.context, a.context)
            tensors.append((f"{a.prefix}h.{i}.attn.bias", mask, "F32"))
    if a.lm_head:
        tensors.append(("lm_head.weight", tensors[0][1], a.dtype))

    header, blobs, offset = {}, [], 0
    for name, values, dtype in tensors:
        blob = encode(values, dtype)
        header[name] = {"dtype": dtype, "shape": list(values.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {"format": "pt", "tags": json.dumps(tags)}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(a.out, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


if __name__ == "__main__":
    main()
