#!/usr/bin/python3
"""Trains a model that lives on spotps shards, from Python.

The model is a linear head, tensors "head.weight" [classes, features] and
"head.bias" [classes]. On shards that hold no model yet the script
initialises it (zeros); on shards that hold it already it goes on training
it. Each step pulls the current weights into torch tensors, computes the
loss of a batch with torch autograd, and pushes the gradients; the shards
apply their optimizer. Several copies of this script can train the same head
at once (asynchronously).

    build/bin/spotps-ps --listen=127.0.0.1:7000 --shard_index=0 --num_shards=2 --lr=0.5 &
    build/bin/spotps-ps --listen=127.0.0.1:7001 --shard_index=1 --num_shards=2 --lr=0.5 &
    PYTHONPATH=build/python /usr/bin/python3 client/python/examples/finetune.py \
        --ps=127.0.0.1:7000,127.0.0.1:7001 --steps=200

The data is synthetic (labels from a fixed random "teacher"), so the script
runs anywhere; it exits 1 if the loss did not go down, 2 if the shards hold
some other model.
"""

import argparse
import sys

import grpc
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
    parser.add_argument("--classes", type=int, default=4, help="classes of a new head")
    parser.add_argument("--features", type=int, default=16, help="input features of a new head")
    args = parser.parse_args()

    cluster = spotps.Cluster(args.ps, deadline_s=30)
    try:
        # Shards started a moment ago may not listen yet.
        cluster.wait_until_reachable(timeout_s=30)
        cluster.fetch_layout()
    except spotps.SpotpsError as e:
        if e.code != grpc.StatusCode.FAILED_PRECONDITION or "not initialised" not in str(e):
            raise
        outcome = cluster.init([
            ("head.weight", torch.zeros(args.classes, args.features)),
            ("head.bias", torch.zeros(args.classes)),
        ])
        if outcome.everywhere:
            print("initialised a new head on the shards", flush=True)
        elif outcome.nowhere:
            print("another client initialised the head moments ago", flush=True)
        else:
            print(f"initialised {outcome.shards_applied} of {outcome.shards} shards with a new "
                  "head; another client initialised the others moments ago", flush=True)
    specs = {t.name: t for t in cluster.layout}
    if set(specs) != {"head.weight", "head.bias"}:
        names = ", ".join(list(specs)[:3])
        print(f"finetune: the shards at {args.ps} hold another model ({len(specs)} tensors: "
              f"{names}, ...); start fresh shards for this example", file=sys.stderr)
        return 2
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
    try:
        sys.exit(main())
    except spotps.SpotpsError as e:
        print(f"finetune: {e}", file=sys.stderr)
        sys.exit(1)
