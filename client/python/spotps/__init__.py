"""spotps: the Python client of the spotps parameter server.

    import spotps
    cluster = spotps.Cluster("127.0.0.1:7000,127.0.0.1:7001")
    cluster.wait_for_layout()
    snap = cluster.pull("bf16")
    ...

The wire protocol's stubs (spotps.v1) are generated at build time by protoc
into the build tree (build/python), next to a copy of this package.
"""

from spotps.cluster import (NO_VERSION, Cluster, InitOutcome, PushResult, Snapshot,
                            SpotpsError, TensorSpec)
from spotps.codec import BF16, FP32
from spotps.security import ChannelSecurity
from spotps.subscription import WeightSubscription

__all__ = [
    "BF16", "FP32", "ChannelSecurity", "NO_VERSION", "Cluster", "InitOutcome", "PushResult",
    "Snapshot", "SpotpsError", "TensorSpec", "WeightSubscription",
]
