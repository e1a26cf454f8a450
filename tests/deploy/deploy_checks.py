"""Helpers shared by the deployment tests: flags as the binaries read them,
and command lines run through the real entry point and binaries with
--check_flags."""

import os
import re
import subprocess


def flag_values(args):
    """{name: value} of --name=value / --name value / --name in args, the last
    one winning as with absl; positional arguments are skipped."""
    values = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--"):
            body = a[2:]
            if "=" in body:
                name, value = body.split("=", 1)
            elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                name, value = body, args[i + 1]
                i += 1
            else:
                name, value = body, "true"
            values[name] = value
        i += 1
    return values


def flag_defaults(binary):
    """{name: default} from `binary --help` ("  --name=default" lines)."""
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60)
    return dict(re.findall(r"^  --([a-z_0-9]+)=(.*)$", out.stdout + out.stderr, re.M))


class EntryPoint:
    """Runs deploy/docker/entrypoint.sh with the build tree's binaries and
    --check_flags appended; caches results by (args, env, hostname)."""

    def __init__(self, source_dir, bin_dir):
        self.script = os.path.join(source_dir, "deploy", "docker", "entrypoint.sh")
        self.bin_dir = bin_dir
        self.cache = {}

    def run(self, args, env, hostname):
        """(exit status, the exec'd command line as a list or None, output)."""
        key = (tuple(args), tuple(sorted(env.items())), hostname)
        if key not in self.cache:
            full_env = {k: v for k, v in os.environ.items() if not k.startswith("SPOTPS_")}
            full_env.update(env)
            full_env["SPOTPS_HOSTNAME"] = hostname
            full_env["SPOTPS_BIN_DIR"] = self.bin_dir
            proc = subprocess.run([self.script] + list(args) + ["--check_flags"],
                                  env=full_env, capture_output=True, text=True, timeout=120)
            output = proc.stdout + proc.stderr
            exec_line = None
            for line in output.splitlines():
                if line.startswith("entrypoint: exec "):
                    exec_line = line[len("entrypoint: exec "):].split(" ")
            self.cache[key] = (proc.returncode, exec_line, output)
        return self.cache[key]
