#!/usr/bin/env python3
"""Checks that the CMake and Bazel builds list the same C++ sources.

Usage: check_build_files.py [SOURCE_DIR]

Every folder with a CMakeLists.txt must have a BUILD file next to it (and the
other way round, outside bazel/), and the two must name the same .cc files:
CMake's add_library, add_executable, spotps_test (its SOURCES) and
spotps_trainer_test (NAME.cc); Bazel's string literals naming a .cc file
(less a genrule's outs: generated files).
Exits 1 and names each file listed in one build and not the other.
"""

import ast
import io
import os
import re
import sys
import tokenize

# The folders that only Bazel uses (its stub repositories and settings).
BAZEL_ONLY = ("bazel",)
SKIP_DIRS = {".git", ".cache"}


def cmake_sources(text):
    """The .cc files a CMakeLists.txt names, from the commands that take sources."""
    text = re.sub(r"#[^\n]*", "", text)
    found = set()
    for command, args in re.findall(r"\b(\w+)\s*\(([^()]*)\)", text):
        tokens = args.split()
        if not tokens:
            continue
        command = command.lower()
        if command in ("add_library", "add_executable", "spotps_test"):
            found.update(t for t in tokens[1:] if t.endswith(".cc") and "${" not in t)
        elif command == "spotps_trainer_test":
            found.add(tokens[0] + ".cc")
    return found


def bazel_sources(text):
    """The .cc files a BUILD file names: every string literal that is a file name."""
    found = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type != tokenize.STRING:
            continue
        try:
            value = ast.literal_eval(tok.string)
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, str) and re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_./-]*\.cc", value):
            found.add(value)
    # A genrule's outputs are made at build time (CMake names them under
    # ${CMAKE_CURRENT_BINARY_DIR}, which cmake_sources skips).
    for outs in re.findall(r"\bouts\s*=\s*\[([^\]]*)\]", text):
        found -= set(re.findall(r'"([^"]+\.cc)"', outs))
    return found


def build_file(folder):
    for name in ("BUILD", "BUILD.bazel"):
        if os.path.isfile(os.path.join(folder, name)):
            return os.path.join(folder, name)
    return None


def version_mismatch(root):
    """The version --version prints: project(VERSION) in CMake, a define in Bazel."""
    with open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8") as f:
        cmake = re.search(r"project\(\s*spotps\s+VERSION\s+([0-9.]+)", f.read())
    with open(os.path.join(root, "common", "BUILD"), encoding="utf-8") as f:
        bazel = re.search(r'SPOTPS_VERSION=\\\\"([0-9.]+)\\\\"', f.read())
    if not cmake or not bazel:
        return ["cannot find the version in CMakeLists.txt and common/BUILD"]
    if cmake.group(1) != bazel.group(1):
        return [f"version {cmake.group(1)} in CMakeLists.txt, {bazel.group(1)} in common/BUILD"]
    return []


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    errors, warnings, checked = [], [], 0
    for folder, dirs, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")
                         and not (rel == "." and d in BAZEL_ONLY))
        has_cmake = "CMakeLists.txt" in files
        build = build_file(folder)
        if not has_cmake and not build:
            continue
        if has_cmake and not build:
            errors.append(f"{rel}: CMakeLists.txt has no BUILD file next to it")
            continue
        if build and not has_cmake:
            if rel != ".":
                errors.append(f"{rel}: BUILD file has no CMakeLists.txt next to it")
            continue
        with open(os.path.join(folder, "CMakeLists.txt"), encoding="utf-8") as f:
            in_cmake = cmake_sources(f.read())
        with open(build, encoding="utf-8") as f:
            in_bazel = bazel_sources(f.read())
        checked += 1
        for name in sorted(in_cmake - in_bazel):
            errors.append(f"{rel}/{name}: in CMakeLists.txt, not in {os.path.basename(build)}")
        for name in sorted(in_bazel - in_cmake):
            errors.append(f"{rel}/{name}: in {os.path.basename(build)}, not in CMakeLists.txt")
        for name in sorted(in_cmake | in_bazel):
            if not os.path.isfile(os.path.join(folder, name)):
                errors.append(f"{rel}/{name}: listed but not there")
        on_disk = {f for f in files if f.endswith(".cc")}
        for name in sorted(on_disk - in_cmake - in_bazel):
            warnings.append(f"{rel}/{name}: in neither build")
    errors.extend(version_mismatch(root))
    for w in warnings:
        print("warning:", w)
    for e in errors:
        print("error:", e)
    if checked == 0:
        print("error: no folder with both a CMakeLists.txt and a BUILD file under", root)
        return 1
    if errors:
        print(f"{len(errors)} mismatch(es) between the CMake and Bazel builds")
        return 1
    print(f"CMake and Bazel list the same .cc files in {checked} folders")
    return 0


if __name__ == "__main__":
    sys.exit(main())
