#!/usr/bin/python3
"""Fine-tunes a model that lives on spotps shards, from Python.

The shards hold a linear head, tensors "head.weight" [classes, features] and
"head.bias" [classes] (initialised by a C++ trainer or any spotps client).
Each step pulls the current weights into torch tensors, computes the loss of
a batch with torch autograd, and pushes the gradients; the shards apply
their optimizer. Several copies of this script can train the same head at
once (asynchronously).

    PYTHONPATH=build/python /usr/bin/python3 client/python/examples/finetune.py \
        --ps=127.0.0.1:7000,127.0.0.1:7001 --steps=200

The data is synthetic (labels from a fixed random "teacher"), so the script
runs anywhere; it exits 1 if the loss did not go down.
"""

import argparse
import sys

import torch

import spotps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ps", required=True, help="shard addresses host:port,... in order")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"],
                        help="wire type of pulls and pushes")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    cluster = spotps.Cluster(args.ps, deadline_s=30)
    cluster.wait_for_layout(timeout_s=60)
    specs = {t.name: t for t in cluster.layout}
    classes, features = specs["head.weight"].shape

    gen = torch.Generator().manual_seed(args.seed)
    teacher = torch.randn(classes, features, generator=gen)

    def batch():
        x = torch.randn(args.batch, features, generator=gen)
        return x, (x @ teacher.T).argmax(dim=1)

    snapshot = None
    losses = []
    for step in range(args.steps):
        # A conditional pull: only partitions that changed since the last.
        snapshot = cluster.pull(args.dtype, snapshot)
        weights = snapshot.torch()
        w = weights["head.weight"].clone().requires_grad_(True)
        b = weights["head.bias"].clone().requires_grad_(True)
        x, y = batch()
        loss = torch.nn.functional.cross_entropy(x @ w.T + b, y)
        loss.backward()
        cluster.push({"head.weight": w.grad, "head.bias": b.grad}, snapshot.versions, args.dtype)
        losses.append(loss.item())
        if step % 20 == 0 or step == args.steps - 1:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)

    window = max(1, min(10, len(losses) // 3))
    first = sum(losses[:window]) / window
    last = sum(losses[-window:]) / window
    step = max(s.global_step for s in cluster.stats())
    print(f"finetune: loss {first:.4f} -> {last:.4f} over {args.steps} steps "
          f"(shard global step {step})")
    cluster.close()
    return 0 if last < first else 1


if __name__ == "__main__":
    sys.exit(main())
