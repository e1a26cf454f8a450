"""The Python client under mutual TLS with role tokens (run by python_client_test.cc).

The shard serves TLS, requires client certificates and maps bearer tokens
to roles. Checks: a reader pulls but may not push (PERMISSION_DENIED), a
trainer pushes, a caller without a token is UNAUTHENTICATED, a plaintext
client gets nowhere, and a client without a certificate is refused.
Exits 0 when every check holds, 1 with the first that fails.
"""

import argparse
import sys

import grpc
import numpy as np

import spotps


def check(condition, message):
    if not condition:
        print(f"python security check FAILED: {message}", flush=True)
        sys.exit(1)


def expect_refused(call, code, what):
    try:
        call()
    except spotps.SpotpsError as e:
        check(e.code == code, f"{what}: {e.code.name} ({e.message}), wanted {code.name}")
        print(f"ok: {what}: {e.code.name}", flush=True)
        return
    check(False, f"{what} was not refused")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ps", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--reader_token", required=True)
    parser.add_argument("--trainer_token", required=True)
    args = parser.parse_args()

    def connect(security, attempts=3):
        return spotps.Cluster(args.ps, deadline_s=5.0, attempts=attempts, security=security)

    def mtls(token_file):
        return spotps.ChannelSecurity.from_files(args.ca, args.cert, args.key, token_file)

    reader = connect(mtls(args.reader_token))
    reader.wait_for_layout(timeout_s=30)
    snapshot = reader.pull("fp32")
    check(snapshot.flat.size == reader.total_elements and reader.total_elements > 0,
          "a reader's pull returned no weights")
    print(f"ok: reader pulled {snapshot.flat.size} weights over mTLS", flush=True)
    gradient = np.ones(reader.total_elements, dtype=np.float32)
    expect_refused(lambda: reader.push(gradient, snapshot.versions, "fp32"),
                   grpc.StatusCode.PERMISSION_DENIED, "a reader's push")

    trainer = connect(mtls(args.trainer_token))
    trainer.wait_for_layout(timeout_s=30)
    result = trainer.push(gradient, snapshot.versions, "fp32")
    check(not result.duplicate and result.global_step == 1,
          f"a trainer's push was not applied (step {result.global_step})")
    after = trainer.pull("fp32")
    check(not np.array_equal(after.flat, snapshot.flat), "the trainer's push changed nothing")
    print("ok: trainer pushed over mTLS", flush=True)

    anonymous = connect(mtls(None), attempts=1)
    expect_refused(anonymous.stats, grpc.StatusCode.UNAUTHENTICATED, "a call without a token")
    plaintext = connect(spotps.ChannelSecurity(token="x" * 16), attempts=1)
    expect_refused(plaintext.stats, grpc.StatusCode.UNAVAILABLE, "a plaintext client")
    with open(args.ca, "rb") as f:
        no_certificate = connect(spotps.ChannelSecurity(ca_pem=f.read(), token="x" * 16),
                                 attempts=1)
    expect_refused(no_certificate.stats, grpc.StatusCode.UNAVAILABLE,
                   "a client without a certificate")
    print("python security check passed", flush=True)


if __name__ == "__main__":
    main()
