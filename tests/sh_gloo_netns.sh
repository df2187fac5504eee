#!/usr/bin/env bash
# Shards on two "hosts": two network namespaces joined by a veth pair
# (10.77.0.1/24 and 10.77.0.2/24), one CPU shard in each, meeting through a
# file store and averaging gradients through Gloo's TCP transport over the
# veth link (shard 0 binds by interface, --gloo_iface; shard 1 by address,
# --gloo_host).  The run must succeed, log the addresses, and end with the
# same parameters, bit for bit, as the same two shards over loopback.
# Skips (77) only when namespaces cannot be made (not root / no
# CAP_NET_ADMIN).  Needs CORTADO_BIN (set by ctest) and iproute2.
set -euo pipefail

BIN=${CORTADO_BIN:?CORTADO_BIN is not set}
TMP=${CORTADO_TMP:-/tmp}/sh_gloo_netns
rm -rf "$TMP"
mkdir -p "$TMP"
command -v ip >/dev/null || { echo "ip (iproute2) not found: skipped"; exit 77; }

NS0=ctgloo$$a NS1=ctgloo$$b
IF0=ctg$$a IF1=ctg$$b
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  ip netns del "$NS0" 2>/dev/null || true
  ip netns del "$NS1" 2>/dev/null || true
  ip link del "$IF0" 2>/dev/null || true
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  for f in "$TMP"/*.log; do [ -f "$f" ] && { echo "---- $f" >&2; tail -n 15 "$f" >&2; }; done
  exit 1
}

if ! ip netns add "$NS0" 2>"$TMP/netns.err"; then
  echo "cannot create a network namespace ($(cat "$TMP/netns.err")): needs root or CAP_NET_ADMIN: skipped"
  exit 77
fi
ip netns add "$NS1"
ip link add "$IF0" type veth peer name "$IF1"
ip link set "$IF0" netns "$NS0"
ip link set "$IF1" netns "$NS1"
ip -n "$NS0" addr add 10.77.0.1/24 dev "$IF0"
ip -n "$NS1" addr add 10.77.0.2/24 dev "$IF1"
for ns in "$NS0" "$NS1"; do ip -n "$ns" link set lo up; done
ip -n "$NS0" link set "$IF0" up
ip -n "$NS1" link set "$IF1" up

cat >"$TMP/net.prototxt" <<'NET'
name: "twohosts"
layer { name: "data" type: "DummyData" top: "x" top: "label"
  dummy_data_param { shape { dim: 8 dim: 16 } shape { dim: 8 }
    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
  inner_product_param { num_output: 32 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "y"
  inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "y" bottom: "label" top: "loss" }
NET

# train NAME PREFIX0 PREFIX1 FLAGS0 FLAGS1: both shards (each command
# prefixed, e.g. by `ip netns exec`), snapshots under $TMP/NAME.
train() {
  local name=$1 pre0=$2 pre1=$3 f0=$4 f1=$5
  mkdir -p "$TMP/$name.store"
  cat >"$TMP/$name.solver.prototxt" <<SOLVER
net: "$TMP/net.prototxt"
base_lr: 0.05 lr_policy: "fixed" momentum: 0.9
max_iter: 30 display: 10 random_seed: 5 snapshot_prefix: "$TMP/$name"
solver_mode: CPU
SOLVER
  local common=(train --solver="$TMP/$name.solver.prototxt" --num_shards=2 --run_id="$name"
    --file_store_path="$TMP/$name.store" --rendezvous_timeout=30 --comm_timeout=30)
  # shellcheck disable=SC2086
  $pre0 "$BIN" "${common[@]}" --shard_id=0 $f0 >"$TMP/$name.shard0.log" 2>&1 &
  PIDS+=($!)
  local p0=$!
  # shellcheck disable=SC2086
  $pre1 "$BIN" "${common[@]}" --shard_id=1 $f1 >"$TMP/$name.shard1.log" 2>&1 &
  PIDS+=($!)
  local p1=$!
  wait "$p0" || fail "$name: shard 0 failed"
  wait "$p1" || fail "$name: shard 1 failed"
}

start=$(date +%s.%N)
train veth "ip netns exec $NS0" "ip netns exec $NS1" "--gloo_iface=$IF0" "--gloo_host=10.77.0.2"
echo "two namespaces: trained in $(echo "$(date +%s.%N) - $start" | bc)s"
grep -F "transport Gloo 0.5.0 over TCP, rank 0 at 10.77.0.1 ($IF0)" "$TMP/veth.shard0.log" ||
  fail "shard 0 does not listen on 10.77.0.1 ($IF0)"
grep -F "Shard 1: Gloo listens on 10.77.0.2 ($IF1)" "$TMP/veth.shard1.log" ||
  fail "shard 1 does not listen on 10.77.0.2 ($IF1)"
grep -F "effective batch 16 = 8 x 2 workers" "$TMP/veth.shard0.log" || fail "no effective batch line"
grep -F "Optimization Done." "$TMP/veth.shard1.log" >/dev/null || fail "shard 1 did not finish"

train loopback "" "" "--gloo_iface=lo" "--gloo_iface=lo"
cmp "$TMP/veth_iter_30.caffemodel" "$TMP/loopback_iter_30.caffemodel" ||
  fail "the parameters over veth differ from those over loopback"
echo "parameters after 30 iterations: identical over the veth link and over loopback"
echo "PASS"
