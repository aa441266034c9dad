// Focal temperature scaling's validation scores over a (gamma, T) grid, fused per sample
// (focalcal.calibration._focal_grid, which holds the reference implementation in torch).
//
// For one sample and one inverse temperature b, with c_k = z_k - z_top (<= 0) and d_k = b c_k:
//   R      = log sum_{k != top} e^{d_k}   (shifted by the second largest, so exact however small)
//   log(1 - q_top) = R - softplus(R),  rho_top = softplus(R) e^{-R}  (exact when q_top rounds to 1)
//   k != top: log q_k = d_k - softplus(R), rho_k = q_k (-log q_k) / (1 - q_k),
//             rel_k = log(1 - q_k) - log(1 - q_top)
// and per gamma, relative to the top class's h^gamma:
//   term_k = exp(max(d_k - gamma rel_k, -80)) / (1 + gamma rho_k)    (top: 1 / (1 + gamma rho_top))
//   confidence    = term_top / sum_k term_k
//   log Psi_label = d_y - gamma rel_y - log1p(gamma rho_y) - log sum_k term_k.
// The torch path computes the same numbers through (gamma, T, rows, K) buffers that pass
// through memory several times per operation; here a sample's K classes stay in a small
// per-thread buffer (one pass of the gamma-free terms per T, one pass per gamma), vectorised
// over classes with ATen's at::vec (SLEEF exp/log), threads over samples.

#include <torch/extension.h>

#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace {

using at::vec::Vectorized;
using V = Vectorized<float>;
constexpr int64_t W = V::size();
constexpr float kLogFloor = -80.0f;  // exp(-80) ~ 1.8e-35: a floor for terms relative to the top class's

float softplus(float x) { return x > 0.0f ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

float horizontal_sum(const V& v) {
  float lanes[W];
  v.store(lanes);
  float total = 0.0f;
  for (int64_t i = 0; i < W; ++i) total += lanes[i];
  return total;
}

}  // namespace

// centred (N, K) float32: z - z_top; second (N,): z_second - z_top; top, label (N,) int64;
// gammas (G,), betas (T,) float32 (1 / temperature). Returns confidence and log Psi_label, (G, T, N).
std::vector<at::Tensor> focal_grid(const at::Tensor& centred, const at::Tensor& second, const at::Tensor& top,
                                   const at::Tensor& label, const at::Tensor& gammas, const at::Tensor& betas) {
  TORCH_CHECK(centred.dim() == 2 && centred.scalar_type() == at::kFloat && centred.is_contiguous(),
              "focal_grid: centred must be a contiguous float32 (N, K) tensor");
  const int64_t n = centred.size(0), k_classes = centred.size(1);
  const int64_t n_gammas = gammas.numel(), n_temps = betas.numel();
  const auto second_c = second.contiguous(), top_c = top.contiguous(), label_c = label.contiguous();
  const auto gammas_c = gammas.contiguous(), betas_c = betas.contiguous();
  auto confidence = at::empty({n_gammas, n_temps, n}, centred.options());
  auto log_psi_label = at::empty({n_gammas, n_temps, n}, centred.options());
  const float* c_all = centred.data_ptr<float>();  // rows of K
  const float* second_p = second_c.data_ptr<float>();
  const int64_t* top_p = top_c.data_ptr<int64_t>();
  const int64_t* label_p = label_c.data_ptr<int64_t>();
  const float* gamma_p = gammas_c.data_ptr<float>();
  const float* beta_p = betas_c.data_ptr<float>();
  float* conf_p = confidence.data_ptr<float>();
  float* label_out = log_psi_label.data_ptr<float>();
  // Classes are padded to whole vectors (c = -inf there); the padding lanes of the last vector
  // are zeroed before each sum, so every class runs through the vector code.
  const int64_t padded = (k_classes + W - 1) / W * W, last = padded - W, last_count = k_classes - last;
  const float inf = std::numeric_limits<float>::infinity();

  at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> c(padded, -inf), others(padded, -inf), d(padded), rel(padded), rho(padded);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t t_index = top_p[i], y = label_p[i];
      // z_k - z_second, -inf at the top class: e^{b (.)} sums the other classes with no overflow
      std::copy(c_all + i * k_classes, c_all + (i + 1) * k_classes, c.begin());
      for (int64_t j = 0; j < k_classes; ++j) others[j] = c[j] - second_p[i];
      others[t_index] = -inf;
      for (int64_t t = 0; t < n_temps; ++t) {
        const float b = beta_p[t];
        const V vb(b);
        // e_k = e^{(z_k - z_second) b}: their sum is R's, and q_k = e_k e^{second b - softplus(R)}
        V acc(0.0f);
        for (int64_t j = 0; j < padded; j += W) {
          const V e = (V::loadu(others.data() + j) * vb).exp();
          e.store(rho.data() + j);  // kept in rho's buffer until q_k is formed
          acc = acc + e;
        }
        const float log_rest = second_p[i] * b + std::log(horizontal_sum(acc));  // R (the sum is >= 1)
        const float log_norm = softplus(log_rest);
        const float log_one_minus_top = log_rest - log_norm;
        const float top_rho = log_rest < -30.0f ? 1.0f - 0.5f * std::exp(log_rest) : log_norm * std::exp(-log_rest);
        const V vlog_norm(log_norm), vlog_omt(log_one_minus_top), one(1.0f);
        const V to_q(std::exp(second_p[i] * b - log_norm));
        // gamma-free terms per class (the top's are set after the loop)
        for (int64_t j = 0; j < padded; j += W) {
          const V dv = V::loadu(c.data() + j) * vb;
          const V q = V::loadu(rho.data() + j) * to_q;  // 0 where it underflows: rho is then 0
          (q * (vlog_norm - dv) / (one - q)).store(rho.data() + j);  // q (-log q) / (1 - q)
          ((-q).log1p() - vlog_omt).store(rel.data() + j);
          dv.store(d.data() + j);
        }
        d[t_index] = 0.0f;
        rel[t_index] = 0.0f;
        rho[t_index] = top_rho;
        const V floor_v(kLogFloor);
        for (int64_t g = 0; g < n_gammas; ++g) {
          const float gamma = gamma_p[g];
          const V vg(gamma);
          V sum_v(0.0f);
          for (int64_t j = 0; j < padded; j += W) {
            const V x = at::vec::maximum(V::loadu(d.data() + j) - vg * V::loadu(rel.data() + j), floor_v);
            const V term = x.exp() / (one + vg * V::loadu(rho.data() + j));
            sum_v = sum_v + (j == last ? V::set(V(0.0f), term, last_count) : term);
          }
          const float normaliser = horizontal_sum(sum_v);
          const int64_t out = (g * n_temps + t) * n + i;
          conf_p[out] = (1.0f / (1.0f + gamma * top_rho)) / normaliser;
          label_out[out] = d[y] - gamma * rel[y] - std::log1p(gamma * rho[y]) - std::log(normaliser);
        }
      }
    }
  });
  return {confidence, log_psi_label};
}
