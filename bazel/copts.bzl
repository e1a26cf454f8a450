"""Compile options the CMake build gives whole groups of targets."""

# CMake's OpenMP::OpenMP_CXX is a PUBLIC dependency of spotps_common, so every
# target above common compiles with -fopenmp (LibTorch's parallel_for templates
# and tensor_codec.cc use it); Bazel does not pass copts on to dependents.
OPENMP_COPTS = ["-fopenmp"]
