#!/usr/bin/env bash
# The Redis password never reaches a file: two CPU shards meet through a real
# redis-server (started here, with requirepass), shard 0 given the password
# with --redis_password, shard 1 through REDIS_PASSWORD; with a log file, a
# CSV log (whose first line lists the flags), snapshots and the captured
# stdout/stderr of both, no file under the run's folder holds the password
# (the CSV line shows redis_password='***').  Then a wrong password fails
# at once without echoing either one.
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_secrets_gloo
rm -rf "$dir" && mkdir -p "$dir/run" "$dir/redis"
[ -x /usr/bin/redis-server ] || { echo "redis-server not installed: skipped"; exit 77; }
pw="s3cr3t-$RANDOM-pw"

# a free port: redis-server fails to start on a taken one, so try a few
port=""
for try in $(seq 1 20); do
  p=$((20000 + (RANDOM % 20000)))
  if /usr/bin/redis-server --port $p --bind 127.0.0.1 --requirepass "$pw" --save '' --appendonly no \
      --dir "$dir/redis" --daemonize yes --pidfile "$dir/redis/redis.pid" --logfile "$dir/redis/redis.log"; then
    for _ in $(seq 1 100); do
      if redis-cli -p $p -a "$pw" --no-auth-warning ping 2>/dev/null | grep PONG >/dev/null; then port=$p; break; fi
      sleep 0.05
    done
    [ -n "$port" ] && break
    [ -f "$dir/redis/redis.pid" ] && kill "$(cat "$dir/redis/redis.pid")" 2>/dev/null || true
  fi
done
[ -n "$port" ] || { echo "FAIL: redis-server did not start"; exit 1; }
trap 'kill "$(cat "$dir/redis/redis.pid")" 2>/dev/null || true' EXIT
fail=0

cd "$dir/run"
cat >net.prototxt <<'NET'
name: "s"
layer { name: "data" type: "DummyData" top: "x" top: "y"
  dummy_data_param { shape { dim: 4 dim: 6 } shape { dim: 4 dim: 3 }
    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "p"
  inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "p" bottom: "y" top: "loss" }
NET
printf 'net: "net.prototxt"\nbase_lr: 0.01\nlr_policy: "fixed"\nmax_iter: 6\ndisplay: 2\nsnapshot: 3\nsnapshot_prefix: "snap"\nsolver_mode: CPU\n' >solver.prototxt
common=(--num_shards=2 --run_id=secrets --redis_host=127.0.0.1 --redis_port=$port --gloo_iface=lo --rendezvous_timeout=60)
"$bin" train --solver=solver.prototxt "${common[@]}" --shard_id=0 --redis_password="$pw" --csv_log=csv/ \
  --log_file=train0.log >shard0.out 2>shard0.err &
p0=$!
REDIS_PASSWORD="$pw" "$bin" train --solver=solver.prototxt "${common[@]}" --shard_id=1 --log_file=train1.log \
  >shard1.out 2>shard1.err &
p1=$!
rc0=0 && wait $p0 || rc0=$?
rc1=0 && wait $p1 || rc1=$?
if [ $rc0 != 0 ] || [ $rc1 != 0 ]; then
  echo "FAIL: the shards failed ($rc0, $rc1)"; tail -3 shard0.err shard1.err; exit 1
fi
files=$(find . -type f | sort)
echo "the run wrote: $(echo $files)"
for want in ./train0.log ./train1.log ./shard0.err ./snap_iter_6.caffemodel ./snap_iter_3.solverstate; do
  grep -qx "$want" <<<"$files" || { echo "FAIL: no $want"; fail=1; }
done
csv=$(ls csv/*.csv 2>/dev/null | head -1)
[ -n "$csv" ] || { echo "FAIL: no CSV log"; fail=1; }
if leaks=$(grep -rlaF -- "$pw" . ); then
  echo "FAIL: the password is in: $leaks"; fail=1
else
  echo "ok   the password is in none of the $(wc -l <<<"$files") files"
fi
if [ -n "$csv" ] && head -1 "$csv" | grep -F "redis_password='***'" >/dev/null; then
  echo "ok   the CSV log's Namespace line shows redis_password='***'"
else
  echo "FAIL: CSV first line: $(head -1 "$csv" 2>/dev/null)"; fail=1
fi

# a wrong password: an error at once, naming neither password
out=$("$bin" train --solver=solver.prototxt --num_shards=2 --shard_id=0 --run_id=secrets2 --redis_host=127.0.0.1 \
  --redis_port=$port --redis_password="wrong-$pw" --rendezvous_timeout=60 2>&1) && { echo "FAIL: a wrong password worked"; fail=1; }
if grep -qF -- "$pw" <<<"$out"; then
  echo "FAIL: the error shows a password: $(tail -1 <<<"$out")"; fail=1
elif grep -q "authentication failed" <<<"$out"; then
  echo "ok   a wrong password: $(tail -1 <<<"$out")"
else
  echo "FAIL: wrong password: $(tail -2 <<<"$out")"; fail=1
fi
exit $fail
