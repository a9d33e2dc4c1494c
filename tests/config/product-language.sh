#!/usr/bin/env bash
# The tree speaks of the product: code, comments, docs, tests and tools name no issue numbers,
# work sessions or work periods, worktrees or scratch branches, time allowances, or the
# folders and settings a run on a borrowed GPU machine was carried in. (History, with dates,
# belongs in CHANGELOG.md, which is not checked.) A control line of each kind must be caught,
# so the check cannot pass by matching nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
patterns=(
  '\bissues? ?#?[0-9]+'                        # issue 30, issue #30
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
)
regex=$(IFS='|'; echo "${patterns[*]}")
controls=("as issue 30 asks" "fixed by this issue" "in this session" "in the helper's worktree"
          "the second work period" "the GPU-time allowance" "the device budget left"
          "in one device call" "on the scratch branch" "built on exp2" "packed in .gpu-final"
          'carry [".gl"]' ". .gl/vk-env.sh; tools/gpu-test.sh run")
for c in "${controls[@]}"; do
  grep -qiE "$regex" <<< "$c" || { echo "the check does not catch '$c'"; exit 1; }
done
cd "$root"
hits=$(git ls-files --cached --others --exclude-standard -z -- . ':!CHANGELOG.md' ':!tests/data' \
         ':!tests/config/product-language.sh' | xargs -0 grep -nIiE "$regex" || true)
if [ -n "$hits" ]; then
  echo "$hits"
  echo "process talk in the tree (above): say it in product terms, or move the history to CHANGELOG.md"
  exit 1
fi
echo "product language: no issue numbers, sessions, worktrees, work periods, allowances or carried folders in $(git ls-files | wc -l) files"
