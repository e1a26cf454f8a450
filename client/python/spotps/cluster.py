"""Cluster: the Python face of the spotps shards, as client/cluster.h in C++.

    cluster = spotps.Cluster("10.0.0.1:7000,10.0.0.2:7000")
    cluster.wait_for_layout(timeout_s=30)
    snap = cluster.pull("bf16")                  # all shards in parallel
    weights = snap.torch()                       # name -> torch.Tensor
    ... compute gradients by name ...
    cluster.push(grads, snap.versions, "bf16")   # same protocol as C++

Every RPC has a deadline (deadline_s); UNAVAILABLE and DEADLINE_EXCEEDED are
retried at most `attempts` times with jittered exponential backoff, pushes
with the same push id (a retry of a push that landed is a duplicate, not a
second update). Errors raise SpotpsError with the gRPC code and a message
naming the shard.
"""

import bisect
import itertools
import random
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np

from spotps import codec
from spotps.security import ChannelSecurity
from spotps.v1 import parameter_server_pb2 as pb
from spotps.v1 import parameter_server_pb2_grpc as pb_grpc

# Every stream message but the last carries at least this much payload
# (parameter_server.proto's stream rules).
MIN_STREAM_MESSAGE_BYTES = 64 << 10
# The version of a partition a snapshot does not hold (as kNoVersion in C++).
NO_VERSION = (1 << 64) - 1
_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
# common/partition_map.h's constants: every client must cut the flat space
# exactly as the shards do.
_MIN_PARTITION_ELEMENTS = 1 << 14
_MAX_PARTITION_ELEMENTS = 1 << 20
_TARGET_PARTITIONS_PER_SHARD = 4
_MAX_SHARDS = 1024


