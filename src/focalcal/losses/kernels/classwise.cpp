// Fused CPU forward + gradient of the class-wise losses (focalcal.losses._fused).
//
// One pass structure serves every loss that is a sum over classes of terms in log p_i:
// logits are read as (N, K, S) — S pixels (or, for classification, the samples after a
// transpose) in SIMD lanes, K classes strided by S — and per lane block
//   pass 1: max m, its class t (the "top"), and the second largest logit m2;
//   pass 2: R = sum_{k != t} exp(x_k - m2)  (>= 1: no underflow);
//           log(1 - p_t) = (m2 - m) + log R - log1p(exp(m2 - m) R)   exactly, for any logits;
//   pass 3: per class: log p, p, 1 - p (exact: p <= 1/2 but at t), the loss term and its
//           slope a_k = dL/dlog p_k (for t the finite b_t = a_t (1 - p_t) instead);
//   pass 4: the logit gradient a_k - p_k sum_{i != t} a_i - b_t p_k/(1 - p_t)  (k != t),
//           b_t - p_t sum_{i != t} a_i  (k = t).
// The Python side (``_classwise.py``) holds the reference implementation of the same
// formulas; tests compare the two and check this one with gradcheck.

#include <torch/extension.h>

#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace {

using at::vec::Vectorized;

enum Kind : int64_t { CROSS_ENTROPY = 0, DUAL_CROSS_ENTROPY = 1, DUAL_FOCAL = 2, SMOOTHED_FOCAL = 3 };

// What a loss term sees for one class k in every lane: masks (all bits set where true) for
// "k is the target" and "k is the top class", log p_k, p_k, 1 - p_k (exact; at the top it is
// the other classes' mass) and, for the top lanes, log(1 - p_top).
template <typename T>
struct Lanes {
  using V = Vectorized<T>;
  V is_y, is_top, log_p, p, q, log_q_top;

  // log(1 - p_k): log1p(-p) is exact off the top (p <= 1/2); only terms that need it pay for it.
  V log_q() const { return V::blendv((-p).log1p(), log_q_top, is_top); }
};

// base^exponent: a product for small integer exponents (exact, no log), else exp(e log base).
template <typename T, typename LogBase>
Vectorized<T> power(const Vectorized<T>& base, T exponent, const LogBase& log_base) {
  using V = Vectorized<T>;
  if (exponent == T(0)) return V(T(1));
  if (exponent == std::floor(exponent) && exponent <= T(8)) {
    V result = base;
    for (int i = 1; i < static_cast<int>(exponent); ++i) result = result * base;
    return result;
  }
  return (log_base() * V(exponent)).exp();
}

// Each term gives, per lane, the loss term of class k and its slope: a = dterm/dlog p_k off the
// top, b = a (1 - p_k) at the top (finite where a is not).
template <typename T>
struct CrossEntropyTerm {
  using V = Vectorized<T>;
  void operator()(const Lanes<T>& c, V& value, V& slope) const {
    const V zero(T(0));
    value = V::blendv(zero, -c.log_p, c.is_y);
    slope = V::blendv(zero, V::blendv(V(T(-1)), -c.q, c.is_top), c.is_y);
  }
};

template <typename T>
struct DualCrossEntropyTerm {  // -log z_y + beta sum_{i != y} log(alpha + z_i)
  using V = Vectorized<T>;
  T alpha, beta;
  void operator()(const Lanes<T>& c, V& value, V& slope) const {
    const V alpha_plus_p = c.p + V(alpha);
    const V other_slope = V(beta) * c.p / alpha_plus_p;
    value = V::blendv(alpha_plus_p.log() * V(beta), -c.log_p, c.is_y);
    const V target_slope = V::blendv(V(T(-1)), -c.q, c.is_top);
    slope = V::blendv(V::blendv(other_slope, other_slope * c.q, c.is_top), target_slope, c.is_y);
  }
};

