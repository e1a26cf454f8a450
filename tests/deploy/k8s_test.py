#!/usr/bin/env python3
"""The Kubernetes manifests (deploy/k8s), rendered offline and checked
against each other and against the real binaries.

  tests/deploy/k8s_test.py SOURCE_DIR BIN_DIR

Renders the base and every overlay with `kubectl kustomize` (or `kustomize
build`), then checks that each rendering is consistent: the StatefulSet's
replicas, the shards in SPOTPS_PS (exactly its pods' DNS names, in order,
on the container's port), the headless Service, the PodDisruptionBudget,
the checkpoint volume, drain deadlines against grace periods, CPU requests
against --threads, and where shards and trainers may run; every container
command line goes through the image's entry point as a pod would (hostname
spotps-ps-<i>) and the real binary's --check_flags. Then it breaks the
aws-spot rendering in several ways and expects the checks to catch each.
"""

import copy
import os
import shutil
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_checks import EntryPoint, flag_defaults, flag_values  # noqa: E402

SPOT_NOTICE_S = {"aws-spot": 120, "gke-spot": 15}  # what a reclaim leaves a pod


def render(directory):
    if shutil.which("kubectl"):
        cmd = ["kubectl", "kustomize", directory]
    elif shutil.which("kustomize"):
        cmd = ["kustomize", "build", directory]
    else:
        sys.exit("k8s_test: neither kubectl nor kustomize found (deploy/install-deps.sh installs kubectl)")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        sys.exit(f"k8s_test: {' '.join(cmd)} failed:\n{proc.stderr}")
    return [o for o in yaml.safe_load_all(proc.stdout) if o]


def cpu_cores(quantity):
    q = str(quantity)
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def only(objects, kind, problems):
    found = [o for o in objects if o["kind"] == kind]
    if len(found) != 1:
        problems.append(f"want exactly one {kind}, found {len(found)}")
        return None
    return found[0]


def container_env(container, objects, problems):
    env = {}
    for source in container.get("envFrom", []):
        name = source.get("configMapRef", {}).get("name")
        maps = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == name]
        if not maps:
            problems.append(f"container {container['name']} reads ConfigMap {name}, which is not rendered")
            continue
        env.update(maps[0].get("data", {}))
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
    return env


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def placement_terms(pod_spec):
    """The node requirements of a pod: one list of (key, operator, values)
    per alternative (nodeSelector is ANDed into every one)."""
    fixed = [(k, "In", [v]) for k, v in pod_spec.get("nodeSelector", {}).items()]
    terms = (pod_spec.get("affinity", {}).get("nodeAffinity", {})
             .get("requiredDuringSchedulingIgnoredDuringExecution", {})
             .get("nodeSelectorTerms", []))
    if not terms:
        return [fixed]
    return [fixed + [(m["key"], m["operator"], m.get("values", []))
                     for m in t.get("matchExpressions", [])] for t in terms]


SPOT = {("karpenter.sh/capacity-type", "spot"), ("eks.amazonaws.com/capacityType", "SPOT"),
        ("cloud.google.com/gke-spot", "true")}
SPOT_KEYS = {k for k, _ in SPOT}


def requires_spot(term):
    return any(op == "In" and set(values) and all((key, v) in SPOT for v in values)
               for key, op, values in term)


def excludes_spot(term):
    for key, op, values in term:
        if op == "DoesNotExist" and key in SPOT_KEYS:
            return True
        if op == "In" and key in SPOT_KEYS and values and not any((key, v) in SPOT for v in values):
            return True
    return False