def partition_map(total_elements, num_shards):
    """[Partition] by id for a flat space of `total_elements` on `num_shards`.

    The same cut as common/partition_map.cc (PartitionMap::Create): about 4
    partitions per shard within [16 Ki, 1 Mi] elements, assigned largest
    first onto the least-loaded shard (the first such on ties). The shards
    report theirs after an init, so a difference cannot go unnoticed.
    """
    if not 1 <= num_shards <= _MAX_SHARDS or total_elements <= 0:
        raise ValueError(f"cannot partition {total_elements} elements over {num_shards} shards")
    want = num_shards * _TARGET_PARTITIONS_PER_SHARD
    size = min(max(-(-total_elements // want), _MIN_PARTITION_ELEMENTS), _MAX_PARTITION_ELEMENTS)
    partitions = [Partition(i, begin, min(size, total_elements - begin), None)
                  for i, begin in enumerate(range(0, total_elements, size))]
    load = [0] * num_shards
    for p in sorted(partitions, key=lambda p: -p.num_elements):  # Stable, as C++'s.
        p.shard = min(range(num_shards), key=lambda s: load[s])
        load[p.shard] += p.num_elements
    return partitions


class SpotpsError(Exception):
    """An RPC or a request that failed; `code` is a grpc.StatusCode."""

    def __init__(self, code, message):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class TensorSpec:
    """One named tensor of the model and where it lies in the flat space."""

    def __init__(self, name, shape, flat_offset):
        self.name = name
        self.shape = tuple(int(d) for d in shape)
        self.flat_offset = flat_offset
        self.num_elements = int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    def __repr__(self):
        return f"TensorSpec({self.name!r}, {self.shape})"


class Partition:
    def __init__(self, pid, flat_begin, num_elements, shard):
        self.id = pid
        self.flat_begin = flat_begin
        self.num_elements = num_elements
        self.shard = shard


class Snapshot:
    """Weights as last pulled: the flat FP32 space and a version per partition.

    Pass it back to Cluster.pull to fetch only partitions that changed.
    """

    def __init__(self, layout, num_elements, num_partitions):
        self._layout = layout
        self.flat = np.zeros(num_elements, dtype=np.float32)
        self.versions = [NO_VERSION] * num_partitions
        self.partitions_received = 0
        self.bytes_received = 0

    def arrays(self):
        """name -> numpy array (views into `flat`, shaped as the layout says)."""
        return {
            t.name: self.flat[t.flat_offset:t.flat_offset + t.num_elements].reshape(t.shape)
            for t in self._layout
        }

    def torch(self):
        """name -> torch.Tensor sharing memory with `flat`."""
        import torch  # Only callers that want tensors need torch.

        return {name: torch.from_numpy(a) for name, a in self.arrays().items()}

    def copy(self):
        other = Snapshot(self._layout, 0, 0)
        other.flat = self.flat.copy()
        other.versions = list(self.versions)
        other.partitions_received = self.partitions_received
        other.bytes_received = self.bytes_received
        return other


class InitOutcome:
    """What init did: of `shards` shards, `shards_applied` kept this call's
    values. Two clients that race can split the shards between them."""

    def __init__(self, shards, shards_applied):
        self.shards = shards
        self.shards_applied = shards_applied

    @property
    def everywhere(self):
        return self.shards_applied == self.shards

    @property
    def nowhere(self):
        return self.shards_applied == 0

    def __repr__(self):
        return f"InitOutcome(shards={self.shards}, shards_applied={self.shards_applied})"


class PushResult:
    def __init__(self):
        self.duplicate = True  # Every shard had already applied this push id.
        self.deferred = False  # Sync mode: held for the open round.
        self.max_staleness = 0
        self.global_step = 0
        self.bytes_sent = 0


def _as_float32(values):
    """A contiguous flat float32 numpy array of a numpy array, torch tensor or list."""
    if hasattr(values, "detach"):  # torch.Tensor
        values = values.detach().to("cpu").float().numpy()
    return np.ascontiguousarray(values, dtype=np.float32).reshape(-1)


class Cluster:
    """Connections to every shard, the model's layout and partition map.

    Thread-safe once the layout is known (pull, push and stats may run from
    several threads at once).
    """

    def __init__(self, shard_list, deadline_s=60.0, attempts=6, initial_backoff_s=0.05,
                 max_backoff_s=3.0, message_bytes=4 << 20, max_message_bytes=64 << 20,
                 security=None):
        if isinstance(shard_list, str):
            shard_list = [a.strip() for a in shard_list.split(",") if a.strip()]
        if not shard_list:
            raise ValueError("shard list is empty")
        for address in shard_list:
            if ":" not in address:
                raise ValueError(f"shard address {address!r} is not host:port")
        if attempts < 1 or deadline_s <= 0:
            raise ValueError("attempts must be >= 1 and deadline_s > 0")
        self.addresses = list(shard_list)
        self.deadline_s = deadline_s
        self.attempts = attempts
        self.initial_backoff_s = initial_backoff_s
        self.max_backoff_s = max_backoff_s
        self.message_bytes = message_bytes
        self.security = security if security is not None else ChannelSecurity()
        options = [
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
            # Reconnect quickly after a shard restarts.
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 2000),
        ]
        self._channels = [self.security.channel(a, options) for a in self.addresses]
        self._stubs = [pb_grpc.ParameterServerStub(c) for c in self._channels]
        self._pool = ThreadPoolExecutor(max_workers=max(2, len(self.addresses)))
        self._push_prefix = random.getrandbits(64)
        self._push_counter = itertools.count()
        self.layout = None  # [TensorSpec], once known.
        self.partitions = None  # [Partition] by id, once known.
        self.total_elements = 0

    def close(self):
        self._pool.shutdown(wait=True)
        for c in self._channels:
            c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def num_shards(self):
        return len(self.addresses)

    def new_push_id(self):
        """A process-unique push id: a random 64-bit prefix and a counter."""
        return f"{self._push_prefix:016x}-{next(self._push_counter)}"

    # ------------------------------------------------------------ plumbing

    def _call(self, shard, method, attempt):
        """attempt(timeout_s) until it succeeds, fails for good, or attempts run out."""
        backoff = self.initial_backoff_s
        for i in range(self.attempts):
            try:
                return attempt(self.deadline_s)
            except grpc.RpcError as e:
                if e.code() not in _RETRYABLE or i == self.attempts - 1:
                    raise SpotpsError(
                        e.code(),
                        f"shard {shard} ({self.addresses[shard]}) {method}: {e.details()}"
                    ) from None
            time.sleep(backoff * random.uniform(0.5, 1.0))
            backoff = min(backoff * 2, self.max_backoff_s)
        raise AssertionError("unreachable")

    def _each_shard(self, fn, shards=None):
        """fn(shard) for every shard in parallel; results in shard order."""
        shards = range(self.num_shards) if shards is None else shards
        futures = [self._pool.submit(fn, i) for i in shards]
        return [f.result() for f in futures]

    def _require_layout(self, method):
        if self.layout is None:
            raise SpotpsError(grpc.StatusCode.FAILED_PRECONDITION,
                              f"{method}: layout not known; call fetch_layout")

    # --------------------------------------------------------------- layout

    def fetch_layout(self):
        """Reads the layout from every shard and checks they agree.

        FAILED_PRECONDITION if the model is not initialised, the shards hold
        different models, or the list is not in shard-index order.
        """
        replies = self._each_shard(lambda i: self._call(
            i, "GetLayout", lambda t: self._stubs[i].GetLayout(pb.GetLayoutRequest(), timeout=t)))
        for i, r in enumerate(replies):
            if r.num_shards != self.num_shards or r.shard_index != i:
                raise SpotpsError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"shard list has {self.num_shards} addresses and lists {self.addresses[i]} at "
                    f"position {i}, but that server is shard {r.shard_index} of {r.num_shards}: "
                    "list the shards in shard-index order")
            if not r.initialized:
                raise SpotpsError(grpc.StatusCode.FAILED_PRECONDITION,
                                  f"model is not initialised on shard {i} ({self.addresses[i]})")
            if r.layout_fingerprint != replies[0].layout_fingerprint:
                raise SpotpsError(grpc.StatusCode.FAILED_PRECONDITION,
                                  f"shards disagree on the model: shard 0 has layout "
                                  f"{replies[0].layout_fingerprint:016x}, shard {i} has "
                                  f"{r.layout_fingerprint:016x}")
        layout, offset = [], 0
        for t in replies[0].layout.tensors:
            spec = TensorSpec(t.name, t.shape, offset)
            offset += spec.num_elements
            layout.append(spec)
        # The shards' own partition lists give the map (ids run in flat
        # order, partitions tile the flat space), so Python need not repeat
        # PartitionMap's cutting rules.
        stats = self.stats()
        owned = sorted((p.partition_id, p.num_elements, s.shard_index)
                       for s in stats for p in s.partitions)
        partitions, flat = [], 0
        for expected_id, (pid, n, shard) in enumerate(owned):
            if pid != expected_id:
                raise SpotpsError(grpc.StatusCode.FAILED_PRECONDITION,
                                  f"the shards' partitions are not 0..N-1 (found {pid} at "
                                  f"{expected_id}): a shard is missing or restarting")
            partitions.append(Partition(pid, flat, n, shard))
            flat += n
        if flat != offset:
            raise SpotpsError(grpc.StatusCode.FAILED_PRECONDITION,
                              f"the shards' partitions hold {flat} elements, the layout {offset}")
        self.layout, self.partitions, self.total_elements = layout, partitions, offset
        self._partition_starts = [p.flat_begin for p in partitions]
        self._by_name = {t.name: t for t in layout}

    def wait_until_reachable(self, timeout_s=60.0, report=print):
        """Waits until every shard answers (initialised or not), retrying
        while they are unreachable and saying every 5 s what it waits for;
        UNAVAILABLE after `timeout_s`, naming the addresses."""
        start = time.monotonic()
        next_report = start + 2
        while True:
            try:
                self.stats()
                return
            except SpotpsError as e:
                if e.code not in _RETRYABLE:
                    raise
                now = time.monotonic()
                if now - start >= timeout_s:
                    raise SpotpsError(e.code, f"gave up after {now - start:.0f} s waiting for the "
                                      f"shards at {','.join(self.addresses)} (is the job "
                                      f"running, and are the addresses right?): {e.message}") from None
                if now >= next_report and report is not None:
                    report(f"waiting for the shards at {','.join(self.addresses)} "
                           f"({now - start:.0f} s of {timeout_s:.0f} s): {e.message}")
                    next_report = now + 5
            time.sleep(0.2)

    def wait_for_layout(self, timeout_s=60.0):
        """fetch_layout, polling with backoff until the model is initialised."""
        give_up = time.monotonic() + timeout_s
        backoff = self.initial_backoff_s
        while True:
            try:
                return self.fetch_layout()
            except SpotpsError as e:
                if e.code not in (grpc.StatusCode.FAILED_PRECONDITION,) + _RETRYABLE:
                    raise
                if time.monotonic() + backoff > give_up:
                    raise
            time.sleep(backoff * random.uniform(0.5, 1.0))
            backoff = min(backoff * 2, self.max_backoff_s)

    def init(self, tensors):
        """Initialises every shard with a model: `tensors` is a list of
        (name, numpy array or torch tensor) in the model's order (a dict keeps
        its order too). The values become FP32 master weights.

        Each shard keeps the first valid init: returns an InitOutcome saying
        on how many shards these values were kept (`everywhere`, `nowhere`,
        or a split with another client that raced; on the other shards the
        other client's values of this very layout stay). A different model on
        the shards is FAILED_PRECONDITION naming both. Afterwards the layout
        is known.
        """
        items = list(tensors.items()) if isinstance(tensors, dict) else list(tensors)
        if not items:
            raise ValueError("init: no tensors")
        layout, flats, seen = pb.ModelLayout(), [], set()
        for name, values in items:
            if not name or name in seen:
                raise ValueError(f"init: tensor name {name!r} is empty or repeated")
            seen.add(name)
            shape = tuple(int(d) for d in getattr(values, "shape", ()))
            flat = _as_float32(values)
            if not shape or any(d <= 0 for d in shape) or flat.size != int(np.prod(shape)):
                raise ValueError(f"init: tensor {name!r} has shape {shape}: every dimension "
                                 "must be positive")
            if not np.all(np.isfinite(flat)):
                raise ValueError(f"init: tensor {name!r} holds NaN or Inf")
            layout.tensors.add(name=name, shape=shape, dtype=pb.DTYPE_FP32)
            flats.append(flat)
        flat = np.concatenate(flats)
        partitions = partition_map(flat.size, self.num_shards)
        init_id = self.new_push_id()  # A retry of an init that landed is told so.

        def init_shard(i):
            sources = [(p.id, 0, flat[p.flat_begin:p.flat_begin + p.num_elements], 0)
                       for p in partitions if p.shard == i]
            header = pb.InitRequest(layout=layout, num_shards=self.num_shards, shard_index=i,
                                    init_id=init_id)
            return self._call(i, "Init", lambda t: self._stubs[i].Init(
                self._chunk_messages(header, pb.DTYPE_FP32, sources), timeout=t))

        replies = self._each_shard(init_shard)
        self.fetch_layout()
        if [(p.id, p.num_elements, p.shard) for p in self.partitions] != \
                [(p.id, p.num_elements, p.shard) for p in partitions]:
            raise SpotpsError(grpc.StatusCode.INTERNAL,
                              "init: the shards cut the model differently from this client")
        return InitOutcome(len(replies), sum(1 for r in replies if r.applied))

    def partitions_of_shard(self, shard):
        return [p.id for p in self.partitions if p.shard == shard]

    def _cover(self, flat_begin, n):
        """(partition, offset, flat_begin, count) runs of the flat range."""
        runs = []
        end = flat_begin + n
        i = bisect.bisect_right(self._partition_starts, flat_begin) - 1
        while flat_begin < end:
            p = self.partitions[i]
            run_end = min(end, p.flat_begin + p.num_elements)
            runs.append((p, flat_begin - p.flat_begin, flat_begin, run_end - flat_begin))
            flat_begin = run_end
            i += 1
        return runs

    # ----------------------------------------------------------------- pull

    def pull(self, dtype="fp32", snapshot=None):
        """Pulls the whole model; with `snapshot`, only changed partitions.

        Returns the snapshot (a new one if none was given). On error, only
        partitions that arrived whole got their new version.
        """
        self._require_layout("pull")
        dtype = codec.wire_dtype(dtype)
        if snapshot is None or len(snapshot.versions) != len(self.partitions):
            snapshot = Snapshot(self.layout, self.total_elements, len(self.partitions))
        known = list(snapshot.versions)
        counters = self._each_shard(lambda i: self._pull_shard(i, dtype, known, snapshot))
        snapshot.partitions_received = sum(c[0] for c in counters)
        snapshot.bytes_received = sum(c[1] for c in counters)
        return snapshot

    def _pull_shard(self, shard, dtype, known, snapshot):
        ids = self.partitions_of_shard(shard)
        request = pb.PullRequest(dtype=dtype, partition_ids=ids,
                                 known_versions=[known[i] for i in ids])
        width = codec.bytes_per_element(dtype)
        counters = [0, 0]

        def attempt(timeout):
            received = {}
            counters[0] = counters[1] = 0
            call = self._stubs[shard].Pull(request, timeout=timeout)
            try:
                read(call, received)
            finally:
                call.cancel()  # Frees the stream after a malformed chunk; no-op when done.

        def read(call, received):
            for response in call:
                for chunk in response.chunks:
                    pid = chunk.partition_id
                    p = self.partitions[pid] if pid < len(self.partitions) else None
                    n = len(chunk.data) // width
                    if (response.dtype != dtype or p is None or p.shard != shard
                            or len(chunk.data) % width or chunk.offset + n > p.num_elements):
                        raise SpotpsError(grpc.StatusCode.INTERNAL,
                                          f"shard {shard} Pull: malformed chunk for partition "
                                          f"{pid}")
                    begin = p.flat_begin + chunk.offset
                    snapshot.flat[begin:begin + n] = codec.decode(chunk.data, dtype)
                    counters[1] += len(chunk.data)
                    received[pid] = received.get(pid, 0) + n
                    if received[pid] == p.num_elements:
                        snapshot.versions[pid] = chunk.version
                        counters[0] += 1

        self._call(shard, "Pull", attempt)
        return counters

    # ----------------------------------------------------------------- push

    def push(self, gradients, base_versions, dtype="bf16", push_id=None):
        """Pushes gradients computed from weights at `base_versions`.

        `gradients` is a dict name -> array/tensor (only those tensors are
        updated) or one flat array of the whole model. Each shard applies
        its part whole or not at all. Returns a PushResult.
        """
        self._require_layout("push")
        dtype = codec.wire_dtype(dtype)
        if len(base_versions) != len(self.partitions):
            raise SpotpsError(grpc.StatusCode.INVALID_ARGUMENT,
                              f"push: {len(base_versions)} base versions for "
                              f"{len(self.partitions)} partitions")
        if isinstance(gradients, dict):
            spans = []
            for name, values in gradients.items():
                spec = self._by_name.get(name)
                if spec is None:
                    raise SpotpsError(grpc.StatusCode.NOT_FOUND,
                                      f"model has no tensor named {name!r}")
                flat = _as_float32(values)
                if flat.size != spec.num_elements:
                    raise SpotpsError(grpc.StatusCode.INVALID_ARGUMENT,
                                      f"gradient for {name!r} has {flat.size} elements, the "
                                      f"tensor {spec.num_elements}")
                spans.append((spec.flat_offset, flat))
        else:
            flat = _as_float32(gradients)
            if flat.size != self.total_elements:
                raise SpotpsError(grpc.StatusCode.INVALID_ARGUMENT,
                                  f"push: gradient has {flat.size} elements, the model "
                                  f"{self.total_elements}")
            spans = [(0, flat)]
        if push_id is None:
            push_id = self.new_push_id()
        # Per shard: (partition id, offset, values, base version) runs.
        sources = [[] for _ in range(self.num_shards)]
        for flat_begin, values in spans:
            for p, offset, run_begin, n in self._cover(flat_begin, values.size):
                start = run_begin - flat_begin
                sources[p.shard].append((p.id, offset, values[start:start + n],
                                         base_versions[p.id]))
        shards = [i for i in range(self.num_shards) if sources[i]]
        replies = self._each_shard(
            lambda i: self._call(i, "Push", lambda t: self._stubs[i].Push(
                self._push_messages(push_id, dtype, sources[i]), timeout=t)), shards)
        result = PushResult()
        width = codec.bytes_per_element(dtype)
        deferring = 0
        for i, r in zip(shards, replies):
            deferring += 1 if r.deferred else 0
            result.duplicate = result.duplicate and r.duplicate
            result.deferred = result.deferred or r.deferred
            result.global_step = max(result.global_step, r.global_step)
            result.max_staleness = max([result.max_staleness] + list(r.staleness))
            result.bytes_sent += sum(v.size for _, _, v, _ in sources[i]) * width
        if deferring not in (0, len(shards)):
            raise SpotpsError(grpc.StatusCode.FAILED_PRECONDITION,
                              f"push: {deferring} of {len(shards)} shards run "
                              "--consistency=sync and held the gradient, the others applied it: "
                              "give every shard the same --consistency")
        return result

    def _push_messages(self, push_id, dtype, sources):
        """The push stream for one shard, as the C++ client writes it: the
        first message announces exactly the elements of each partition the
        stream carries."""
        announced = {}
        for pid, _, values, _ in sources:
            announced[pid] = announced.get(pid, 0) + values.size
        header = pb.PushRequest(push_id=push_id, dtype=dtype)
        for pid in sorted(announced):
            header.announced.add(partition_id=pid, num_elements=announced[pid])
        return self._chunk_messages(header, dtype, sources)

    def _chunk_messages(self, header, dtype, sources):
        """`header`, then (partition id, offset, values, version) runs as
        chunks: every message but the last carries exactly `per_message`
        elements (at least 64 KiB), chunks end at message and partition
        borders (parameter_server.proto's stream rules)."""
        width = codec.bytes_per_element(dtype)
        per_message = max(MIN_STREAM_MESSAGE_BYTES, self.message_bytes) // width
        msg, pending, sent_any = header, 0, False
        for pid, offset, values, version in sources:
            done = 0
            while done < values.size:
                n = min(per_message - pending, values.size - done)
                msg.chunks.add(partition_id=pid, offset=offset + done, version=version,
                               data=codec.encode(values[done:done + n], dtype))
                done += n
                pending += n
                if pending == per_message:
                    yield msg
                    msg, pending, sent_any = type(header)(), 0, True
        if pending > 0 or not sent_any:
            yield msg

    # ---------------------------------------------------------------- stats

    def stats(self):
        """Every shard's StatsResponse (protobuf messages), in shard order."""
        return self._each_shard(lambda i: self._call(
            i, "Stats", lambda t: self._stubs[i].Stats(pb.StatsRequest(), timeout=t)))

    # ---------------------------------------------------------------- watch

    def watch(self, callback=None, min_interval_ms=100, consistency="any", dtype="fp32",
              stream_duration_s=60.0):
        """Starts a WeightSubscription (see spotps.subscription)."""
        from spotps.subscription import WeightSubscription

        return WeightSubscription(self, callback=callback, min_interval_ms=min_interval_ms,
                                  consistency=consistency, dtype=dtype,
                                  stream_duration_s=stream_duration_s)

    def _watch_stub(self, shard):
        """A stub on a connection of its own, so pulls do not queue notifications."""
        channel = self.security.channel(self.addresses[shard], [
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 2000),
            ("grpc.use_local_subchannel_pool", 1),
        ])
        return channel, pb_grpc.ParameterServerStub(channel)


__all__ = ["ChannelSecurity", "Cluster", "Snapshot", "PushResult", "SpotpsError", "TensorSpec", "NO_VERSION"]
