#!/bin/sh
# Usage: startup_heavy_libraries.sh LIBRARY COUNT
#
# Prints, one path per line, the C and C++ runtime libraries in LIBRARY's
# dependency closure, then the COUNT other libraries there whose start-up
# symbol lookups cost the most, most relocations first: the order in which
# cmake/StartupLoadOrder.cmake links them.
#
# Why: the dynamic loader resolves each symbol relocation by walking the
# global scope in load order until a library defines the symbol. Debian's
# LibTorch pulls in ~340 libraries (OpenCV, GDAL, Qt, FFmpeg, ...); C++
# libraries deep in that order resolve thousands of their own symbols by
# walking ~200-300 libraries each, which is ~40% of a trainer's start-up.
# Linking the costliest ones early (cmake/StartupLoadOrder.cmake) shortens
# those walks. Cost of a library = its start-up relocations (GLOB_DAT and
# absolute 64-bit ones; PLT slots bind lazily) x its position in `ldd`'s
# load order. The C and C++ runtimes come first so that they keep defining
# the symbols they define in the default order too.
set -eu
library=$1
count=$2
closure=$(ldd "$library" | awk '$2 == "=>" && $3 ~ /^\// {print $3}')
set -f  # The patterns below are for `case`, not for the shell to expand.
runtimes='libstdc++.so.* libm.so.* libgcc_s.so.* libc.so.*'
is_runtime() {
  for pattern in $runtimes; do
    case "${1##*/}" in $pattern) return 0 ;; esac
  done
  return 1
}
for pattern in $runtimes; do
  for lib in $closure; do
    case "${lib##*/}" in $pattern) echo "$lib" ;; esac
  done
done
position=0
echo "$closure" | while read -r lib; do
  position=$((position + 1))
  if is_runtime "$lib"; then continue; fi
  relocations=$(readelf -rW "$lib" 2>/dev/null | grep -cE '_GLOB_DAT |_64 |_ABS64 ' || true)
  echo "$((relocations * position)) $relocations $lib"
done | sort -rn | head -n "$count" | sort -k2,2rn | awk '{print $3}'
