// The cos and sin of RoPE's angle for pair p at position pos (rope.comp, set_rows.comp's
// ROPE form): theta = pos * freq_scale * theta_scale^p / factor (ggml's freq_factors, 1
// without them), reduced to [-pi, pi] in two steps (2 pi split into a float and its
// remainder) before cos and sin, whose accuracy GPUs guarantee only there: positions reach
// tens of thousands of radians.
const float TWO_PI_HI = 6.28318548202514648;   // float(2 pi)
const float TWO_PI_LO = -1.7484556e-7;          // 2 pi - TWO_PI_HI

vec2 rope_cos_sin(int pos, uint p, float theta_scale, float freq_scale, bool has_factor,
                  float factor) {
  float theta = float(pos) * freq_scale * pow(theta_scale, float(p));
  if (has_factor)
    theta /= factor;
  float k = round(theta * (1.0 / TWO_PI_HI));
  theta = fma(-k, TWO_PI_LO, fma(-k, TWO_PI_HI, theta));
  return vec2(cos(theta), sin(theta));
}

// The pair (x0, x1) turned by the angle whose cos and sin are cs: (x0 c - x1 s, x0 s + x1 c)
vec2 rope_turn(float x0, float x1, vec2 cs) {
  return vec2(x0 * cs.x - x1 * cs.y, x0 * cs.y + x1 * cs.x);
}
