#!/usr/bin/env bash
# The include rules of docs/architecture.md, checked on the source tree (the ctest `layers`):
#   - base/ (the ground floor) includes nothing of rtvd; every folder may include base/;
#   - kernels/ includes nothing of pipeline/, bench/ or app/; app/ nothing of kernels/; pipeline/ nothing of
#     bench/ or app/; bench/ nothing of app/;
#   - pipeline/model_files (the checkpoint and config readers) includes nothing but base/ and itself;
#   - pipeline/text (the tokenizer) includes nothing of pipeline/ but model_files (JSON), and nothing of
#     kernels/; pipeline/backends, pipeline/graph and pipeline/models do not include it;
#   - no folder includes a folder that includes it back, directly or around a longer cycle (folders: base,
#     kernels/<op>, kernels/common, pipeline, pipeline/<role>, pipeline/backends/cuda, bench, app, app/gui,
#     app/common).
# Prints each violation and exits 1; quiet and 0 when the tree keeps the rules.
set -uo pipefail
root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$root" || exit 2
files=$(find base kernels pipeline bench app -type f \( -name '*.h' -o -name '*.cuh' -o -name '*.cpp' -o -name '*.cu' \) | sort)
# "file target" per quoted include; a target not found from the root is taken as the including folder's.
pairs=$(grep -H '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' $files |
        sed 's/^\([^:]*\):[^"]*"\([^"]*\)".*/\1 \2/')
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
status=0
while read -r file target; do
  from=${file%/*}
  if [[ ! -f $target ]]; then
    target="$from/$target"
    [[ -f $target ]] || continue  # generated (build_config.h) or a system header
  fi
  to=${target%/*}
  bad=0
  case "$from>$to" in
    *'>'base) ;;
    base'>'*) bad=1 ;;
    kernels*'>'pipeline* | kernels*'>'bench* | kernels*'>'app* | app*'>'kernels* | pipeline*'>'bench* | \
      pipeline*'>'app* | bench*'>'app*) bad=1 ;;
    pipeline/model_files'>'*) [[ $to == pipeline/model_files ]] || bad=1 ;;
    pipeline/text'>'*) [[ $to == pipeline/text || $to == pipeline/model_files ]] || bad=1 ;;
    pipeline/backends*'>'pipeline/text | pipeline/graph'>'pipeline/text | pipeline/models'>'pipeline/text) bad=1 ;;
  esac
  if ((bad)); then
    echo "layers: $file includes $target: $from may not include $to"
    status=1
  fi
  [[ $from != "$to" ]] && echo "$from $to" >>"$edges"
done <<<"$pairs"
# tsort names the folders on a cycle of the folder graph.
cycle=$(sort -u "$edges" | tsort 2>&1 >/dev/null)
if [[ -n $cycle ]]; then
  echo "layers: folders include each other in a cycle:"
  echo "$cycle" | grep -v 'input contains a loop'
  status=1
fi
exit $status
