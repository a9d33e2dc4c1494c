// Element d of one head's attention merged from its n_live splits, split after split: the
// splits' weighted V o from part[e0 head_dim], their max score m and exp sum l in (m, l)
// pairs from part[ml]; with M the largest m, sum e^(m - M) o[d] / sum e^(m - M) l, 0 when no
// split is live. attention_combine.comp (few live splits) and attention_split.comp (the
// last split merging, direct 2) take it. Needs `float part[]` and LOW declared before it.
float attention_merge(uint ml, uint e0, uint head_dim, uint d, uint n_live) {
  float mx = LOW;
  for (uint s = 0u; s < n_live; s++)
    mx = max(mx, part[ml + 2u * s]);
  float l = 0.0, o = 0.0;
  for (uint s = 0u; s < n_live; s++) {
    float w = exp(part[ml + 2u * s] - mx);
    l += w * part[ml + 2u * s + 1u];
    o += w * part[(e0 + s) * head_dim + d];
  }
  return n_live > 0u ? o / l : 0.0;
}
