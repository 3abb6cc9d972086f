#pragma once
// Test-only naive float64 attention: plain triple loops, no Eigen, no tiling, no shared code with the oracle's
// kernels, so it is an independent check of them. Same conventions as reference.hpp (GQA kv head = h / (H/Hkv),
// causal = key j visible to query i iff j <= i, empty row: lse = -inf, out = 0).

#include <cmath>
#include <limits>
#include <vector>

#include "hcpsim/oracles/inputs.hpp"
#include "hcpsim/oracles/reference.hpp"

namespace hcpsim::test {

inline AttentionOutputs naive_attention(const AttentionInputs& in, bool causal, double scale) {
  const int64_t B = in.q.batch(), S = in.q.rows(), H = in.q.heads(), Hkv = in.k.heads();
  const int64_t dk = in.q.width(), dv = in.v.width(), group = H / Hkv;
  AttentionOutputs r;
  r.out = HostTensor(B, S, H, dv);
  r.softmax_lse = HostTensor(B, S, H, 1);
  r.dq = HostTensor(B, S, H, dk);
  r.dk = HostTensor(B, S, Hkv, dk);
  r.dv = HostTensor(B, S, Hkv, dv);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < S; ++i) {
        const int64_t visible = causal ? i + 1 : S;
        std::vector<double> p(static_cast<size_t>(visible));
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < visible; ++j) {
          double s = 0;
          for (int64_t d = 0; d < dk; ++d) s += in.q(b, i, h, d) * in.k(b, j, g, d);
          p[static_cast<size_t>(j)] = s * scale;
          m = std::max(m, s * scale);
        }
        double l = 0;
        for (double& x : p) {
          x = std::exp(x - m);
          l += x;
        }
        r.softmax_lse(b, i, h, 0) = m + std::log(l);
        for (double& x : p) x /= l;
        for (int64_t d = 0; d < dv; ++d) {
          double o = 0;
          for (int64_t j = 0; j < visible; ++j) o += p[static_cast<size_t>(j)] * in.v(b, j, g, d);
          r.out(b, i, h, d) = o;
        }
        // backward of sum(dout * out)
        double delta = 0;
        for (int64_t d = 0; d < dv; ++d) delta += in.dout(b, i, h, d) * r.out(b, i, h, d);
        for (int64_t j = 0; j < visible; ++j) {
          const double pj = p[static_cast<size_t>(j)];
          double dp = 0;
          for (int64_t d = 0; d < dv; ++d) {
            dp += in.dout(b, i, h, d) * in.v(b, j, g, d);
            r.dv(b, j, g, d) += pj * in.dout(b, i, h, d);
          }
          const double ds = pj * (dp - delta);
          for (int64_t d = 0; d < dk; ++d) {
            r.dq(b, i, h, d) += scale * ds * in.k(b, j, g, d);
            r.dk(b, j, g, d) += scale * ds * in.q(b, i, h, d);
          }
        }
      }
    }
  }
  return r;
}

}  // namespace hcpsim::test
