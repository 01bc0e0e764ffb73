#!/usr/bin/env bash
# README.md's help blocks are what rtvd prints (the ctest `readme_help`): the fenced block that starts with
# `usage: rtvd render [flags]` is `rtvd render --help` line for line, and the same for gui. The help is read
# through a pipe, so at 100 columns, as a reader without a terminal sees it. Prints a diff per block that
# differs (apply it to README.md) and exits 1; quiet and 0 when they agree.
#   tools/check-readme-help.sh [SOURCE_DIR [RTVD_BINARY]]
set -uo pipefail
root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
rtvd=${2:-$root/build/rtvd}
[[ -x $rtvd ]] || { echo "check-readme-help: no rtvd binary at $rtvd" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for command in render gui; do
  usage="usage: rtvd $command [flags]"
  # The lines of the fenced block whose first line is the usage line.
  awk -v first="$usage" '
    /^```/ { if (found) exit; inside = !inside; line = 0; next }
    inside { if (++line == 1 && $0 == first) found = 1; if (found) print }
  ' "$root/README.md" >"$tmp/readme"
  if [[ ! -s $tmp/readme ]]; then
    echo "README.md: no fenced block starting with '$usage' (paste the output of rtvd $command --help)"
    status=1
    continue
  fi
  "$rtvd" "$command" --help >"$tmp/help" 2>&1 || { echo "rtvd $command --help failed"; status=1; continue; }
  if ! diff -u --label "README.md: $usage" --label "rtvd $command --help" "$tmp/readme" "$tmp/help"; then status=1; fi
done
exit $status
