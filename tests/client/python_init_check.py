#!/usr/bin/python3
"""The Python client's init against fresh shards (python_client_test.cc
starts them and checks the values from C++ afterwards).

Checks: init applies on fresh shards and the layout and partitions become
known (init itself compares its partition map with the shards'); a pull
returns the values; a second init of the same layout is applied nowhere
and changes nothing; another model is refused with FAILED_PRECONDITION; bad
tensors are refused before anything is sent. With --after_restart (the
test restarted one shard empty) init is kept on that shard alone, and the
outcome says so. Exits 0 when all held.

Usage: python_init_check.py --ps=HOST:PORT,... [--after_restart]
"""

import argparse
import sys

import grpc
import numpy as np
import torch

import spotps

LAYOUT = [("embed", (1500, 1100)), ("w", (129, 33)), ("b", (9,))]


def initial(flat_index):
    return (flat_index % 64).astype(np.float32) * np.float32(0.125)


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def expect_error(fn, exception, what):
    try:
        fn()
    except exception as e:
        return e
    raise AssertionError(f"{what}: no {exception.__name__}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ps", required=True)
    parser.add_argument("--after_restart", action="store_true")
    args = parser.parse_args()
    cluster = spotps.Cluster(args.ps, deadline_s=30, attempts=4)

    n = sum(int(np.prod(shape)) for _, shape in LAYOUT)
    w0 = initial(np.arange(n, dtype=np.int64))
    tensors, offset = [], 0
    for i, (name, shape) in enumerate(LAYOUT):
        size = int(np.prod(shape))
        values = w0[offset:offset + size].reshape(shape)
        # numpy for some tensors, torch for others: init takes both.
        tensors.append((name, torch.from_numpy(values.copy()) if i == 1 else values))
        offset += size

    if args.after_restart:
        split = cluster.init(tensors)
        check(split.shards == 3 and split.shards_applied == 1, f"after a restart: {split}")
        check(not split.everywhere and not split.nowhere, f"after a restart: {split}")
        check(np.array_equal(cluster.pull("fp32").flat, w0), "the split init's weights differ")
        print("python init after a restart: all checks passed")
        cluster.close()
        return 0

    expect_error(lambda: cluster.init([("a", np.zeros((2, 0)))]), ValueError, "empty dim")
    expect_error(lambda: cluster.init([("a", np.full(3, np.nan))]), ValueError, "NaN")
    expect_error(lambda: cluster.init([("a", np.zeros(3)), ("a", np.zeros(2))]), ValueError,
                 "repeated name")
    check(cluster.layout is None, "a refused init made the layout known")

    first = cluster.init(tensors)
    check(first.everywhere and first.shards == 3 and first.shards_applied == 3,
          f"the first init was not applied everywhere: {first}")
    check([(t.name, t.shape) for t in cluster.layout] == LAYOUT, f"layout {cluster.layout}")
    check(len(cluster.partitions) > 3, f"only {len(cluster.partitions)} partitions")
    check({p.shard for p in cluster.partitions} == {0, 1, 2}, "a shard holds no partition")
    pulled = cluster.pull("fp32")
    check(np.array_equal(pulled.flat, w0), "a pull differs from the values init set")

    again = [(name, np.zeros(shape, dtype=np.float32)) for name, shape in LAYOUT]
    second = cluster.init(again)
    check(second.nowhere and second.shards == 3 and not second.everywhere,
          f"a second init of the same layout was applied: {second}")
    check(np.array_equal(cluster.pull("fp32").flat, w0), "a second init changed the weights")

    e = expect_error(lambda: cluster.init([("other", np.zeros((4, 4), dtype=np.float32))]),
                     spotps.SpotpsError, "another model")
    check(e.code == grpc.StatusCode.FAILED_PRECONDITION, f"another model: {e}")
    print("python init: all checks passed")
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