def check(objects, variant, entry, trainer_defaults, ps_defaults):
    problems = []
    sts = only(objects, "StatefulSet", problems)
    deploy = only(objects, "Deployment", problems)
    pdb = only(objects, "PodDisruptionBudget", problems)
    if not (sts and deploy and pdb):
        return problems
    ns = sts["metadata"].get("namespace")
    for o in objects:
        if o["kind"] != "Namespace" and o["metadata"].get("namespace") != ns:
            problems.append(f"{o['kind']} {o['metadata']['name']} is in namespace "
                            f"{o['metadata'].get('namespace')}, the shards in {ns}")
    for o in objects:
        if o["kind"] == "Namespace" and o["metadata"]["name"] != ns:
            problems.append(f"Namespace {o['metadata']['name']} is not the shards' {ns}")

    # --- shards
    replicas = sts["spec"].get("replicas", 1)
    pod = sts["spec"]["template"]
    labels = pod["metadata"].get("labels", {})
    if not selects(sts["spec"]["selector"]["matchLabels"], labels):
        problems.append("the StatefulSet's selector does not select its own pods")
    containers = pod["spec"]["containers"]
    if len(containers) != 1:
        problems.append(f"shard pods have {len(containers)} containers, want 1")
    ps = containers[0]
    services = [o for o in objects if o["kind"] == "Service"
                and o["metadata"]["name"] == sts["spec"].get("serviceName")]
    if not services:
        problems.append(f"no Service {sts['spec'].get('serviceName')} (the StatefulSet's serviceName)")
        return problems
    svc = services[0]
    if svc["spec"].get("clusterIP") != "None":
        problems.append("the shards' Service is not headless (clusterIP: None)")
    if not selects(svc["spec"].get("selector"), labels):
        problems.append("the shards' Service does not select the shard pods")
    ps_args = ps.get("args", [])
    listen_port = int(flag_values(ps_args).get("listen", ps_defaults["listen"]).rsplit(":", 1)[1])
    ports = {p.get("name"): p["containerPort"] for p in ps.get("ports", [])}
    if listen_port not in ports.values():
        problems.append(f"--listen port {listen_port} is not a containerPort of the shard ({ports})")
    for p in svc["spec"].get("ports", []):
        target = p.get("targetPort", p["port"])
        target = ports.get(target, target) if isinstance(target, str) else target
        if p["port"] != listen_port or target != listen_port:
            problems.append(f"Service port {p['port']} -> {p.get('targetPort')} is not the shards' "
                            f"port {listen_port}")
    env = container_env(ps, objects, problems)
    want = [f"{sts['metadata']['name']}-{i}.{svc['metadata']['name']}.{ns}.svc:{listen_port}"
            for i in range(replicas)]
    listed = env.get("SPOTPS_PS", "").split(",")
    if listed != want:
        problems.append(f"SPOTPS_PS lists {listed}; the StatefulSet's {replicas} pods are {want}")

    mounts = {m["name"]: m["mountPath"] for m in ps.get("volumeMounts", [])}
    claims = [c["metadata"]["name"] for c in sts["spec"].get("volumeClaimTemplates", [])]
    for i in range(replicas):
        status, line, output = entry.run(ps_args, env, f"{sts['metadata']['name']}-{i}")
        if status != 0:
            problems.append(f"shard {i}'s command line is refused (exit {status}):\n{output}")
            continue
        got = flag_values(line[1:])
        if got.get("shard_index") != str(i) or got.get("num_shards") != str(replicas):
            problems.append(f"pod {i} runs --shard_index={got.get('shard_index')} "
                            f"--num_shards={got.get('num_shards')}, want {i} and {replicas}")
        if i == 0 and replicas > 1 and got.get("peers", "").split(",") != listed[1:]:
            problems.append(f"shard 0's --peers={got.get('peers')} is not shards 1.. of SPOTPS_PS")
        if i > 0 and ("epochs" in got or "peers" in got):
            problems.append(f"shard {i} got shard 0's flags: {' '.join(line)}")
        ckpt = got.get("checkpoint_dir")
        if not ckpt:
            problems.append(f"shard {i} runs without --checkpoint_dir")
        elif not any(mounts.get(c) == ckpt for c in claims):
            problems.append(f"--checkpoint_dir={ckpt} is not a volumeClaimTemplate's mount "
                            f"(claims {claims}, mounts {mounts})")
    grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
    shutdown = float(flag_values(ps_args).get("shutdown_grace_s", ps_defaults["shutdown_grace_s"]))
    if grace <= shutdown:
        problems.append(f"shard grace {grace}s is not above --shutdown_grace_s={shutdown}")
    if not selects(pdb["spec"].get("selector", {}).get("matchLabels"), labels):
        problems.append("the PodDisruptionBudget does not select the shard pods")
    if pdb["spec"].get("maxUnavailable") != 0 and pdb["spec"].get("minAvailable") != replicas:
        problems.append(f"the PodDisruptionBudget lets a shard go ({pdb['spec']})")

    # --- trainers
    tpod = deploy["spec"]["template"]
    if not selects(deploy["spec"]["selector"]["matchLabels"], tpod["metadata"].get("labels", {})):
        problems.append("the Deployment's selector does not select its own pods")
    if selects(svc["spec"].get("selector"), tpod["metadata"].get("labels", {})):
        problems.append("the shards' Service also selects trainer pods")
    trainer = tpod["spec"]["containers"][0]
    tenv = container_env(trainer, objects, problems)
    targs = trainer.get("args", [])
    status, line, output = entry.run(targs, tenv, f"{deploy['metadata']['name']}-5d9c7b8f6d-x2k4q")
    if status != 0:
        problems.append(f"the trainer's command line is refused (exit {status}):\n{output}")
    else:
        got = flag_values(line[1:])
        if got.get("ps", "").split(",") != want:
            problems.append(f"trainers use --ps={got.get('ps')}, the shards are {want}")
        drain = float(got.get("drain_deadline_s", trainer_defaults["drain_deadline_s"]))
        tgrace = tpod["spec"].get("terminationGracePeriodSeconds", 30)
        if tgrace <= drain:
            problems.append(f"trainer grace {tgrace}s is not above --drain_deadline_s={drain}")
        if variant in SPOT_NOTICE_S and tgrace > SPOT_NOTICE_S[variant]:
            problems.append(f"trainer grace {tgrace}s is longer than the {SPOT_NOTICE_S[variant]}s a "
                            f"{variant} reclaim leaves")
        threads = int(got.get("threads", "0"))
        cpu = trainer.get("resources", {}).get("requests", {}).get("cpu")
        if threads < 1 or cpu is None or threads > cpu_cores(cpu):
            problems.append(f"--threads={threads} against a CPU request of {cpu}: set both, "
                            "threads at most the request")
        data = got.get("data", "")
        tmounts = [m["mountPath"] for m in trainer.get("volumeMounts", [])]
        if not (data.startswith("/usr/share/spotps/corpus/")
                or any(data.startswith(m.rstrip("/") + "/") for m in tmounts)):
            problems.append(f"--data={data} is neither the image's corpus nor on a mounted volume")
        if variant == "aws-spot" and got.get("spot_notice") != "aws":
            problems.append("aws-spot trainers do not watch for the spot notice")

    for c in containers + tpod["spec"]["containers"]:
        requests = c.get("resources", {}).get("requests", {})
        if "cpu" not in requests or "memory" not in requests:
            problems.append(f"container {c['name']} lacks CPU or memory requests")
        if c.get("image") != ps.get("image"):
            problems.append(f"container {c['name']} runs {c.get('image')}, the shards {ps.get('image')}")

    # --- placement: shards never on spot, trainers only on spot (overlays)
    for spec, what in ((pod["spec"], "shards"), (tpod["spec"], "trainers")):
        if variant == "base":
            continue
        terms = placement_terms(spec)
        if what == "shards":
            if not all(excludes_spot(t) for t in terms):
                problems.append(f"{variant}: shards may land on spot nodes ({terms})")
            if any(t.get("key") in SPOT_KEYS for t in spec.get("tolerations", [])):
                problems.append(f"{variant}: shards tolerate spot taints")
        elif not all(requires_spot(t) for t in terms):
            problems.append(f"{variant}: trainers may land on on-demand nodes ({terms})")
    return problems