template <typename T>
struct DualFocalTerm {  // -log z_y + alpha (1 - z_y)^gamma + sum_{i != y} [alpha z_i^gamma - beta log(rho - z_i)]
  using V = Vectorized<T>;
  T alpha, beta, gamma, rho;
  void operator()(const Lanes<T>& c, V& value, V& slope) const {
    const V one(T(1)), alpha_gamma(alpha * gamma);
    const T rho_minus_one = rho - T(1);
    const auto log_q = [&] { return c.log_q(); };
    const auto log_p = [&] { return c.log_p; };
    // true class: a = -1 - alpha gamma z (1 - z)^(gamma - 1), b = a (1 - z)
    V power_q, power_q_less_one;  // (1 - z)^gamma, (1 - z)^(gamma - 1)
    if (gamma >= T(1)) {
      power_q_less_one = power(c.q, gamma - T(1), log_q);
      power_q = power_q_less_one * c.q;
    } else {
      power_q = power(c.q, gamma, log_q);
      power_q_less_one = power_q / c.q;  // q >= 1/2 off the top; the top uses b
    }
    const V target_value = V(alpha) * power_q - c.log_p;
    const V target_a = -one - alpha_gamma * c.p * power_q_less_one;
    const V target_b = -c.q - alpha_gamma * c.p * power_q;
    // other classes: a = beta z/(rho - z) + alpha gamma z^gamma, b = a (1 - z); rho - z = (rho - 1) + q
    const V power_p = power(c.p, gamma, log_p);
    V other_value, ratio, ratio_times_q;
    if (rho_minus_one == T(0)) {
      other_value = V(alpha) * power_p - V(beta) * log_q();
      ratio = V(beta) * c.p / c.q;
      ratio_times_q = V(beta) * c.p;
    } else {
      const V distance = c.q + V(rho_minus_one);
      other_value = V(alpha) * power_p - V(beta) * distance.log();
      ratio = V(beta) * c.p / distance;
      ratio_times_q = ratio * c.q;
    }
    const V other_a = ratio + alpha_gamma * power_p;
    const V other_b = ratio_times_q + alpha_gamma * power_p * c.q;
    value = V::blendv(other_value, target_value, c.is_y);
    slope = V::blendv(V::blendv(other_a, other_b, c.is_top), V::blendv(target_a, target_b, c.is_top), c.is_y);
  }
};

template <typename T>
struct SmoothedFocalTerm {  // -w_i (1 - p_i)^gamma log p_i, w the smoothed one-hot target
  using V = Vectorized<T>;
  T gamma, other_weight, target_weight;
  void operator()(const Lanes<T>& c, V& value, V& slope) const {
    const V weighted = V::blendv(V(other_weight), V(target_weight), c.is_y) *
                       power(c.q, gamma, [&] { return c.log_q(); });
    const V neg_log_p = -c.log_p;
    value = weighted * neg_log_p;
    // a = -w g, g = (1 - p)^gamma (1 + gamma p (-log p)/(1 - p)) (mukhoti2020 Prop 1); b = a (1 - p)
    const V gamma_p_neg_log_p = V(gamma) * c.p * neg_log_p;
    const V a = -weighted * (V(T(1)) + gamma_p_neg_log_p / c.q);
    const V b = -weighted * (c.q + gamma_p_neg_log_p);
    slope = V::blendv(a, b, c.is_top);
  }
};

