#!/usr/bin/python3
"""safetensors export/import against live shards, and spotps's GPT against a
plain PyTorch GPT-2 on the exported weights:

  safetensors_torch_test.py BIN_DIR

1. A "pretrained" GPT-2 of the tiny preset's shape, written with numpy + json
   in Hugging Face's names (Conv1D weights [in, out]), is imported into a
   fresh shard (spotps-ctl import) and exported again: bit-exact in FP32,
   rounded to nearest even in BF16; a second import and broken files are
   refused, and change nothing; an import that reaches only a shard that
   restarted empty says so.
2. spotps-trainer --init_from=FILE on another fresh shard starts from the
   file's weights (SGD with lr 1e-30 leaves them bit-exact after its steps).
3. After a few training steps on the first shard, its export is loaded into
   a PyTorch GPT-2 written here from scratch (pre-LN blocks, eps 1e-5, tanh
   GELU, causal attention, tied head) and its logits for fixed tokens are
   compared with spotps-generate's, FP32 and BF16. The last line is
   `logits: fp32 max_abs=A max_rel=R bf16 max_abs=A max_rel=R` (R: A over the
   largest logit's magnitude).
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client"))
from write_gpt2_safetensors import encode, gpt2_tensors  # noqa: E402

# trainer/model/gpt_config.cc's "tiny".
TINY = dict(vocab=256, context=128, n_layer=4, n_head=4, d_model=128)
TOKENS = [72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 10, 0, 255, 128, 7]

BIN = sys.argv[1]
scratch = tempfile.mkdtemp(prefix="spotps-safetensors-")
children = []


def fail(message):
    print("FAIL: " + message, file=sys.stderr, flush=True)
    sys.exit(1)


def write_file(path, tensors, metadata=None, dtype="F32"):
    """tensors: [(name, np.ndarray)] in the order of the data section."""
    header, blobs, offset = {}, [], 0
    for name, values in tensors:
        blob = encode(values, dtype)
        header[name] = {"dtype": dtype, "shape": list(values.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_file(path):
    """{name: float32 array} and metadata, parsed with json + numpy."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    metadata = header.pop("__metadata__", {})
    body = data[8 + n:]
    out = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        raw = body[begin:end]
        if e["dtype"] == "F32":
            values = np.frombuffer(raw, "<f4")
        elif e["dtype"] == "BF16":
            values = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            fail(f"unexpected dtype {e['dtype']}")
        out[name] = values.reshape(e["shape"]).copy()
    return out, metadata


def pretrained(seed):
    """Random GPT-2 weights of the tiny shape; no value within 1e-3 of 0."""
    rng = np.random.default_rng(seed)
    tensors = []
    for name, shape in gpt2_tensors(TINY["n_layer"], TINY["d_model"], TINY["vocab"],
                                    TINY["context"]):
        v = rng.normal(0.0, 0.05, shape).astype(np.float32)
        v += np.where(v >= 0, 1e-3, -1e-3).astype(np.float32)
        if "ln_" in name and name.endswith("weight"):
            v += 1.0
        tensors.append(("transformer." + name, v))
    return tensors


def start_shard(name, *flags, index=0, count=1):
    port_file = os.path.join(scratch, name + ".port")
    log = open(os.path.join(scratch, name + ".log"), "w")
    p = subprocess.Popen([os.path.join(BIN, "spotps-ps"), "--listen=127.0.0.1:0",
                          "--port_file=" + port_file, f"--shard_index={index}",
                          f"--num_shards={count}", *flags], stdout=log, stderr=subprocess.STDOUT)
    children.append(p)
    for _ in range(600):
        if os.path.exists(port_file):
            return "127.0.0.1:" + open(port_file).read().strip()
        if p.poll() is not None:
            fail(f"{name} exited {p.returncode}: {open(log.name).read()}")
        time.sleep(0.1)
    fail(f"{name} wrote no port file")


