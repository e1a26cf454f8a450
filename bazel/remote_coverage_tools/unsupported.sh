#!/bin/sh
echo "coverage is not supported in this offline Bazel build" >&2
exit 1