template <typename T, typename Term>
void classwise_kernel(const T* x, const int64_t* target, T* loss, T* grad, int64_t n_rows, int64_t k_classes,
                      int64_t lanes, const Term& term, T grad_scale) {
  using V = Vectorized<T>;
  constexpr int64_t W = V::size();
  // Below this 1 - p_top has lost digits (or is 0): p_k/(1 - p_top) then comes from logs.
  const T normal_rest = std::numeric_limits<T>::min() / std::numeric_limits<T>::epsilon();
  const int64_t blocks_per_row = (lanes + W - 1) / W;
  const int64_t grain = std::max<int64_t>(1, 32768 / (k_classes * W));
  at::parallel_for(0, n_rows * blocks_per_row, grain, [&](int64_t begin, int64_t end) {
    std::vector<T> probs(k_classes * W);  // exp(x_k - second), then p_k, for the block's lanes
    T buffer[W];
    for (int64_t block = begin; block < end; ++block) {
      const int64_t row = block / blocks_per_row, first = (block % blocks_per_row) * W;
      const int64_t count = std::min(W, lanes - first);
      const T* xb = x + row * k_classes * lanes + first;
      T* gb = grad == nullptr ? nullptr : grad + row * k_classes * lanes + first;
      auto load = [&](const T* ptr) { return count == W ? V::loadu(ptr) : V::loadu(ptr, count); };
      auto store = [&](const V& v, T* ptr) { count == W ? v.store(ptr) : v.store(ptr, count); };
      for (int64_t i = 0; i < W; ++i) buffer[i] = i < count ? static_cast<T>(target[row * lanes + first + i]) : T(0);
      const V y = V::loadu(buffer);

      // pass 1: max, its (first) class, second largest logit
      V m = load(xb), second(-std::numeric_limits<T>::infinity()), top(T(0));
      for (int64_t k = 1; k < k_classes; ++k) {
        const V v = load(xb + k * lanes);
        second = at::vec::maximum(second, at::vec::minimum(v, m));
        top = V::blendv(top, V(static_cast<T>(k)), v > m);
        m = at::vec::maximum(m, v);
      }
      // pass 2: the other classes' mass relative to the second largest logit (>= 1)
      V rest(T(0));
      for (int64_t k = 0; k < k_classes; ++k) {
        const V e = (load(xb + k * lanes) - second).exp();
        e.store(probs.data() + k * W);
        rest = rest + V::blendv(e, V(T(0)), top == V(static_cast<T>(k)));
      }
      const V gap = second - m;                      // <= 0
      const V log_sum = (gap.exp() * rest).log1p();  // log sum_k exp(x_k - m)
      const V log_q_top = gap + rest.log() - log_sum;
      const V q_top = log_q_top.exp(), p_top = (-log_sum).exp();
      const V to_p = (gap - log_sum).exp();  // p_k = exp(x_k - second) to_p off the top

      // pass 3: terms and slopes
      V total_loss(T(0)), total_a(T(0)), b_top(T(0));
      for (int64_t k = 0; k < k_classes; ++k) {
        Lanes<T> c;
        const V kv(static_cast<T>(k));
        c.is_top = top == kv;
        c.is_y = y == kv;
        c.log_p = load(xb + k * lanes) - m - log_sum;
        c.p = V::blendv(V::loadu(probs.data() + k * W) * to_p, p_top, c.is_top);
        c.q = V::blendv(V(T(1)) - c.p, q_top, c.is_top);
        c.log_q_top = log_q_top;
        V value, slope;
        term(c, value, slope);
        total_loss = total_loss + value;
        total_a = total_a + V::blendv(slope, V(T(0)), c.is_top);
        b_top = V::blendv(b_top, slope, c.is_top);
        if (gb != nullptr) {
          c.p.store(probs.data() + k * W);
          store(slope, gb + k * lanes);
        }
      }
      store(total_loss, loss + row * lanes + first);
      if (gb == nullptr) continue;
      // pass 4: the logit gradient a_k - p_k sum_{i != t} a_i - b_t p_k/(1 - p_t), and b_t - p_t sum a at t
      q_top.store(buffer);
      bool rest_is_normal = true;
      for (int64_t i = 0; i < count; ++i) rest_is_normal = rest_is_normal && buffer[i] >= normal_rest;
      const V b_over_q = b_top / q_top, scale(grad_scale);
      for (int64_t k = 0; k < k_classes; ++k) {
        const V is_top = top == V(static_cast<T>(k));
        const V p = V::loadu(probs.data() + k * W);
        const V top_share = rest_is_normal ? p * b_over_q
                                           : b_top * (load(xb + k * lanes) - m - log_sum - log_q_top).exp();
        const V g = load(gb + k * lanes) - p * total_a - V::blendv(top_share, V(T(0)), is_top);
        store(g * scale, gb + k * lanes);
      }
    }
  });
}

