#!/usr/bin/env bash
# Benchmarks of SPEC.md §6, with their baselines measured in the same run.
#
#   bench/run.sh            # everything (builds release binaries, generates inputs once)
#   RUNS=5 bench/run.sh     # fewer repetitions
#
# Not run by CI: timings on a shared machine are noisy, so every case is run several times and
# the median is reported, next to a baseline measured by this same script. Inputs are generated
# deterministically by examples/bench_inputs.rs into target/bench/ (about 115 MB).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-11}
DIR=target/bench

echo "# building release binaries" >&2
cargo build --release --locked --quiet --bin ctx --example bench_inputs --example tiktoken_baseline
CTX=target/release/ctx
BASE=target/release/examples/tiktoken_baseline

if [ ! -f "$DIR/batch.jsonl" ] || [ examples/bench_inputs.rs -nt "$DIR/batch.jsonl" ]; then
  echo "# generating inputs in $DIR" >&2
  target/release/examples/bench_inputs "$DIR"
fi

# median_ms CMD...: runs CMD $RUNS times (stdout discarded) and prints the median wall time in ms.
median_ms() {
  local times=() start end
  for _ in $(seq "$RUNS"); do
    start=$(date +%s%N)
    "$@" > /dev/null
    end=$(date +%s%N)
    times+=($(( (end - start) / 1000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.1f\n", m/1000}'
}

# paired N "A" "B": runs the shell commands A and B alternately N times (stdout discarded), so
# that both see the same moments of a shared machine, and prints "median_A median_B
# median_ratio" (ms, ms, B/A per pair). Ratios between separately timed blocks of runs swing by
# a third on this kind of machine; ratios within pairs do not.
paired() {
  local n=$1 a=$2 b=$3 ta=() tb=() rs=() s e x y
  for _ in $(seq "$n"); do
    s=$(date +%s%N); eval "$a" > /dev/null; e=$(date +%s%N); x=$(( (e - s) / 1000 ))
    s=$(date +%s%N); eval "$b" > /dev/null; e=$(date +%s%N); y=$(( (e - s) / 1000 ))
    ta+=("$x"); tb+=("$y"); rs+=("$(awk -v x="$x" -v y="$y" 'BEGIN {printf "%.4f", y/x}')")
  done
  med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }
  printf '%.1f %.1f %.2f\n' "$(awk -v v="$(med "${ta[@]}")" 'BEGIN {print v/1000}')" \
    "$(awk -v v="$(med "${tb[@]}")" 'BEGIN {print v/1000}')" "$(med "${rs[@]}")"
}

# peak_mb CMD...: the peak resident memory of one run, in MB.
peak_mb() {
  /usr/bin/time -f '%M' "$@" 2>&1 > /dev/null | tail -1 | awk '{printf "%.1f\n", $1/1024}'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}'; }
mb() { awk -v b="$(stat -c %s "$1")" 'BEGIN {printf "%.1f", b/1048576}'; }

echo "machine: $(uname -sm), $(nproc) CPUs, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
echo "ctx: $(git describe --always --dirty 2>/dev/null || echo unknown), runs per case: $RUNS (medians)"
echo

echo "## 1. ctx count on a 20 KB chat, whole process"
chat=$DIR/chat_20k.json
t_ctx=$(median_ms "$CTX" count "$chat")
t_base=$(median_ms "$BASE" chat "$chat")
echo "input: $(stat -c %s "$chat") bytes, $("$CTX" count --output total "$chat") tokens"
echo "ctx count:                         ${t_ctx} ms   (target: at most 25 ms)"
echo "baseline, tiktoken-rs (same chat): ${t_base} ms   ratio $(ratio "$t_base" "$t_ctx")x"
echo "peak memory, ctx count:            $(peak_mb "$CTX" count "$chat") MB"
echo

echo "## 2. counting throughput, same text, identical counts (o200k_base)"
printf '%-8s %10s %12s %14s %8s\n' text MB tokens "ctx MB/s" ratio
for kind in prose code json cjk; do
  f=$DIR/text_$kind.txt
  # tiktoken_baseline text prints: tokens ctx_ns tiktoken_ns (medians over its own repetitions)
  read -r tokens ctx_ns base_ns < <("$BASE" text "$f" o200k_base "$RUNS")
  size=$(stat -c %s "$f")
  printf '%-8s %10s %12s %14s %7sx\n' "$kind" "$(mb "$f")" "$tokens" \
    "$(awk -v b="$size" -v n="$ctx_ns" 'BEGIN {printf "%.1f", b/1048576/(n/1e9)}')" \
    "$(ratio "$base_ns" "$ctx_ns")"
done
echo "(ratio: tiktoken-rs time / ctx time on the same text; target: at least 2x)"
echo

echo "## 3. truncate and fit on a 10,000-message session, against count on it"
s=$DIR/session_10k.json
echo "input: $(mb "$s") MB, $("$CTX" count --output total "$s") tokens"
echo "(each command alternates with count, $RUNS pairs; ratio: median of the pairs' ratios)"
read -r c1 t_trunc r_trunc < <(paired "$RUNS" "$CTX count $s" "$CTX truncate --budget 100000 $s")
read -r c2 t_fit r_fit < <(paired "$RUNS" "$CTX count $s" "$CTX fit --budget 100000 $s")
read -r c3 t_fit_tr r_fit_tr < <(paired "$RUNS" "$CTX count $s" "$CTX fit --budget 100000 --stages truncate $s")
echo "truncate --budget 100000:       ${t_trunc} ms against count ${c1} ms   ratio ${r_trunc}x (target: at most 1.5x)"
echo "fit --budget 100000:            ${t_fit} ms against count ${c2} ms   ratio ${r_fit}x (target: at most 1.5x)"
echo "fit --stages truncate:          ${t_fit_tr} ms against count ${c3} ms   ratio ${r_fit_tr}x"
echo "peak memory, fit:               $(peak_mb "$CTX" fit --budget 100000 "$s") MB (target: at most 3 x $(mb "$s") + 30 MB)"
echo

echo "## 4. a JSON Lines batch on every core, order preserved"
b=$DIR/batch.jsonl
BRUNS=$(( RUNS < 5 ? RUNS : 5 ))
read -r t1 tn r_count < <(paired "$BRUNS" "$CTX count -c -j 1 $b" "$CTX count -c $b")
read -r f1 fn r_fit < <(paired "$BRUNS" "$CTX fit -c --budget 2000 -j 1 $b" "$CTX fit -c --budget 2000 $b")
echo "input: $(mb "$b") MB, $(wc -l < "$b") documents; $BRUNS pairs per case (one thread, then all)"
echo "count, one thread:              ${t1} ms"
echo "count, $(nproc) threads:              ${tn} ms   speed-up $(awk -v r="$r_count" 'BEGIN {printf "%.2f", 1/r}')x (target: at least 1.6x)"
echo "fit --budget 2000, one thread:  ${f1} ms"
echo "fit --budget 2000, $(nproc) threads:  ${fn} ms   speed-up $(awk -v r="$r_fit" 'BEGIN {printf "%.2f", 1/r}')x"
cmp <("$CTX" count -c -j 1 "$b") <("$CTX" count -c "$b") > /dev/null && echo "outputs of one and $(nproc) threads are identical"
echo "peak memory, count:             $(peak_mb "$CTX" count -c "$b") MB"
echo

echo "## 5. pathological runs (one 1 MB message)"
for r in a spaces newlines digits; do
  f=$DIR/run_$r.json
  t=$(median_ms "$CTX" count "$f")
  printf '%-10s %8s ms  %8s tokens  peak %s MB   (target: under 1000 ms)\n' "$r" "$t" \
    "$("$CTX" count --output total "$f" 2>/dev/null || echo error)" "$(peak_mb "$CTX" count "$f")"
done
