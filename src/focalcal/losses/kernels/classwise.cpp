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
// (pass 2 keeps exp(x_k - m2) per class in a small per-block buffer, so pass 3 gets p_k by a
// multiply, and pass 3 keeps p_k there for pass 4.) Two batch-level losses reuse it:
// ``cross_entropy_mmce`` (the cross-entropy rows and confidences from the kernel, the MMCE
// kernel sums in O(N log N), its chain rule as a slope on the top class) and ``batch_dice``.
// The Python side (``_classwise.py``, ``focal.py``, ``mmce.py``, ``segmentation.py``) holds the
// reference implementation of the same formulas; tests compare the two and gradcheck this one.

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
// Negation is written x.neg(): the unary minus that later torch defines as x.neg() is missing from
// torch 2.5's Vectorized, the lowest torch focalcal[torch] admits.

enum Kind : int64_t { DUAL_CROSS_ENTROPY = 1, DUAL_FOCAL = 2, SMOOTHED_FOCAL = 3 };  // _fused.KINDS

// What a loss term sees for one class k in every lane: masks (all bits set where true) for
// "k is the target" and "k is the top class", log p_k, p_k, 1 - p_k (exact; at the top it is
// the other classes' mass) and, for the top lanes, log(1 - p_top).
template <typename T>
struct Lanes {
  using V = Vectorized<T>;
  V is_y, is_top, log_p, p, q, log_q_top;
  V row_extra;  // a per-lane constant a term may take (MMCE's slope on the top class)

  // log(1 - p_k): log1p(-p) is exact off the top (p <= 1/2); only terms that need it pay for it.
  V log_q() const { return V::blendv(p.neg().log1p(), log_q_top, is_top); }
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
    value = V::blendv(zero, c.log_p.neg(), c.is_y);
    slope = V::blendv(zero, V::blendv(V(T(-1)), c.q.neg(), c.is_top), c.is_y);
  }
};

template <typename T>
struct CrossEntropyShiftedTopTerm {  // cross-entropy's slopes plus s dlog p_top, s per lane: MMCE's chain rule
  using V = Vectorized<T>;
  void operator()(const Lanes<T>& c, V& value, V& slope) const {
    CrossEntropyTerm<T>{}(c, value, slope);
    slope = slope + V::blendv(V(T(0)), c.row_extra * c.q, c.is_top);
  }
};

template <typename T>
struct DualCrossEntropyTerm {  // -log z_y + beta sum_{i != y} log(alpha + z_i)
  using V = Vectorized<T>;
  T alpha, beta;
  void operator()(const Lanes<T>& c, V& value, V& slope) const {
    const V alpha_plus_p = c.p + V(alpha);
    const V other_slope = V(beta) * c.p / alpha_plus_p;
    value = V::blendv(alpha_plus_p.log() * V(beta), c.log_p.neg(), c.is_y);
    const V target_slope = V::blendv(V(T(-1)), c.q.neg(), c.is_top);
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
    const V target_a = one.neg() - alpha_gamma * c.p * power_q_less_one;
    const V target_b = c.q.neg() - alpha_gamma * c.p * power_q;
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
    const V neg_log_p = c.log_p.neg();
    value = weighted * neg_log_p;
    // a = -w g, g = (1 - p)^gamma (1 + gamma p (-log p)/(1 - p)) (mukhoti2020 Prop 1); b = a (1 - p)
    const V gamma_p_neg_log_p = V(gamma) * c.p * neg_log_p;
    const V a = weighted.neg() * (V(T(1)) + gamma_p_neg_log_p / c.q);
    const V b = weighted.neg() * (c.q + gamma_p_neg_log_p);
    slope = V::blendv(a, b, c.is_top);
  }
};

