#!/usr/bin/env bash
# Reads a Ninja build's output on stdin, keeps all of it in the log file $1, and shows one line of
# progress: on a terminal a single line rewritten in place ("[37/162] launcher/agent/agent.cpp"),
# elsewhere (a CI log) a line at every tenth of the build. Exits with 0; the caller checks the
# build's own status (set -o pipefail).
set -uo pipefail
log=$1
: >"$log"
tty=0
[[ -t 1 ]] && tty=1
shown=-1
last=""
while IFS= read -r line; do
  printf '%s\n' "$line" >>"$log"
  [[ $line =~ ^\[([0-9]+)/([0-9]+)\]\ (.*)$ ]] || continue
  done_n=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]}
  what=${BASH_REMATCH[3]##* }  # the last word: the file being built or linked
  last="[$done_n/$total]"
  if ((tty)); then
    printf '\r\033[K  [%s/%s] %.70s' "$done_n" "$total" "$what"
  elif ((done_n * 10 / total != shown)); then
    shown=$((done_n * 10 / total))
    printf '  [%s/%s] %s\n' "$done_n" "$total" "$what"
  fi
done
((tty)) && [[ -n $last ]] && printf '\r\033[K  %s done\n' "$last"
exit 0
