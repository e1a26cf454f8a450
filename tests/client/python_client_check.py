#!/usr/bin/python3
"""The Python client against live shards that the C++ side initialised
(tests/client/python_client_test.cc starts them and checks afterwards).

Checks: the layout; pulls (FP32, BF16, conditional, numpy and torch) equal
the values C++ set; stats; a watch that sees the push this script makes;
a retried push id is a duplicate; a checkpoint-round watch sees exactly the
checkpoint it asks shard 0's coordinator for. Exits 0 when all held, 1 otherwise.

Usage: python_client_check.py --ps=HOST:PORT,... --lr=LR
"""

import argparse
import sys
import time

import grpc

import numpy as np
import torch

import spotps
from spotps.v1 import coordinator_pb2, coordinator_pb2_grpc

# The model python_client_test.cc initialises, and its values.
LAYOUT = [("embed", (300, 700)), ("w", (129, 33)), ("b", (9,))]
PUSHED = ("embed", "b")  # The tensors this script pushes a gradient for.


def initial(flat_index):
    return (flat_index % 64).astype(np.float32) * np.float32(0.125)


def pattern(flat_index):
    return (flat_index % 5 - 2).astype(np.float32)


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ps", required=True)
    parser.add_argument("--lr", type=float, required=True)
    args = parser.parse_args()

    cluster = spotps.Cluster(args.ps, deadline_s=30, attempts=4)
    cluster.wait_for_layout(timeout_s=30)
    check([(t.name, t.shape) for t in cluster.layout] == LAYOUT,
          f"layout {cluster.layout} is not {LAYOUT}")
    n = cluster.total_elements
    flat_index = np.arange(n, dtype=np.int64)
    w0 = initial(flat_index)

    fp32 = cluster.pull("fp32")
    check(np.array_equal(fp32.flat, w0), "an FP32 pull differs from the values C++ set")
    check(all(v == 0 for v in fp32.versions), f"fresh versions are {fp32.versions}")
    bf16 = cluster.pull(spotps.BF16)  # Multiples of 1/8 below 8 are exact in BF16.
    check(np.array_equal(bf16.flat, w0), "a BF16 pull differs from the values C++ set")
    again = cluster.pull("fp32", fp32)
    check(again.partitions_received == 0 and again.bytes_received == 0,
          "a conditional pull of unchanged weights transferred data")
    arrays = fp32.arrays()
    tensors = fp32.torch()
    for name, shape in LAYOUT:
        check(arrays[name].shape == shape, f"{name} has shape {arrays[name].shape}")
        check(isinstance(tensors[name], torch.Tensor) and tuple(tensors[name].shape) == shape,
              f"torch {name} is not a tensor of shape {shape}")
    first = cluster.layout[0]
    check(torch.equal(tensors["embed"].reshape(-1), torch.from_numpy(w0[:first.num_elements])),
          "torch view differs")

    stats = cluster.stats()
    check(len(stats) == 2 and all(s.initialized for s in stats), "stats of 2 initialised shards")
    check(sum(s.pushes_applied for s in stats) == 0, "pushes before this script's")

    seen = []
    with cluster.watch(callback=lambda snap: seen.append(list(snap.versions)),
                       min_interval_ms=10) as sub:
        check(sub.wait_for_published(0, 10), f"no first snapshot: {sub.last_error}")
        check(np.array_equal(sub.latest().flat, w0), "the first watched snapshot is not w0")

        # Half the gradient as numpy, half as a torch tensor.
        specs = {t.name: t for t in cluster.layout}
        grads = {}
        for name in PUSHED:
            s = specs[name]
            g = pattern(flat_index[s.flat_offset:s.flat_offset + s.num_elements]).reshape(s.shape)
            grads[name] = torch.from_numpy(g) if name == "b" else g
        push_id = cluster.new_push_id()
        result = cluster.push(grads, fp32.versions, "bf16", push_id=push_id)
        check(not result.duplicate and not result.deferred, "the push was not applied")
        check(result.bytes_sent == sum(specs[k].num_elements for k in PUSHED) * 2,
              f"bytes_sent {result.bytes_sent}")

        check(sub.wait_for_published(1, 10), f"the watch saw no change: {sub.last_error}")
        want = w0.copy()
        for name in PUSHED:
            s = specs[name]
            sl = slice(s.flat_offset, s.flat_offset + s.num_elements)
            want[sl] = w0[sl] - np.float32(args.lr) * pattern(flat_index[sl])
        # Any-consistency snapshots may show one shard's half of the push
        # before the other's: the watch must reach the whole of it.
        deadline = time.monotonic() + 10
        while not np.array_equal(sub.latest().flat, want) and time.monotonic() < deadline:
            time.sleep(0.02)
        check(np.array_equal(sub.latest().flat, want), "the watched snapshot is not w0 - lr * g")

        retried = cluster.push(grads, fp32.versions, "bf16", push_id=push_id)
        check(retried.duplicate, "a retried push id was applied twice")
    check(len(seen) >= 2 and seen[0] != seen[-1], f"watch callbacks saw versions {seen}")
    check(np.array_equal(cluster.pull("fp32").flat, want), "the duplicate changed the weights")

    # A checkpoint-round watch publishes the weights of a checkpoint round,
    # and nothing before there is one.
    with cluster.watch(min_interval_ms=10, consistency="checkpoint_round") as sub:
        time.sleep(0.5)
        check(sub.published == 0, "a checkpoint-round watch published before any checkpoint")
        with grpc.insecure_channel(cluster.addresses[0]) as channel:
            reply = coordinator_pb2_grpc.CoordinatorStub(channel).CheckpointNow(
                coordinator_pb2.CheckpointNowRequest(), timeout=30)
        check(sub.wait_for_published(0, 10), f"no checkpoint round seen: {sub.last_error}")
        check(sub.published_checkpoint_id == reply.checkpoint_id,
              f"published checkpoint {sub.published_checkpoint_id}, wrote {reply.checkpoint_id}")
        check(np.array_equal(sub.latest().flat, want), "the checkpoint round's weights differ")

    try:
        cluster.push({"nope": np.zeros(3, np.float32)}, fp32.versions)
        check(False, "a push to an unknown tensor was accepted")
    except spotps.SpotpsError as e:
        check(e.code.name == "NOT_FOUND", f"unknown tensor gave {e.code}")
    cluster.close()
    print("python client check: OK")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        print(f"python client check FAILED: {e}", file=sys.stderr)
        sys.exit(1)
