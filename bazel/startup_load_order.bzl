"""The start-up load order of cmake/StartupLoadOrder.cmake, for Bazel.

startup_load_order(name) makes a repository whose linkopts.bzl defines
STARTUP_LINKOPTS: the link options that put the C/C++ runtime and LibTorch's
costliest dependencies first in an executable's load order (the libraries and
why come from cmake/startup_heavy_libraries.sh, shared with CMake). If the
script fails the list is empty and the default order stays, as in CMake.
"""

def _startup_load_order_impl(ctx):
    script = ctx.path(Label("@//:cmake/startup_heavy_libraries.sh"))
    torch_cpu = ctx.execute(["c++", "-print-file-name=libtorch_cpu.so"]).stdout.strip()
    result = ctx.execute(["sh", str(script), torch_cpu, str(ctx.attr.count)])
    linkopts = []
    if result.return_code != 0:
        print("startup_heavy_libraries.sh failed (%d); default load order" % result.return_code)
    else:
        libraries = [l for l in result.stdout.splitlines() if l]
        if libraries:
            linkopts = ["-Wl,--push-state,--no-as-needed"] + libraries + ["-Wl,--pop-state"]
    ctx.file("BUILD", "")
    ctx.file("linkopts.bzl", "STARTUP_LINKOPTS = %r\n" % linkopts)

startup_load_order = repository_rule(
    implementation = _startup_load_order_impl,
    attrs = {"count": attr.int(default = 8)},
    local = True,
)
