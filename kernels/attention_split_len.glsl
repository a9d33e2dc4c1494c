// How the split passes of vkrt_op_attention (attention_split.comp, attention_rows.comp) cut a
// query of kv_len tokens, and so where attention_combine.comp finds their partials: n_split
// splits of equal length, min_split tokens at least (the split the plan would give a cache
// that long), so a short query in a long cache still spreads over the splits; those starting
// at or past kv_len are empty.
uint attention_split_len(uint kv_len, uint n_split, uint min_split) {
  return max((kv_len + n_split - 1u) / n_split, min_split);
}
