#!/usr/bin/env python3
"""The EC2 CloudFormation template (deploy/aws/spotps.yaml), evaluated
offline for every shard count and checked against the real binaries.

  tests/deploy/cfn_test.py SOURCE_DIR BIN_DIR

Parses the template (CloudFormation's short tags: !Ref, !Sub, ...), then for
ShardCount 1..4 evaluates the conditions and intrinsic functions the
template uses, and checks: which shard instances exist and their fixed
addresses; each instance's user data parses (bash -n) and its systemd
unit's command line, run through the package's entry point with the build
tree's binaries, passes --check_flags and derives the right shard index,
shard count, peers and --ps list; the trainers' stop timeout covers their
drain; the security group opens the shards' port; the Auto Scaling group is
100% spot above a base of 0, capacity-optimized, with capacity rebalancing,
over Sapphire Rapids types. Then it breaks the template in several ways and
expects the checks to catch each.
"""

import os
import re
import shlex
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_checks import EntryPoint, flag_defaults, flag_values  # noqa: E402

PACKAGED_ENTRYPOINT = "/usr/share/spotps/entrypoint.sh"
SAPPHIRE_RAPIDS = {"c7i", "m7i", "r7i", "r7iz"}


class CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's tags: !Ref X -> {"Ref": X},
    !Condition X -> {"Condition": X}, !Foo ... -> {"Fn::Foo": ...}."""


def _tag(loader, suffix, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    key = suffix if suffix in ("Ref", "Condition") else "Fn::" + suffix
    if key == "Fn::GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {key: value}


CfnLoader.add_multi_constructor("!", _tag)


class Stack:
    """One evaluation of the template with given parameter values."""

    def __init__(self, template, params):
        self.t = template
        self.params = {}
        for name, spec in template["Parameters"].items():
            value = params.get(name, spec.get("Default"))
            if value is None:
                raise ValueError(f"parameter {name} has no value")
            if spec["Type"].startswith("List<") or spec["Type"] == "CommaDelimitedList":
                value = value if isinstance(value, list) else str(value).split(",")
            else:
                value = str(value)
            if "AllowedValues" in spec and value not in [str(v) for v in spec["AllowedValues"]]:
                raise ValueError(f"{name}={value} is not allowed")
            self.params[name] = value
        self.conditions = {}
        for name in template.get("Conditions", {}):
            self.condition(name)

    def condition(self, name):
        if name not in self.conditions:
            self.conditions[name] = bool(self.eval(self.t["Conditions"][name]))
        return self.conditions[name]

    def ref(self, name):
        if name in self.params:
            return self.params[name]
        if name == "AWS::StackName":
            return "teststack"
        if name == "AWS::Region":
            return "us-east-1"
        if name in self.t["Resources"]:
            return f"<{name}>"
        raise ValueError(f"Ref to unknown {name}")

    def sub(self, text, variables):
        def one(m):
            name = m.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return str(variables[name])
            if "." in name and name.split(".")[0] in self.t["Resources"]:
                return f"<{name}>"
            value = self.ref(name)
            if isinstance(value, list):
                raise ValueError(f"${{{name}}} is a list")
            return value
        return re.sub(r"\$\{([^}]+)\}", one, text)

    def eval(self, node):
        if isinstance(node, list):
            return [self.eval(n) for n in node]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (key, arg), = node.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Condition":
                return self.condition(arg)
            if key == "Fn::If":
                return self.eval(arg[1] if self.condition(arg[0]) else arg[2])
            if key == "Fn::Equals":
                a, b = self.eval(arg)
                return str(a) == str(b)
            if key == "Fn::Or":
                return any(self.eval(a) for a in arg)
            if key == "Fn::And":
                return all(self.eval(a) for a in arg)
            if key == "Fn::Not":
                return not self.eval(arg[0])
            if key == "Fn::Select":
                index, values = self.eval(arg)
                return values[int(index)]
            if key == "Fn::Join":
                sep, values = self.eval(arg)
                return sep.join(values)
            if key == "Fn::Sub":
                if isinstance(arg, str):
                    return self.sub(arg, {})
                return self.sub(arg[0], self.eval(arg[1]))
            if key == "Fn::Base64":
                return self.eval(arg)  # checked as text
            if key == "Fn::GetAtt":
                return "<" + ".".join(arg) + ">"
            if key.startswith("Fn::"):
                raise ValueError(f"{key} is not evaluated by this test")
        return {k: self.eval(v) for k, v in node.items()}

    def resources(self):
        return {name: self.eval(r) for name, r in self.t["Resources"].items()
                if "Condition" not in r or self.condition(r["Condition"])}


def unit_of(user_data):
    """(environment, ExecStart argv, TimeoutStopSec) of the systemd unit the
    user data writes (between <<'UNIT' and UNIT)."""
    m = re.search(r"<<'UNIT'\n(.*?)\nUNIT\n", user_data, re.S)
    if not m:
        raise ValueError("the user data writes no systemd unit (<<'UNIT' ... UNIT)")
    env, argv, timeout = {}, None, None
    for line in m.group(1).splitlines():
        if line.startswith("Environment="):
            for item in shlex.split(line[len("Environment="):]):
                k, v = item.split("=", 1)
                env[k] = v
        elif line.startswith("ExecStart="):
            argv = shlex.split(line[len("ExecStart="):])
        elif line.startswith("TimeoutStopSec="):
            timeout = float(line.split("=", 1)[1])
    if argv is None:
        raise ValueError("the unit has no ExecStart")
    return env, argv, timeout


def check(template_text, entry, trainer_defaults, ps_defaults):
    problems = []
    t = yaml.load(template_text, CfnLoader)
    for count in range(1, 5):
        stack = Stack(t, {"ShardCount": count, "PackageUrl": "https://example.com/spotps.deb",
                          "ShardSubnetId": "subnet-1", "TrainerSubnetIds": "subnet-1,subnet-2",
                          "SecurityGroupId": "sg-1"})
        res = stack.resources()
        ips = stack.params["ShardPrivateIps"]
        if len(ips) < 4:
            problems.append(f"ShardPrivateIps has {len(ips)} addresses, want 4")
            return problems
        want_ps = [f"{ip}:{7000}" for ip in ips[:count]]
        shards = sorted(n for n, r in res.items() if r["Type"] == "AWS::EC2::Instance")
        if shards != [f"Shard{i}" for i in range(count)]:
            problems.append(f"ShardCount={count} makes instances {shards}")
        ingress = [r for r in res.values() if r["Type"] == "AWS::EC2::SecurityGroupIngress"]
        open_ports = {(int(r["Properties"]["FromPort"]), int(r["Properties"]["ToPort"])) for r in ingress}
        for name in shards:
            i = int(name[len("Shard"):])
            props = res[name]["Properties"]
            if props.get("PrivateIpAddress") != ips[i]:
                problems.append(f"{name} is at {props.get('PrivateIpAddress')}, want {ips[i]}")
            if "InstanceMarketOptions" in props:
                problems.append(f"{name} is not on-demand")
            user_data = props["UserData"]
            if subprocess.run(["bash", "-n"], input=user_data, text=True).returncode != 0:
                problems.append(f"ShardCount={count}: {name}'s user data does not parse")
            try:
                env, argv, _ = unit_of(user_data)
            except ValueError as e:
                problems.append(f"{name}: {e}")
                continue
            if argv[0] != PACKAGED_ENTRYPOINT or argv[1] != "ps":
                problems.append(f"{name} runs {argv[:2]}, want {PACKAGED_ENTRYPOINT} ps")
                continue
            status, line, output = entry.run(argv[1:], env, "ip-10-0-1-10")
            if status != 0:
                problems.append(f"ShardCount={count}: {name}'s command line is refused "
                                f"(exit {status}):\n{output}")
                continue
            got = flag_values(line[1:])
            if got.get("shard_index") != str(i) or got.get("num_shards") != str(count):
                problems.append(f"ShardCount={count}: {name} runs --shard_index="
                                f"{got.get('shard_index')} --num_shards={got.get('num_shards')}")
            if i == 0:
                if env.get("SPOTPS_PS", "").split(",") != want_ps:
                    problems.append(f"ShardCount={count}: shard 0's SPOTPS_PS is "
                                    f"{env.get('SPOTPS_PS')}, want {','.join(want_ps)}")
                if count > 1 and got.get("peers", "").split(",") != want_ps[1:]:
                    problems.append(f"ShardCount={count}: shard 0's --peers={got.get('peers')}")
                if "epochs" not in got:
                    problems.append("shard 0 does not host the coordinator (--epochs)")
            port = int(got.get("listen", ps_defaults["listen"]).rsplit(":", 1)[1])
            if not any(lo <= port <= hi for lo, hi in open_ports):
                problems.append(f"{name} listens on {port}, which no ingress rule opens ({open_ports})")

        # Trainers.
        groups = [r for r in res.values() if r["Type"] == "AWS::AutoScaling::AutoScalingGroup"]
        if len(groups) != 1:
            problems.append(f"want one Auto Scaling group, found {len(groups)}")
            continue
        asg = groups[0]["Properties"]
        if asg.get("CapacityRebalance") is not True:
            problems.append("the Auto Scaling group lacks CapacityRebalance: true")
        policy = asg.get("MixedInstancesPolicy", {})
        dist = policy.get("InstancesDistribution", {})
        if (str(dist.get("OnDemandBaseCapacity")) != "0"
                or str(dist.get("OnDemandPercentageAboveBaseCapacity")) != "0"):
            problems.append(f"trainers are not 100% spot above a base of 0: {dist}")
        if dist.get("SpotAllocationStrategy") != "capacity-optimized":
            problems.append(f"spot allocation is {dist.get('SpotAllocationStrategy')}")
        types = [o.get("InstanceType") for o in policy.get("LaunchTemplate", {}).get("Overrides", [])]
        families = {str(ty).split(".")[0] for ty in types}
        if families != SAPPHIRE_RAPIDS:
            problems.append(f"trainer instance types {types}: families {sorted(families)}, "
                            f"want {sorted(SAPPHIRE_RAPIDS)}")
        lt_ref = policy.get("LaunchTemplate", {}).get("LaunchTemplateSpecification", {}).get(
            "LaunchTemplateId", "")
        lt = res.get(lt_ref.strip("<>"), {}).get("Properties", {}).get("LaunchTemplateData")
        if lt is None:
            problems.append(f"the group's launch template {lt_ref} is not in the stack")
            continue
        user_data = lt["UserData"]
        if subprocess.run(["bash", "-n"], input=user_data, text=True).returncode != 0:
            problems.append("the trainers' user data does not parse")
        try:
            env, argv, timeout = unit_of(user_data)
        except ValueError as e:
            problems.append(f"trainers: {e}")
            continue
        if argv[:2] != [PACKAGED_ENTRYPOINT, "trainer"]:
            problems.append(f"trainers run {argv[:2]}")
            continue
        status, line, output = entry.run(argv[1:], env, "ip-10-0-2-33")
        if status != 0:
            problems.append(f"the trainers' command line is refused (exit {status}):\n{output}")
            continue
        got = flag_values(line[1:])
        if got.get("ps", "").split(",") != want_ps:
            problems.append(f"ShardCount={count}: trainers use --ps={got.get('ps')}, "
                            f"want {','.join(want_ps)}")
        if got.get("spot_notice") != "aws":
            problems.append("trainers do not watch for the spot notice")
        drain = float(got.get("drain_deadline_s", trainer_defaults["drain_deadline_s"]))
        if timeout is None or timeout <= drain:
            problems.append(f"trainer TimeoutStopSec={timeout} is not above --drain_deadline_s={drain}")
        if drain >= 120:
            problems.append(f"--drain_deadline_s={drain} does not fit the 2-minute spot notice")
        corpus = re.search(r"entrypoint\.sh corpus (\S+)", user_data)
        if not corpus or got.get("data") != corpus.group(1).rstrip("/") + "/kjv.tokens":
            problems.append(f"trainers read --data={got.get('data')}, which the user data does not prepare")
        if lt.get("MetadataOptions", {}).get("HttpEndpoint") == "disabled":
            problems.append("trainers cannot reach the instance metadata for the spot notice")
        output_ps = stack.eval(t.get("Outputs", {}).get("ShardAddresses", {}).get("Value"))
        if output_ps != ",".join(want_ps):
            problems.append(f"ShardCount={count}: output ShardAddresses is {output_ps}")
    return problems


MUTATIONS = [
    ("a wrong address in the 2-shard --ps list",
     '"${A}:7000,${B}:7000", {A', '"${A}:7000,${A}:7000", {A', "ShardCount=2"),
    ("shard 1 without its condition", "    Condition: HasShard1\n", "", "makes instances"),
    ("no capacity rebalancing", "CapacityRebalance: true", "CapacityRebalance: false",
     "CapacityRebalance"),
    ("some on-demand trainers", "OnDemandPercentageAboveBaseCapacity: 0",
     "OnDemandPercentageAboveBaseCapacity: 20", "100% spot"),
    ("lowest-price spot", "SpotAllocationStrategy: capacity-optimized",
     "SpotAllocationStrategy: lowest-price", "spot allocation"),
    ("a non-Sapphire-Rapids type", "r7iz.4xlarge", "c6i.4xlarge", "families"),
    ("trainer stop timeout below its drain", "TimeoutStopSec=90", "TimeoutStopSec=45",
     "not above --drain_deadline_s"),
    ("a flag the trainer refuses", "--dtype=bf16", "--dtype=fp16", "refused"),
    ("a flag the shard refuses", "--optimizer=adamw --lr=1e-3 --warmup_steps=50 --weight_decay=0.01 --beta2=0.99\n",
     "--optimizer=adam --lr=1e-3 --warmup_steps=50 --weight_decay=0.01 --beta2=0.99\n", "refused"),
    ("no spot notice", " --spot_notice=aws\n", "\n", "spot notice"),
    ("ingress on another port", "FromPort: 7000\n      ToPort: 7000", "FromPort: 7001\n      ToPort: 7001",
     "no ingress rule"),
]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: cfn_test.py SOURCE_DIR BIN_DIR")
    source, bin_dir = (os.path.abspath(a) for a in sys.argv[1:])
    entry = EntryPoint(source, bin_dir)
    trainer_defaults = flag_defaults(os.path.join(bin_dir, "spotps-trainer"))
    ps_defaults = flag_defaults(os.path.join(bin_dir, "spotps-ps"))
    with open(os.path.join(source, "deploy", "aws", "spotps.yaml")) as f:
        text = f.read()
    failed = False
    problems = check(text, entry, trainer_defaults, ps_defaults)
    if problems:
        failed = True
        print("FAIL: deploy/aws/spotps.yaml:\n  " + "\n  ".join(problems))
    else:
        print("ok: deploy/aws/spotps.yaml is consistent for ShardCount 1..4")
    for what, old, new, phrase in MUTATIONS:
        if text.count(old) < 1:
            failed = True
            print(f"FAIL: cannot break the template ({what}): '{old}' is not in it")
            continue
        broken = text.replace(old, new)
        problems = check(broken, entry, trainer_defaults, ps_defaults)
        if any(phrase in p for p in problems):
            print(f"ok: caught {what}")
        else:
            failed = True
            print(f"FAIL: {what} not caught (want '{phrase}'); problems: {problems}")
    if failed:
        sys.exit(1)
    print("all CloudFormation checks passed")


if __name__ == "__main__":
    main()
