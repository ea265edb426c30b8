#!/usr/bin/env bash
# Benchmarks of SPEC.md §6, with their baselines measured in the same run.
#
#   bench/run.sh            # everything (builds release binaries, generates inputs once)
#   RUNS=5 bench/run.sh     # fewer repetitions
#   bench/run.sh 5 6 7      # only these sections (8: Responses bodies)
#
# Not run by CI: timings on a shared machine are noisy, so every case is run several times and
# the median is reported, next to a baseline measured by this same script. Inputs are generated
# deterministically by examples/bench_inputs.rs into target/bench/ (about 560 MB).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-11}
DIR=target/bench
SECTIONS=" $* "

# want N: true when section N is to be run (all of them when none is named).
want() { [ "$SECTIONS" = "  " ] || [[ "$SECTIONS" == *" $1 "* ]]; }

echo "# building release binaries" >&2
cargo build --release --locked --quiet --bin ctx --example bench_inputs --example tiktoken_baseline
CTX=target/release/ctx
BASE=target/release/examples/tiktoken_baseline

# (messages_1m.json is the last file written.)
if [ ! -f "$DIR/messages_1m.json" ] || [ examples/bench_inputs.rs -nt "$DIR/messages_1m.json" ]; then
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

# run_stats CMD...: one run's wall time in seconds, peak resident memory in MB and exit code.
run_stats() {
  /usr/bin/time -f '%e %M %x' "$@" 2>&1 > /dev/null | tail -1 | awk '{printf "%s %.1f %s\n", $1, $2/1024, $3}' || true
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}'; }
mb() { awk -v b="$(stat -c %s "$1")" 'BEGIN {printf "%.1f", b/1048576}'; }

# count_case FILE: times `ctx count FILE` (median, also left in $T_COUNT) and says so with the
# input's size and tokens.
count_case() {
  T_COUNT=$(median_ms "$CTX" count "$1")
  echo "input: $(stat -c %s "$1") bytes, $("$CTX" count --output total "$1") tokens"
  echo "ctx count:                         ${T_COUNT} ms   (target: at most 10 ms)"
}

# session_case FILE: truncate and fit of a long session, each against count on it.
session_case() {
  local s=$1 c1 t_trunc r_trunc c2 t_fit r_fit
  echo "input: $(mb "$s") MB, $("$CTX" count --output total "$s") tokens"
  echo "(each command alternates with count, $RUNS pairs; ratio: median of the pairs' ratios)"
  read -r c1 t_trunc r_trunc < <(paired "$RUNS" "$CTX count $s" "$CTX truncate --budget 100000 $s")
  read -r c2 t_fit r_fit < <(paired "$RUNS" "$CTX count $s" "$CTX fit --budget 100000 $s")
  echo "truncate --budget 100000:       ${t_trunc} ms against count ${c1} ms   ratio ${r_trunc}x (target: at most 1.5x)"
  echo "fit --budget 100000:            ${t_fit} ms against count ${c2} ms   ratio ${r_fit}x (target: at most 1.5x)"
}

echo "machine: $(uname -sm), $(nproc) CPUs, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
echo "ctx: $(git describe --always --dirty 2>/dev/null || echo unknown), runs per case: $RUNS (medians)"
echo

if want 1; then
  echo "## 1. ctx count on a 20 KB chat, whole process"
  chat=$DIR/chat_20k.json
  count_case "$chat"
  t_ctx=$T_COUNT
  t_base=$(median_ms "$BASE" chat "$chat")
  echo "baseline, tiktoken-rs (same chat): ${t_base} ms   ratio $(ratio "$t_base" "$t_ctx")x"
  echo "peak memory, ctx count:            $(peak_mb "$CTX" count "$chat") MB"
  echo
fi

if want 2; then
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
fi

if want 3; then
  echo "## 3. truncate and fit on a 10,000-message session, against count on it"
  s=$DIR/session_10k.json
  session_case "$s"
  read -r c3 t_fit_tr r_fit_tr < <(paired "$RUNS" "$CTX count $s" "$CTX fit --budget 100000 --stages truncate $s")
  echo "fit --stages truncate:          ${t_fit_tr} ms against count ${c3} ms   ratio ${r_fit_tr}x"
  echo "peak memory, fit:               $(peak_mb "$CTX" fit --budget 100000 "$s") MB (target: at most 3 x $(mb "$s") + 30 MB)"
  echo