template <typename T>
void dispatch_kind(int64_t kind, const std::vector<double>& c, const T* x, const int64_t* target, T* loss, T* grad,
                   int64_t rows, int64_t classes, int64_t lanes, T scale) {
  auto t = [&](int i) { return static_cast<T>(c[i]); };
  switch (kind) {
    case CROSS_ENTROPY:
      return classwise_kernel(x, target, loss, grad, rows, classes, lanes, CrossEntropyTerm<T>{}, scale);
    case DUAL_CROSS_ENTROPY:
      return classwise_kernel(x, target, loss, grad, rows, classes, lanes, DualCrossEntropyTerm<T>{t(0), t(1)}, scale);
    case DUAL_FOCAL:
      return classwise_kernel(x, target, loss, grad, rows, classes, lanes,
                              DualFocalTerm<T>{t(0), t(1), t(2), t(3)}, scale);
    case SMOOTHED_FOCAL:
      return classwise_kernel(x, target, loss, grad, rows, classes, lanes, SmoothedFocalTerm<T>{t(0), t(1), t(2)},
                              scale);
    default:
      TORCH_CHECK(false, "focalcal fused kernels: unknown loss kind ", kind);
  }
}

struct Layout {
  at::Tensor logits;  // (rows, K, lanes), contiguous
  at::Tensor target;  // (rows, lanes), contiguous int64
  int64_t rows, classes, lanes;
  bool transposed;  // classification (N, K): samples moved to the lanes
};

Layout layout_of(const at::Tensor& logits, const at::Tensor& target) {
  TORCH_CHECK(logits.device().is_cpu(), "fused kernels run on CPU tensors");
  TORCH_CHECK(logits.dim() >= 2, "logits must be (N, K, *spatial)");
  TORCH_CHECK(target.scalar_type() == at::kLong, "target must be int64");
  const int64_t n = logits.size(0), k = logits.size(1);
  TORCH_CHECK(target.numel() * k == logits.numel(), "target must have one class index per sample/pixel");
  if (logits.dim() == 2) {
    return {logits.t().contiguous().view({1, k, n}), target.contiguous().view({1, n}), 1, k, n, true};
  }
  const int64_t lanes = logits.numel() / (n * k);
  return {logits.contiguous().view({n, k, lanes}), target.contiguous().view({n, lanes}), n, k, lanes, false};
}

// (per-element loss shaped like the target without its class axis, logit gradient times
// grad_scale or an undefined tensor)
std::vector<at::Tensor> classwise(const at::Tensor& logits, const at::Tensor& target, int64_t kind,
                                  std::vector<double> constants, bool want_grad, double grad_scale) {
  const Layout lay = layout_of(logits, target);
  constants.resize(4, 0.0);
  auto loss = at::empty({lay.rows, lay.lanes}, lay.logits.options());
  at::Tensor grad = want_grad ? at::empty_like(lay.logits) : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES(lay.logits.scalar_type(), "focalcal_classwise", [&] {
    dispatch_kind<scalar_t>(kind, constants, lay.logits.data_ptr<scalar_t>(), lay.target.data_ptr<int64_t>(),
                            loss.data_ptr<scalar_t>(), want_grad ? grad.data_ptr<scalar_t>() : nullptr, lay.rows,
                            lay.classes, lay.lanes, static_cast<scalar_t>(grad_scale));
  });
  std::vector<int64_t> loss_shape{logits.size(0)};
  for (int64_t d = 2; d < logits.dim(); ++d) loss_shape.push_back(logits.size(d));
  loss = loss.view(loss_shape);
  if (want_grad) grad = lay.transposed ? grad.view({lay.classes, lay.lanes}).t().contiguous() : grad.view(logits.sizes());
  return {loss, grad};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, module) {
  module.def("classwise", &classwise, "per-element loss and logit gradient of a class-wise loss");
}