template <typename T, typename Term>
void classwise_kernel(const T* x, const int64_t* target, T* loss, T* grad, int64_t n_rows, int64_t k_classes,
                      int64_t lanes, const Term& term, T grad_scale, const T* row_extra = nullptr,
                      T* top_out = nullptr, T* p_top_out = nullptr, T* q_top_out = nullptr) {
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
      const V extra = row_extra == nullptr ? V(T(0)) : load(row_extra + row * lanes + first);

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
      const V q_top = log_q_top.exp(), p_top = log_sum.neg().exp();
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
        c.row_extra = extra;
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
      if (top_out != nullptr) {
        store(top, top_out + row * lanes + first);
        store(p_top, p_top_out + row * lanes + first);
        store(q_top, q_top_out + row * lanes + first);
      }
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

// Laplacian-kernel sums of Kumar et al.'s MMCE in O(N log N): with the confidences sorted and
// equal ones grouped, sum_j w_j exp(-|r_i - r_j|/h) and sum_j w_j exp(-|r_i - r_j|/h) sign(r_i - r_j)
// are running sums from below and from above, each step scaled by exp(-gap/h) <= 1.
void laplacian_sums(const std::vector<double>& r, const std::vector<double>& w, double bandwidth,
                    std::vector<double>& v, std::vector<double>& signed_v) {
  const int64_t n = static_cast<int64_t>(r.size());
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return r[a] < r[b]; });
  std::vector<int64_t> group_start;  // positions in ``order`` where a new confidence value starts
  for (int64_t i = 0; i < n; ++i)
    if (i == 0 || r[order[i]] != r[order[i - 1]]) group_start.push_back(i);
  const int64_t groups = static_cast<int64_t>(group_start.size());
  group_start.push_back(n);
  std::vector<double> value(groups), weight(groups, 0.0), below(groups, 0.0), above(groups, 0.0);
  for (int64_t g = 0; g < groups; ++g) {
    value[g] = r[order[group_start[g]]];
    for (int64_t i = group_start[g]; i < group_start[g + 1]; ++i) weight[g] += w[order[i]];
  }
  for (int64_t g = 1; g < groups; ++g)
    below[g] = std::exp(-(value[g] - value[g - 1]) / bandwidth) * (below[g - 1] + weight[g - 1]);
  for (int64_t g = groups - 2; g >= 0; --g)
    above[g] = std::exp(-(value[g + 1] - value[g]) / bandwidth) * (above[g + 1] + weight[g + 1]);
  v.assign(n, 0.0);
  signed_v.assign(n, 0.0);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t i = group_start[g]; i < group_start[g + 1]; ++i) {
      v[order[i]] = below[g] + weight[g] + above[g];
      signed_v[order[i]] = below[g] - above[g];
    }
}

// Mean (or sum) over the batch of -log p_y + lam sqrt(MMCE^2), and its logit gradient for an
// upstream gradient of 1; the formulas of ``mmce._CrossEntropyPlusMMCE`` (the eager reference).
std::vector<at::Tensor> cross_entropy_mmce(const at::Tensor& logits, const at::Tensor& target, double lam,
                                           double bandwidth, bool weighted, bool sum_reduction, bool want_grad) {
  TORCH_CHECK(logits.dim() == 2, "mmce takes classification logits (N, K)");
  const Layout lay = layout_of(logits, target);
  const int64_t n = lay.lanes;
  auto options = lay.logits.options();
  auto rows = at::empty({1, n}, options), top = at::empty({1, n}, options);
  auto p_top = at::empty({1, n}, options), q_top = at::empty({1, n}, options);
  std::vector<double> r(n), q(n), w(n, 0.0), shift(n, 0.0);  // confidence r, 1 - r exactly, weights
  std::vector<char> correct(n);
  double cross_entropy = 0.0;
  AT_DISPATCH_FLOATING_TYPES(lay.logits.scalar_type(), "focalcal_mmce_rows", [&] {
    classwise_kernel(lay.logits.data_ptr<scalar_t>(), lay.target.data_ptr<int64_t>(), rows.data_ptr<scalar_t>(),
                     static_cast<scalar_t*>(nullptr), 1, lay.classes, n, CrossEntropyTerm<scalar_t>{}, scalar_t(1),
                     static_cast<const scalar_t*>(nullptr), top.data_ptr<scalar_t>(), p_top.data_ptr<scalar_t>(),
                     q_top.data_ptr<scalar_t>());
    const int64_t* y = lay.target.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      cross_entropy += rows.data_ptr<scalar_t>()[i];
      r[i] = p_top.data_ptr<scalar_t>()[i];
      q[i] = q_top.data_ptr<scalar_t>()[i];
      correct[i] = static_cast<int64_t>(top.data_ptr<scalar_t>()[i]) == y[i];
    }
  });
  // weights: (1 - r)/W_correct for correct samples, -r/W_wrong for wrong ones (weighted), else (c - r)/m
  double total_correct = 0.0, total_wrong = 0.0;
  for (int64_t i = 0; i < n; ++i) (correct[i] ? total_correct += q[i] : total_wrong += r[i]);
  const bool both = total_correct > 0.0 && total_wrong > 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (!weighted) w[i] = (correct[i] ? q[i] : -r[i]) / n;
    else if (both) w[i] = correct[i] ? q[i] / total_correct : -r[i] / total_wrong;
  }
  std::vector<double> v, signed_v;
  laplacian_sums(r, w, bandwidth, v, signed_v);
  double square = 0.0;
  for (int64_t i = 0; i < n; ++i) square += w[i] * v[i];
  const double norm = std::sqrt(std::max(square, 0.0));  // a PSD form: < 0 only by rounding
  const double loss_value = sum_reduction ? cross_entropy + lam * norm * n : cross_entropy / n + lam * norm;
  auto loss = at::scalar_tensor(loss_value, options);
  if (!want_grad) return {loss, at::Tensor()};

  const double scale = sum_reduction ? 1.0 : 1.0 / n, total = sum_reduction ? static_cast<double>(n) : 1.0;
  if (norm > 0.0) {
    double vw_correct = 0.0, vw_wrong = 0.0;
    for (int64_t i = 0; i < n; ++i) (correct[i] ? vw_correct : vw_wrong) += v[i] * w[i];
    for (int64_t i = 0; i < n; ++i) {
      // half of dMMCE^2/dr_i: through the weights, then through the kernel
      double through_w;
      if (!weighted) through_w = -v[i] / n;
      else through_w = correct[i] ? (vw_correct - v[i]) / total_correct : -(v[i] + vw_wrong) / total_wrong;
      const double d_square = through_w - w[i] * signed_v[i] / bandwidth;
      // d(lam total norm)/dlog r_i, divided by the scale the kernel applies to every slope
      shift[i] = lam * total * d_square * r[i] / norm / scale;
    }
  }
  at::Tensor grad = at::empty_like(lay.logits);
  AT_DISPATCH_FLOATING_TYPES(lay.logits.scalar_type(), "focalcal_mmce_grad", [&] {
    std::vector<scalar_t> extra(shift.begin(), shift.end());
    classwise_kernel(lay.logits.data_ptr<scalar_t>(), lay.target.data_ptr<int64_t>(), rows.data_ptr<scalar_t>(),
                     grad.data_ptr<scalar_t>(), 1, lay.classes, n, CrossEntropyShiftedTopTerm<scalar_t>{},
                     static_cast<scalar_t>(scale), extra.data());
  });
  return {loss, grad.view({lay.classes, n}).t().contiguous()};
}

