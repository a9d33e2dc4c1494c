#!/usr/bin/env bash
# The byte-level BPE tokenizer (tokenizer.ggml.model gpt2, Llama 3's pre-tokenizer) against
# independent Python references (tests/model/bpe.py, Debian's python3-regex for \p{L} and
# friends): the C Unicode classes against regex's for every code point this Python's
# unicodedata assigns; the C pre-tokenizer's splits of 4000 random strings (ASCII, white space
# of every kind, accented letters, CJK, emoji, combining marks, digits of other scripts,
# contractions in any case) identical to regex.findall of the Llama 3 pattern; then a model
# written by `--make-gguf ... --vocab-type gpt2` tokenizes 600 random strings (special tokens
# among them) to the ids a Python BPE over the file's own vocabulary and merges computes, and
# decodes them back to the text; vkrt-service runs it with a prompt (its 'prompt ids:' are
# BOS and the Python ids, its text the generated ids decoded) and stops at EOT and at EOS (the
# file patched so that a token the model generates is one).
. "$(dirname "$0")/lib.sh"
require_llama
/usr/bin/python3 -c "import regex" 2>/dev/null ||
  { echo "skipped: the Debian package python3-regex (the reference's \\p{L}) is not installed"; exit 77; }
exec /usr/bin/python3 "$root/tests/model/bpe.py" "$builddir"
