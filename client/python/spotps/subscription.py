"""WeightSubscription: keeps a serving replica's weights fresh (as
client/weight_subscription.h in C++).

Each shard's Watch stream reports when its partitions change; one thread
then pulls only the changed partitions, at most once per min_interval_ms,
and publishes an immutable Snapshot copy. Changes quicker than the interval
fold into one snapshot. With consistency="sync_round" a snapshot is
published only when every partition of every shard has the same version:
in --consistency=sync, exactly the weights after one whole round. With
"checkpoint_round", only the weights of a checkpoint round: every shard's
newest checkpoint has the same id and the pull read every partition at its
version in it (a round the weights moved on from is skipped).
"""

import random
import threading
import time

import grpc

from spotps import codec
from spotps.cluster import NO_VERSION
from spotps.v1 import parameter_server_pb2 as pb


class WeightSubscription:
    """Owns a Watch stream per shard, the pulling thread and the newest snapshot.

    `callback(snapshot)` runs on the pulling thread, one call at a time.
    Errors are retried with backoff until stop(); last_error says what
    went wrong. Use as a context manager or call stop().
    """

    def __init__(self, cluster, callback=None, min_interval_ms=100, consistency="any",
                 dtype="fp32", stream_duration_s=60.0, initial_backoff_s=0.05,
                 max_backoff_s=2.0):
        cluster._require_layout("watch")
        if consistency not in ("any", "sync_round", "checkpoint_round"):
            raise ValueError("consistency must be 'any', 'sync_round' or 'checkpoint_round'")
        if min_interval_ms < 0 or stream_duration_s < 0.01:
            raise ValueError("min_interval_ms must be >= 0 and stream_duration_s >= 0.01")
        self._cluster = cluster
        self._callback = callback
        self._min_interval_s = min_interval_ms / 1000.0
        self._consistency = consistency
        self._dtype = codec.wire_dtype(dtype)
        self._stream_duration_s = stream_duration_s
        self._initial_backoff_s = initial_backoff_s
        self._max_backoff_s = max_backoff_s
        self._cond = threading.Condition()
        self._stopping = False
        self._watched = [NO_VERSION] * len(cluster.partitions)
        self._generation = 0
        # Each shard's newest checkpoint id and the partitions' versions in it.
        self._checkpoint_ids = [0] * cluster.num_shards
        self._checkpoint_versions = [NO_VERSION] * len(cluster.partitions)
        self._published_checkpoint_id = 0
        self._latest = None
        self._published = 0
        self.last_error = None
        self._calls = {}  # shard -> the Watch call in flight, for stop().
        self._connections = [cluster._watch_stub(i) for i in range(cluster.num_shards)]
        self._threads = [threading.Thread(target=self._watch_shard, args=(i,), daemon=True)
                         for i in range(cluster.num_shards)]
        self._threads.append(threading.Thread(target=self._pull_loop, daemon=True))
        for t in self._threads:
            t.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        """Cancels the streams and joins the threads; idempotent."""
        with self._cond:
            self._stopping = True
            calls = list(self._calls.values())
            self._cond.notify_all()
        for call in calls:
            call.cancel()
        for t in self._threads:
            t.join()
        for channel, _ in self._connections:
            channel.close()

    def latest(self):
        """The newest published Snapshot, or None before the first."""
        with self._cond:
            return self._latest

    @property
    def published(self):
        with self._cond:
            return self._published

    def wait_for_published(self, count, timeout_s):
        """Waits until more than `count` snapshots were published; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._published > count, timeout_s)

    # ------------------------------------------------------------- threads

    def _sleep_unless_stopped(self, seconds):
        with self._cond:
            self._cond.wait_for(lambda: self._stopping, max(0.0, seconds))
            return not self._stopping

    @property
    def published_checkpoint_id(self):
        """checkpoint_round: the checkpoint id of the newest published snapshot."""
        with self._cond:
            return self._published_checkpoint_id

    def _common_checkpoint(self):
        """(id, versions) of the checkpoint every shard reported last; (0, None) if none."""
        ids = self._checkpoint_ids
        if ids[0] == 0 or any(i != ids[0] for i in ids):
            return 0, None
        return ids[0], list(self._checkpoint_versions)

    def _publishable(self, versions, checkpoint):
        if self._consistency == "any":
            return True
        if self._consistency == "sync_round":
            return versions[0] != NO_VERSION and all(v == versions[0] for v in versions)
        checkpoint_id, checkpoint_versions = checkpoint
        return (checkpoint_id != 0 and versions == checkpoint_versions
                and NO_VERSION not in versions)

    def _watch_shard(self, shard):
        _, stub = self._connections[shard]
        backoff = self._initial_backoff_s
        request = pb.WatchRequest(max_duration_ms=int(self._stream_duration_s * 1000))
        while True:
            with self._cond:
                if self._stopping:
                    return
                # The shard ends the stream after max_duration_ms; the
                # deadline only catches one that does not.
                call = stub.Watch(request, timeout=self._stream_duration_s + 10)
                self._calls[shard] = call
            try:
                for response in call:
                    with self._cond:
                        with_checkpoint = (len(response.checkpoint_versions)
                                           == len(response.partitions))
                        self._checkpoint_ids[shard] = (response.last_checkpoint_id
                                                       if with_checkpoint else 0)
                        for k, p in enumerate(response.partitions):
                            if p.partition_id < len(self._watched):
                                self._watched[p.partition_id] = p.version
                                self._checkpoint_versions[p.partition_id] = (
                                    response.checkpoint_versions[k] if with_checkpoint
                                    else NO_VERSION)
                        self._generation += 1
                        self._cond.notify_all()
                    backoff = self._initial_backoff_s
                continue  # The stream ran its course: open the next.
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.CANCELLED or not self._stopping:
                    self.last_error = f"shard {shard} Watch: {e.code().name}: {e.details()}"
            finally:
                with self._cond:
                    self._calls.pop(shard, None)
            if not self._sleep_unless_stopped(backoff * random.uniform(0.5, 1.0)):
                return
            backoff = min(backoff * 2, self._max_backoff_s)

    def _pull_loop(self):
        working = None
        published_versions = None
        seen = 0
        last_pull = float("-inf")
        backoff = self._initial_backoff_s
        retry = False
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: self._stopping or self._generation != seen or retry)
                if self._stopping:
                    return
                seen = self._generation
                watched = list(self._watched)
                checkpoint = (0, None)
                if self._consistency == "checkpoint_round":
                    checkpoint = self._common_checkpoint()
                    if checkpoint[0] == self._published_checkpoint_id:
                        checkpoint = (0, None)  # Published already.
            have = working.versions if working is not None else None
            # A new checkpoint of unchanged weights is published without new data.
            unchanged = watched == have and checkpoint[0] == 0
            if not retry and (unchanged or not self._publishable(watched, checkpoint)):
                continue
            if not self._sleep_unless_stopped(last_pull + self._min_interval_s - time.monotonic()):
                return
            last_pull = time.monotonic()
            try:
                working = self._cluster.pull(self._dtype, working)
            except Exception as e:  # SpotpsError, or a shard gone mid-stream.
                self.last_error = f"pull: {e}"
                if not self._sleep_unless_stopped(backoff * random.uniform(0.5, 1.0)):
                    return
                backoff = min(backoff * 2, self._max_backoff_s)
                retry = True
                continue
            retry = False
            backoff = self._initial_backoff_s
            if not self._publishable(working.versions, checkpoint):
                continue
            if working.versions == published_versions and checkpoint[0] == 0:
                continue
            published_versions = list(working.versions)
            snapshot = working.copy()
            with self._cond:
                self._latest = snapshot
                self._published += 1
                self._published_checkpoint_id = checkpoint[0]
                self._cond.notify_all()
            if self._callback is not None:
                self._callback(snapshot)