def mutations():
    """(what, how to break a rendering, a phrase the problems must contain)."""
    def kind(objs, k):
        return next(o for o in objs if o["kind"] == k)

    def trainer(objs):
        return kind(objs, "Deployment")["spec"]["template"]["spec"]

    def shard(objs):
        return kind(objs, "StatefulSet")["spec"]["template"]["spec"]

    def cm(objs):
        return kind(objs, "ConfigMap")["data"]

    def set_(d, k, v):
        d[k] = v

    return [
        ("one more shard replica", lambda o: set_(kind(o, "StatefulSet")["spec"], "replicas", 3),
         "SPOTPS_PS lists"),
        ("SPOTPS_PS out of order",
         lambda o: set_(cm(o), "SPOTPS_PS", ",".join(reversed(cm(o)["SPOTPS_PS"].split(",")))),
         "SPOTPS_PS lists"),
        ("Service on another port",
         lambda o: set_(kind(o, "Service")["spec"]["ports"][0], "port", 7001), "Service port"),
        ("shards listen elsewhere",
         lambda o: shard(o)["containers"][0]["args"].append("--listen=0.0.0.0:7001"), "refused"),
        ("trainer grace below its drain",
         lambda o: set_(trainer(o), "terminationGracePeriodSeconds", 30), "not above --drain_deadline_s"),
        ("a flag the trainer refuses",
         lambda o: trainer(o)["containers"][0]["args"].append("--dtype=fp16"), "refused"),
        ("a flag the shard refuses",
         lambda o: shard(o)["containers"][0]["args"].append("--lr_schedule=step"), "refused"),
        ("trainers anywhere", lambda o: trainer(o).pop("affinity"), "may land on on-demand"),
        ("shards anywhere", lambda o: shard(o).pop("affinity"), "shards may land on spot"),
        ("PDB selects nothing",
         lambda o: set_(kind(o, "PodDisruptionBudget")["spec"]["selector"], "matchLabels", {"x": "y"}),
         "PodDisruptionBudget does not select"),
        ("checkpoints off the volume",
         lambda o: set_(shard(o)["containers"][0]["volumeMounts"][0], "mountPath", "/tmp/x"),
         "volumeClaimTemplate"),
        ("more threads than CPUs",
         lambda o: trainer(o)["containers"][0]["args"].append("--threads=16"), "--threads=16"),
        ("no spot notice on AWS",
         lambda o: trainer(o)["containers"][0]["args"].remove("--spot_notice=aws"),
         "spot notice"),
    ]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: k8s_test.py SOURCE_DIR BIN_DIR")
    source, bin_dir = (os.path.abspath(a) for a in sys.argv[1:])
    entry = EntryPoint(source, bin_dir)
    trainer_defaults = flag_defaults(os.path.join(bin_dir, "spotps-trainer"))
    ps_defaults = flag_defaults(os.path.join(bin_dir, "spotps-ps"))
    k8s = os.path.join(source, "deploy", "k8s")
    failed = False
    rendered = {}
    variants = ["base"] + sorted(os.listdir(os.path.join(k8s, "overlays")))
    for variant in variants:
        path = os.path.join(k8s, "base" if variant == "base" else os.path.join("overlays", variant))
        objects = render(path)
        rendered[variant] = objects
        problems = check(objects, variant, entry, trainer_defaults, ps_defaults)
        kinds = sorted(o["kind"] for o in objects)
        if problems:
            failed = True
            print(f"FAIL: {variant}:\n  " + "\n  ".join(problems))
        else:
            print(f"ok: {variant} renders {len(objects)} objects ({', '.join(kinds)}), all consistent")
    for want in ("aws-spot", "gke-spot"):
        if want not in rendered:
            failed = True
            print(f"FAIL: no overlay {want}")

    # The checks must catch a broken manifest.
    base = rendered.get("aws-spot")
    for what, breaks, phrase in mutations() if base else []:
        objects = copy.deepcopy(base)
        breaks(objects)
        problems = check(objects, "aws-spot", entry, trainer_defaults, ps_defaults)
        if any(phrase in p for p in problems):
            print(f"ok: caught {what}")
        else:
            failed = True
            print(f"FAIL: {what} not caught (want '{phrase}'); problems: {problems}")
    if failed:
        sys.exit(1)
    print("all Kubernetes checks passed")


if __name__ == "__main__":
    main()
