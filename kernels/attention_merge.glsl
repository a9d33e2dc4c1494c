// Decode attention's splits merged in one fixed order, shared by attention_combine.comp
// (where the live splits are few) and matvec_q8x.comp ATTN (the product that merges them as
// it reads x), so both give the same bits: over the n_live splits of a head whose partials
// start at split e0 (each split's max score m and exp sum l at part[ml + 2 s], its weighted V
// o at part[(e0 + s) head_dim ..]), M the largest m, x[d] = sum_s e^(m_s - M) o_s[d] /
// sum_s e^(m_s - M) l_s, both sums in split order and without contraction (precise); 0 when
// no split is live.
// MERGE_VALUES consecutive elements from d0. Needs `float part[]` declared before it.
void attention_merge(uint ml, uint e0, uint head_dim, uint d0, uint n_live,
                     out float x[MERGE_VALUES]) {
  float mx = -3.402823466e38;
  for (uint s = 0u; s < n_live; s++)
    mx = max(mx, part[ml + 2u * s]);
  precise float l = 0.0;
  precise float o[MERGE_VALUES];
  for (uint i = 0u; i < MERGE_VALUES; i++)
    o[i] = 0.0;
  for (uint s = 0u; s < n_live; s++) {
    float w = exp(part[ml + 2u * s] - mx);
    l += w * part[ml + 2u * s + 1u];
    for (uint i = 0u; i < MERGE_VALUES; i++)
      o[i] += w * part[(e0 + s) * head_dim + d0 + i];
  }
  for (uint i = 0u; i < MERGE_VALUES; i++)
    x[i] = n_live > 0u ? o[i] / l : 0.0;
}
