"""spotps_test: one GoogleTest binary, as tests/CMakeLists.txt's spotps_test."""

load("//bazel:copts.bzl", "OPENMP_COPTS")

def spotps_test(
        name,
        srcs,
        deps = [],
        data = [],
        timeout = "moderate",
        tags = [],
        copts = OPENMP_COPTS,
        gtest_main = True,
        **attrs):
    """A cc_test linked statically against spotps's libraries and GoogleTest.

    Args:
      name: the test's name, the CMake executable's name.
      srcs: its sources.
      deps: the libraries it links (CMake's LIBS).
      data: the binaries it starts (CMake's DEPENDS), from //tests/support:bin/...
      timeout: Bazel's timeout class; "moderate" (300 s) covers CMake's 120 s default.
      tags: CMake's labels (unit, multiprocess, slow), plus "manual" where a test
        is left out of `bazel test //...`.
      copts: OPENMP_COPTS unless the test links nothing built with OpenMP.
      gtest_main: False when the test has its own main().
      **attrs: passed to cc_test.
    """
    gtest = ["//bazel/third_party:gtest_main" if gtest_main else "//bazel/third_party:gtest"]
    native.cc_test(
        name = name,
        srcs = srcs,
        copts = copts,
        data = data,
        linkstatic = True,
        tags = tags,
        timeout = timeout,
        deps = deps + gtest,
        **attrs
    )

def spotps_trainer_test(name, srcs, deps = [], timeout = "long", **attrs):
    """tests/trainer/CMakeLists.txt's spotps_trainer_test: trainer_<name>.

    Links the trainer's libraries and the test helpers; the long timeout
    (900 s) covers CMake's 600 s, for LibTorch's slow start on a busy machine.
    """
    spotps_test(
        name = "trainer_" + name,
        srcs = srcs,
        timeout = timeout,
        deps = deps + [
            "//tests/support:spotps_test_support",
            "//trainer/elastic:spotps_trainer_elastic",
        ],
        **attrs
    )