// Sudre et al.'s generalised Dice over the whole batch, 1 - 2 N/D, and its logit gradient for an
// upstream gradient of 1: the formulas of ``segmentation._BatchDice`` (the eager reference), as
// ATen calls from C++ — the loss is a handful of whole-tensor ops, and what it costs at
// classification sizes is the Python around them.
std::vector<at::Tensor> batch_dice(const at::Tensor& logits, const at::Tensor& index, bool want_grad) {
  TORCH_CHECK(index.dim() == logits.dim() && index.size(1) == 1, "index must be (N, 1, *spatial)");
  const int64_t k = logits.size(1);
  const auto counts = at::bincount(index.reshape({-1}), {}, k).to(logits.scalar_type());
  const auto present = counts.gt(0);
  auto weight = counts.square().reciprocal();  // inf where a class is absent ...
  weight = at::where(present, weight, at::where(present, weight, 0.0).amax());  // ... there the largest weight
  const double reference_total = at::dot(weight, counts).item<double>();
  const auto probs = at::softmax(logits, 1);
  const auto target_term = probs.gather(1, index).mul_(weight.take(index));  // w_(y_n) z_(y_n, n)
  const double numerator = target_term.sum().item<double>();
  std::vector<int64_t> pixel_dims{0};
  for (int64_t d = 2; d < logits.dim(); ++d) pixel_dims.push_back(d);
  const double denominator = at::dot(weight, probs.sum(pixel_dims)).item<double>() + reference_total;
  auto loss = at::scalar_tensor(1.0 - 2.0 * numerator / denominator, logits.options());
  if (!want_grad) return {loss, at::Tensor()};
  const double a = 2.0 / denominator, b = 2.0 * numerator / (denominator * denominator);
  std::vector<int64_t> class_axis(logits.dim(), 1);
  class_axis[1] = k;
  const auto weight_per_class = weight.view(class_axis);
  const auto expected_weight = (probs * weight_per_class).sum(1, true);  // sum_l z_nl w_l
  const auto row = target_term * a - expected_weight * b;
  auto grad = (weight_per_class * b + row).mul_(probs);
  grad.scatter_add_(1, index, target_term * -a);
  return {loss, grad};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, module) {
  module.def("classwise", &classwise, "per-element loss and logit gradient of a class-wise loss");
  module.def("batch_dice", &batch_dice, "generalised Dice over the batch and its logit gradient");
  module.def("cross_entropy_mmce", &cross_entropy_mmce, "cross-entropy + lam MMCE and its logit gradient");
}