def run(binary, *args, expect=0):
    r = subprocess.run([os.path.join(BIN, binary), *args], capture_output=True, text=True,
                       timeout=300)
    if r.returncode != expect:
        fail(f"{binary} {' '.join(args)} exited {r.returncode}, want {expect}:\n"
             f"{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


def torch_gpt2_logits(w, tokens, n_head):
    """GPT-2 (transformers' GPT2LMHeadModel) in plain torch, FP32."""
    w = {k.removeprefix("transformer."): torch.from_numpy(v) for k, v in w.items()}
    x = w["wte.weight"][tokens] + w["wpe.weight"][: len(tokens)]
    t, c = x.shape
    hs = c // n_head
    mask = torch.ones(t, t, dtype=torch.bool).triu(1)
    for i in range(TINY["n_layer"]):
        p = lambda n: w[f"h.{i}.{n}"]  # noqa: E731
        h = F.layer_norm(x, (c,), p("ln_1.weight"), p("ln_1.bias"), eps=1e-5)
        q, k, v = (h @ p("attn.c_attn.weight") + p("attn.c_attn.bias")).split(c, dim=-1)
        q, k, v = (z.view(t, n_head, hs).transpose(0, 1) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / hs ** 0.5
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(0, 1).reshape(t, c)
        x = x + y @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
        h = F.layer_norm(x, (c,), p("ln_2.weight"), p("ln_2.bias"), eps=1e-5)
        m = F.gelu(h @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias"), approximate="tanh")
        x = x + m @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias")
    x = F.layer_norm(x, (c,), w["ln_f.weight"], w["ln_f.bias"], eps=1e-5)
    return (x @ w["wte.weight"].T).numpy()


def bf16(values):
    bits = values.astype("<f4").view("<u4").astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint32)
    return (rounded << 16).view(np.float32)


def main():
    original = pretrained(seed=5)
    source = os.path.join(scratch, "pretrained.safetensors")
    write_file(source, original, {"format": "pt"})
    expected = dict(original)

    # 1. Import into a fresh shard, export again.
    shard_a = start_shard("shard-a", "--optimizer=sgd", "--lr=0.05")
    out = run("spotps-ctl", "--ps=" + shard_a, "import", "--in=" + source)
    print(out.strip())
    exported = os.path.join(scratch, "exported.safetensors")
    run("spotps-ctl", "--ps=" + shard_a, "export", "--out=" + exported)
    got, metadata = read_file(exported)
    if set(got) != set(expected):
        fail(f"export names differ: {sorted(set(got) ^ set(expected))[:4]}")
    for name, v in expected.items():
        if got[name].shape != v.shape or got[name].tobytes() != v.tobytes():
            fail(f"{name}: import -> export is not bit-exact")
    for key in ("spotps.global_step", "spotps.versions", "spotps.layout",
                "spotps.layout_fingerprint"):
        if key not in metadata:
            fail(f"export metadata lacks {key}: {metadata}")
    if not metadata["spotps.layout"].startswith("wte.weight[256,128];wpe.weight[128,128];"
                                                "blocks.0.ln_1.weight[128]"):
        fail("spotps.layout: " + metadata["spotps.layout"][:80])
    print(f"ok: import -> export bit-exact ({len(got)} tensors), metadata step="
          f"{metadata['spotps.global_step']}")
    exported_bf16 = os.path.join(scratch, "exported-bf16.safetensors")
    run("spotps-ctl", "--ps=" + shard_a, "export", "--out=" + exported_bf16, "--dtype=bf16")
    got16, _ = read_file(exported_bf16)
    for name, v in expected.items():
        if got16[name].tobytes() != bf16(v).tobytes():
            fail(f"{name}: BF16 export is not FP32 rounded to nearest even")
    print(f"ok: BF16 export ({os.path.getsize(exported_bf16)} bytes, FP32 "
          f"{os.path.getsize(exported)})")

    # Refused: a second import, and broken files; the weights stay.
    out = run("spotps-ctl", "--ps=" + shard_a, "import", "--in=" + source, expect=1)
    if "already hold" not in out:
        fail("second import: " + out)
    data = open(source, "rb").read()
    broken = {
        "truncated": (data[:-100], "outside the data section"),
        "header length beyond the file": (struct.pack("<Q", 1 << 20) + data[8:4096],
                                          "truncated: header length"),
        "huge header": (struct.pack("<Q", 1 << 62) + data[8:], "exceeds the limit"),
    }
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    first, second = list(header)[:2]
    header[second]["data_offsets"][0] -= 4
    header[second]["data_offsets"][1] -= 4
    text = json.dumps(header).encode()
    broken["overlapping offsets"] = (struct.pack("<Q", len(text)) + text + data[8 + n:],
                                     f"tensors '{first}' and '{second}' overlap")
    for what, (content, message) in broken.items():
        path = os.path.join(scratch, "broken.safetensors")
        open(path, "wb").write(content)
        shard = start_shard("shard-broken-" + what.replace(" ", "-"))
        out = run("spotps-ctl", "--ps=" + shard, "import", "--in=" + path, expect=1)
        if message not in out:
            fail(f"{what}: want '{message}' in: {out}")
        out = run("spotps-ctl", "--ps=" + shard, "export", "--out=" + path + ".x", expect=1)
        print(f"ok: {what} refused: {message}")
    run("spotps-ctl", "--ps=" + shard_a, "export", "--out=" + exported)
    if read_file(exported)[0]["transformer.wte.weight"].tobytes() != \
            expected["transformer.wte.weight"].tobytes():
        fail("a refused import changed the weights")

    # A shard that restarted empty beside one that holds the model: the
    # import fills it, and says it reached 1 of 2 shards.
    first = start_shard("pair-0", index=0, count=2)
    second = start_shard("pair-1", index=1, count=2)
    run("spotps-ctl", f"--ps={first},{second}", "import", "--in=" + source)
    children[-1].kill()
    children[-1].wait()
    second = start_shard("pair-1-restarted", index=1, count=2)
    out = run("spotps-ctl", f"--ps={first},{second}", "import", "--in=" + source, expect=1)
    if "imported into 1 of 2 shards" not in out:
        fail("partial import: " + out)
    pair = os.path.join(scratch, "pair.safetensors")
    run("spotps-ctl", f"--ps={first},{second}", "export", "--out=" + pair)
    if any(read_file(pair)[0][n].tobytes() != v.tobytes() for n, v in expected.items()):
        fail("after the partial import the pair does not hold the file's weights")
    print("ok: a partial import is refused and names its shards")

    # 2. The trainer starts from the file.
    corpus = os.path.join(scratch, "corpus.txt")
    open(corpus, "w").write("In the beginning was the word, and the word was tested. " * 400)
    tokens = os.path.join(scratch, "corpus.tokens")
    run("spotps-tokenize", "--input=" + corpus, "--output=" + tokens)
    trainer_flags = ["--model=tiny", "--data=" + tokens, "--batch=2", "--seq_len=32",
                     "--threads=2", "--eval_batches=0", "--log_every=1"]
    shard_b = start_shard("shard-b", "--optimizer=sgd", "--lr=1e-30")
    run("spotps-trainer", "--ps=" + shard_b, "--steps=2", "--init_from=" + source,
        *trainer_flags)
    run("spotps-ctl", "--ps=" + shard_b, "export", "--out=" + exported)
    got, metadata = read_file(exported)
    if int(metadata["spotps.global_step"]) < 2:
        fail("the trainer pushed nothing: step " + metadata["spotps.global_step"])
    for name, v in expected.items():
        if got[name].tobytes() != v.tobytes():
            fail(f"{name}: spotps-trainer --init_from did not start from the file")
    print("ok: spotps-trainer --init_from started from the file's weights")

    # 3. Train shard A a little; its export in PyTorch vs spotps-generate.
    run("spotps-trainer", "--ps=" + shard_a, "--steps=3", *trainer_flags)
    run("spotps-ctl", "--ps=" + shard_a, "export", "--out=" + exported)
    weights, metadata = read_file(exported)
    changed = np.abs(weights["transformer.h.0.attn.c_attn.weight"] -
                     expected["transformer.h.0.attn.c_attn.weight"]).max()
    if not changed > 0:
        fail("training changed nothing")
    reference = torch_gpt2_logits(weights, TOKENS, TINY["n_head"])
    figures = []
    for dtype, tolerance in (("fp32", 1e-4), ("bf16", 0.1)):
        path = os.path.join(scratch, f"logits-{dtype}.json")
        run("spotps-generate", "--ps=" + shard_a, "--model=tiny", "--dtype=" + dtype,
            "--threads=2", "--logits_out=" + path,
            "--logits_tokens=" + ",".join(map(str, TOKENS)))
        spotps = np.array(json.load(open(path))["logits"], dtype=np.float32)
        if spotps.shape != reference.shape:
            fail(f"logits shape {spotps.shape}, torch {reference.shape}")
        diff = np.abs(spotps - reference)
        max_abs = float(diff.max())
        scale = float(np.abs(reference).max())
        max_rel = max_abs / scale  # Relative to the largest logit.
        print(f"{dtype}: max_abs={max_abs:.3g} max_rel={max_rel:.3g} (logits up to {scale:.3g}, "
              f"argmax agree {np.mean(spotps.argmax(1) == reference.argmax(1)):.0%})")
        if max_abs > tolerance * max(scale, 1.0):
            fail(f"{dtype} logits differ from PyTorch's by {max_abs}")
        figures.append(f"{dtype} max_abs={max_abs:.3g} max_rel={max_rel:.3g}")
    print("logits: " + " ".join(figures), flush=True)


try:
    main()
finally:
    for p in children:
        p.terminate()
    for p in children:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
    shutil.rmtree(scratch, ignore_errors=True)
