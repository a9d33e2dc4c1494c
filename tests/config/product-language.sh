#!/usr/bin/env bash
# The tree speaks of the product: code, comments, docs, tests and tools name no issue numbers,
# work sessions or work periods, worktrees or scratch branches, time allowances, the folders
# and settings a run on a borrowed GPU machine was carried in, or paths of the machine the
# tree was written on (/work/, /root/, ../shared); CHANGELOG.md, the dated history, included.
# A control line of each kind must be caught, so the
# check cannot pass by matching nothing. And the documents point only inside the repository:
# every Markdown link and every *.md a document or a source file names is a file of the tree.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
patterns=(
  '\bissues? ?#?[0-9]+'                        # the word and a number, '#' or not
  '\b(this|the|that) (issue|session|work item)\b'
  '\bsessions?\b'
  '\bworktrees?\b'
  '\bwork periods?\b'
  '\ballowances?\b'                             # GPU-time allowance
  '\bdevice (budget|tool)\b'
  '\bone device call\b'
  '\bscratch branch(es)?\b'
  '\bexp[0-9]+\b'                               # experiment branches exp2, exp3
  '(^|[^A-Za-z0-9_/])\.gpu-[a-z0-9]'            # the carried folders .gpu-<name>
  '\bcarry \['
  '\.gl/vk-env'
  '(^|[^A-Za-z0-9_.])/(work|root)/'
  '\.\./shared/'
)
regex=$(IFS='|'; echo "${patterns[*]}")
# The controls are stored in ROT13, so the check's own file holds none of the phrases it forbids.
controls=()
while IFS= read -r line; do controls+=("$(tr A-Za-z N-ZA-Mn-za-m <<< "$line")"); done <<'CONTROLS'
nf vffhr 30 nfxf
frr vffhr#12
svkrq ol guvf vffhr
va guvf frffvba
va gur urycre'f jbexgerr
gur frpbaq jbex crevbq
gur TCH-gvzr nyybjnapr
gur qrivpr ohqtrg yrsg
va bar qrivpr pnyy
ba gur fpengpu oenapu
ohvyg ba rkc2
cnpxrq va .tch-svany
pneel [".ty"]
. .ty/ix-rai.fu; gbbyf/tch-grfg.fu eha
frr /jbex/znva/ERNQZR.zq
va ../funerq/qbpf/qrfvta.zq
CONTROLS
for c in "${controls[@]}"; do
  grep -qiE "$regex" <<< "$c" || { echo "the check does not catch '$c'"; exit 1; }
done
cd "$root"
hits=$(git ls-files --cached --others --exclude-standard -z -- . ':!tests/data' \
         ':!tests/config/product-language.sh' | xargs -0 grep -nIiE "$regex" || true)
if [ -n "$hits" ]; then
  echo "$hits"
  echo "process talk in the tree (above): say it in product terms, or move the history to CHANGELOG.md"
  exit 1
fi
# Links: relative to the document's folder, or to the tree's root. Documents: Markdown links
# and *.md names; code (C, GLSL, Python, Kconfig): the *.md files its comments name.
refs() {
  case $1 in
  *.md) grep -oE '\]\([^) ]+\)|[$A-Za-z0-9_./-]+\.md\b' "$1" | sed -E 's/^\]\((.*)\)$/\1/' ;;
  *) grep -oE '[$A-Za-z0-9_./-]+\.md\b' "$1" || true ;;
  esac
}
bad=""
files=$(git ls-files --cached --others --exclude-standard)
while IFS= read -r doc; do
  dir=$(dirname "$doc")
  while IFS= read -r ref; do
    case $ref in http://* | https://* | mailto:* | \#* | *'$'* | /*) continue ;; esac  # URLs, $VAR/x.md, /tmp/x.md
    ref=${ref%%#*}
    [ -n "$ref" ] || continue
    for cand in "$dir/$ref" "$ref"; do
      cand=$(realpath -m --relative-to=. "$cand")
      grep -qxF -- "$cand" <<< "$files" && continue 2
      [ -d "$cand" ] && git ls-files --error-unmatch -- "$cand" > /dev/null 2>&1 && continue 2
    done
    bad+="$doc: $ref"$'\n'
  done < <(refs "$doc")
done < <(grep -E '\.(md|c|h|comp|py)$|(^|/)Kconfig$' <<< "$files" | grep -v '^tests/data/')
if [ -n "$bad" ]; then
  printf '%s' "$bad"
  echo "documents point at files that are not in the tree (above)"
  exit 1
fi
echo "product language: no issue numbers, sessions, worktrees, work periods, allowances, carried folders or machine paths in $(wc -l <<< "$files") files; every document's link is in the tree"
