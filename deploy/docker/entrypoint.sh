#!/bin/bash
# Entry point of the spotps container image (and usable on any host where
# the Debian package is installed, as /usr/share/spotps/entrypoint.sh).
#
#   entrypoint.sh ps [spotps-ps flags...]
#   entrypoint.sh trainer [spotps-trainer flags...]
#   entrypoint.sh corpus DIR      DIR/kjv.tokens from Debian's bible-kjv
#   entrypoint.sh ctl|generate|tokenize|client-example [args...]
#
# Environment:
#   SPOTPS_PS           every shard's host:port, in shard order. For `ps` it
#                       gives --num_shards (its length) and, on shard 0,
#                       --peers (shards 1..n-1); for `trainer`, --ps.
#   SPOTPS_SHARD0_ARGS  flags shard 0 alone gets (the coordinator's --epochs,
#                       --units_per_epoch, --checkpoint_every_s, ...).
#   SPOTPS_SHARD_INDEX  the shard's index; without it, the number after the
#                       hostname's last '-' (a StatefulSet pod's ordinal).
#   SPOTPS_HOSTNAME     stands in for the hostname.
#   SPOTPS_BIN_DIR      where the spotps binaries are (default: the package's
#                       bin directory next to this script's share/, else $PATH).
#
# Flags given on the command line win over derived ones; a derived value
# that contradicts one given is an error. The final command line goes to
# stderr ("entrypoint: exec ...") before the binary replaces this script, so
# with --check_flags it shows what a container would run. Exit status 2
# (like the binaries) on bad usage.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage_error() {
  echo "entrypoint: $*" >&2
  echo "usage: entrypoint.sh ps|trainer|corpus DIR|ctl|generate|tokenize|client-example [args...]" >&2
  exit 2
}

# The directory holding spotps-ps and friends, or "" to use $PATH.
bin_dir() {
  if [ -n "${SPOTPS_BIN_DIR:-}" ]; then
    [ -x "$SPOTPS_BIN_DIR/spotps-ps" ] ||
      usage_error "SPOTPS_BIN_DIR=$SPOTPS_BIN_DIR has no spotps-ps"
    echo "$SPOTPS_BIN_DIR"
  elif [ -x "$here/../../bin/spotps-ps" ]; then
    (cd "$here/../../bin" && pwd)
  fi
}
binary() {
  local dir
  dir=$(bin_dir)
  if [ -n "$dir" ]; then echo "$dir/$1"; else echo "$1"; fi
}

# flag_value NAME ARGS...: the value of --NAME (as --NAME=V or --NAME V) in
# ARGS, the last one if repeated; status 1 if absent.
flag_value() {
  local name=$1 found=1 value=""
  shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --"$name"=*) value=${1#*=}; found=0 ;;
      --"$name") [ $# -ge 2 ] || usage_error "--$name needs a value"; value=$2; found=0; shift ;;
    esac
    shift
  done
  [ $found -eq 0 ] && echo "$value"
  return $found
}

# The host's name, for the ordinal and the worker index.
host_name() { echo "${SPOTPS_HOSTNAME:-$(hostname)}"; }

run() {
  echo "entrypoint: exec $*" >&2
  exec "$@"
}

start_ps() {
  local args=("$@") index given shards=() n peers listen_port own_port
  if given=$(flag_value shard_index "${args[@]}"); then
    index=$given
  else
    if [ -n "${SPOTPS_SHARD_INDEX:-}" ]; then
      index=$SPOTPS_SHARD_INDEX
    else
      local host
      host=$(host_name)
      index=${host##*-}
      [[ "$host" == *-* && "$index" =~ ^[0-9]+$ ]] ||
        usage_error "cannot take the shard index from hostname '$host' (no '-N' suffix);" \
          "set SPOTPS_SHARD_INDEX or pass --shard_index"
    fi
    args+=("--shard_index=$index")
  fi
  [[ "$index" =~ ^[0-9]+$ ]] || usage_error "shard index '$index' is not a number"
  index=$((10#$index))

  if [ -n "${SPOTPS_PS:-}" ]; then
    IFS=, read -r -a shards <<< "$SPOTPS_PS"
    n=${#shards[@]}
    if given=$(flag_value num_shards "${args[@]}"); then
      [ "$given" = "$n" ] ||
        usage_error "--num_shards=$given but SPOTPS_PS lists $n shards: $SPOTPS_PS"
    else
      args+=("--num_shards=$n")
    fi
    [ "$index" -lt "$n" ] ||
      usage_error "shard index $index is outside SPOTPS_PS's $n shards: $SPOTPS_PS"
    # This shard must serve on the port the others will call it on.
    listen_port=$(flag_value listen "${args[@]}" || echo 0.0.0.0:7000)
    listen_port=${listen_port##*:}
    own_port=${shards[$index]##*:}
    [ "$listen_port" = 0 ] || [ "$listen_port" = "$own_port" ] ||
      usage_error "shard $index listens on port $listen_port but SPOTPS_PS names" \
        "${shards[$index]}"
    if [ "$index" -eq 0 ]; then
      if [ "$n" -gt 1 ] && ! flag_value peers "${args[@]}" > /dev/null; then
        peers=$(IFS=,; echo "${shards[*]:1}")
        args+=("--peers=$peers")
      fi
    fi
  fi
  if [ "$index" -eq 0 ] && [ -n "${SPOTPS_SHARD0_ARGS:-}" ]; then
    local extra=()
    read -r -a extra <<< "$SPOTPS_SHARD0_ARGS"
    args+=("${extra[@]}")
  fi
  run "$(binary spotps-ps)" "${args[@]}"
}

start_trainer() {
  local args=("$@")
  if [ -n "${SPOTPS_PS:-}" ] && ! flag_value ps "${args[@]}" > /dev/null; then
    args+=("--ps=$SPOTPS_PS")
  fi
  # Only names log lines (the coordinator gives each trainer its own id):
  # the hostname's trailing number, else a number from its checksum.
  if ! flag_value worker_index "${args[@]}" > /dev/null; then
    local host suffix
    host=$(host_name)
    suffix=${host##*-}
    if [[ "$host" == *-* && "$suffix" =~ ^[0-9]+$ ]]; then
      args+=("--worker_index=$((10#$suffix))")
    else
      args+=("--worker_index=$(( $(printf '%s' "$host" | cksum | cut -d' ' -f1) % 1000000 ))")
    fi
  fi
  run "$(binary spotps-trainer)" "${args[@]}"
}

prepare_corpus() {
  [ $# -eq 1 ] || usage_error "corpus takes one argument, the output directory"
  local script
  for script in "$here/prepare_corpus.sh" "$here/../../trainer/data/prepare_corpus.sh"; do
    if [ -x "$script" ]; then
      run "$script" "$1" "$(binary spotps-tokenize)"
    fi
  done
  echo "entrypoint: prepare_corpus.sh not found next to $0" >&2
  exit 1
}

[ $# -ge 1 ] || usage_error "no command given"
command=$1
shift
case "$command" in
  ps) start_ps "$@" ;;
  trainer) start_trainer "$@" ;;
  corpus) prepare_corpus "$@" ;;
  ctl|generate|tokenize|client-example) run "$(binary "spotps-$command")" "$@" ;;
  -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) usage_error "unknown command '$command'" ;;
esac