fi

if want 4; then
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
fi

if want 5; then
  echo "## 5. pathological runs (one 1 MB message)"
  for r in a spaces newlines digits; do
    f=$DIR/run_$r.json
    t=$(median_ms "$CTX" count "$f")
    printf '%-10s %8s ms  %8s tokens  peak %s MB   (target: under 1000 ms)\n' "$r" "$t" \
      "$("$CTX" count --output total "$f" 2>/dev/null || echo error)" "$(peak_mb "$CTX" count "$f")"
  done
  echo
fi

if want 6; then
  echo "## 6. peak memory on one-message documents that are one run of a character"
  echo "(MB of peak resident memory, one run each; count and prune pass the run through, truncate and"
  echo "fit --budget 1000 --partial --no-keep-task cut it; target: at most 3 x document + 30 MB)"
  printf '%-8s %6s %8s %9s %9s %9s %9s %9s\n' run MB "count s" count prune truncate fit limit
  for size in 16 64; do
    for kind in a spaces newlines digits cjk; do
      f=$DIR/run${size}m_$kind.json
      limit=$(awk -v b="$(stat -c %s "$f")" 'BEGIN {printf "%.1f", 3 * b / 1048576 + 30}')
      read -r secs count_mb count_x < <(run_stats "$CTX" count "$f")
      read -r _ prune_mb prune_x < <(run_stats "$CTX" prune "$f")
      read -r _ trunc_mb trunc_x < <(run_stats "$CTX" truncate --budget 1000 --partial --no-keep-task "$f")
      read -r _ fit_mb fit_x < <(run_stats "$CTX" fit --budget 1000 --partial --no-keep-task "$f")
      verdict=$(awk -v l="$limit" -v a="$count_mb" -v b="$prune_mb" -v c="$trunc_mb" -v d="$fit_mb" \
        'BEGIN {m = a; if (b > m) m = b; if (c > m) m = c; if (d > m) m = d; print (m <= l) ? "within" : "OVER"}')
      [ "$count_x$prune_x$trunc_x$fit_x" = 0000 ] || verdict="$verdict (exit codes $count_x $prune_x $trunc_x $fit_x)"
      printf '%-8s %6s %8s %9s %9s %9s %9s %9s  %s\n' "$kind" "$(mb "$f")" "$secs" "$count_mb" "$prune_mb" \
        "$trunc_mb" "$fit_mb" "$limit" "$verdict"
    done
  done
  echo
fi

if want 8; then
  echo "## 8. OpenAI Responses bodies: sections 1 and 3 on the same conversations as Responses items"
  count_case "$DIR/responses_20k.json"
  session_case "$DIR/responses_session_10k.json"
  echo
fi

if want 7; then
  echo "## 7. memory per message: documents of tiny messages ({\"role\":\"user\",\"content\":\"hi\"}, then the assistant's \"ok\")"
  echo "(bytes per message: peak resident memory over that of a one-message document, per message)"
  read -r _ base_count _ < <(run_stats "$CTX" count "$DIR/messages_1.json")
  read -r _ base_fit _ < <(run_stats "$CTX" fit "$DIR/messages_1.json")
  printf '%-10s %6s %9s %12s %9s %12s\n' messages MB "count MB" "count B/msg" "fit MB" "fit B/msg"
  for n in 100k 1m; do
    f=$DIR/messages_$n.json
    msgs=$([ "$n" = 100k ] && echo 100000 || echo 1000000)
    read -r _ count_mb _ < <(run_stats "$CTX" count "$f")
    read -r _ fit_mb _ < <(run_stats "$CTX" fit "$f")
    per() { awk -v p="$1" -v b="$2" -v n="$msgs" 'BEGIN {printf "%.0f", (p - b) * 1048576 / n}'; }
    printf '%-10s %6s %9s %12s %9s %12s\n' "$msgs" "$(mb "$f")" "$count_mb" "$(per "$count_mb" "$base_count")" \
      "$fit_mb" "$(per "$fit_mb" "$base_fit")"
  done
  echo "(a message's document bytes: $(awk -v b="$(stat -c %s "$DIR/messages_1m.json")" 'BEGIN {printf "%.1f", b / 1e6}') on average)"
fi
