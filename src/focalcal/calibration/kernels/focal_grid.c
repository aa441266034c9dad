// Focal temperature scaling's validation scores over a (gamma, T) grid, fused per sample
// (focalcal.calibration._focal_grid holds the reference implementation in torch; this plain C
// build is loaded with ctypes, so the fit imports no torch).
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
// A sample's K classes stay in small per-thread buffers (one pass of the gamma-free terms per T,
// one pass per gamma); the class loops are vectorised by the compiler (-O3 -ffast-math, glibc's
// vector exp/log), threads (OpenMP) run over samples, so a sample's sums do not depend on the
// thread count. Exponents are floored at -80 (e^-80 ~ 1.8e-35 of the largest term: it cannot
// change a float32 sum, and exp of very negative arguments takes a slow scalar path).

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

// glibc's vector variants (libmvec), for the loops under "omp simd"; math.h declares them only
// under -ffast-math, which would also change the rounding elsewhere.
#pragma omp declare simd notinbranch
float expf(float);
#pragma omp declare simd notinbranch
float logf(float);
#pragma omp declare simd notinbranch
float log1pf(float);

#define LOG_FLOOR (-80.0f)

static inline float floored(float x) { return x > LOG_FLOOR ? x : LOG_FLOOR; }
static inline float clamp(float x) { return x < 0.0f ? floored(x) : 0.0f; }
static float softplus(float x) { return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x)); }

// One sample's scores at every (gamma, T): its row c of centred logits, s = z_second - z_top.
static void one_sample(const float *restrict c, float s, int64_t t_index, int64_t y, int64_t k, const float *gammas,
                       int64_t n_gammas, const float *betas, int64_t n_temps, const uint8_t *wanted,
                       const uint8_t *any_wanted, int64_t n, float *confidence, float *log_psi_label,
                       float *restrict others, float *restrict d, float *restrict rel, float *restrict rho) {
#pragma omp simd
  for (int64_t j = 0; j < k; ++j) others[j] = c[j] - s;  // <= 0 but at the top class
  for (int64_t t = 0; t < n_temps; ++t) {
    if (any_wanted != NULL && !any_wanted[t]) continue;
    const float b = betas[t];
    // e_j = e^{(z_j - z_second) b}, summed over j != top: R; then q_j = e_j e^{second b - softplus(R)}
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < k; ++j) {
      const float e = expf(clamp(others[j] * b));
      rho[j] = e;  // kept in rho's buffer until q_j is formed
      sum += e;
    }
    sum -= rho[t_index];  // the top class's own term (its exponent clamped to 0: exactly 1)
    rho[t_index] = 0.0f;  // its q and rho are set below, from R
    const float log_rest = s * b + logf(sum);  // R (the sum is >= 1: the second largest's term)
    const float log_norm = softplus(log_rest);
    const float log_one_minus_top = log_rest - log_norm;
    const float top_rho = log_rest < -30.0f ? 1.0f - 0.5f * expf(log_rest) : log_norm * expf(-log_rest);
    const float to_q = expf(s * b - log_norm);
#pragma omp simd
    for (int64_t j = 0; j < k; ++j) {
      const float dv = c[j] * b;
      const float q = rho[j] * to_q;
      rho[j] = q * (log_norm - dv) / (1.0f - q);  // q (-log q) / (1 - q)
      rel[j] = log1pf(-q) - log_one_minus_top;
      d[j] = dv;
    }
    d[t_index] = 0.0f;
    rel[t_index] = 0.0f;
    rho[t_index] = top_rho;
    for (int64_t g = 0; g < n_gammas; ++g) {
      if (wanted != NULL && !wanted[g * n_temps + t]) continue;
      const float gamma = gammas[g];
      float normaliser = 0.0f;
#pragma omp simd reduction(+ : normaliser)
      for (int64_t j = 0; j < k; ++j)
        normaliser += expf(floored(d[j] - gamma * rel[j])) / (1.0f + gamma * rho[j]);
      const int64_t out = (g * n_temps + t) * n;
      confidence[out] = (1.0f / (1.0f + gamma * top_rho)) / normaliser;
      log_psi_label[out] = d[y] - gamma * rel[y] - log1pf(gamma * rho[y]) - logf(normaliser);
    }
  }
}

// centred (n, k): z - z_top; second (n,): z_second - z_top; top, label (n,); gammas (n_gammas,),
// betas (n_temps,): 1 / T; wanted (n_gammas, n_temps): the pairs to compute (NULL: all; a pair's
// values are the same either way, and a temperature no pair wants costs nothing). Writes
// confidence and log Psi_label, each (n_gammas, n_temps, n), at the wanted pairs.
// Returns 0, or -1 where a buffer could not be allocated.
int focal_grid(const float *centred, const float *second, const int64_t *top, const int64_t *label, int64_t n,
               int64_t k, const float *gammas, int64_t n_gammas, const float *betas, int64_t n_temps,
               const uint8_t *wanted, float *confidence, float *log_psi_label, int threads) {
  uint8_t *any_wanted = NULL;
  if (wanted != NULL) {
    any_wanted = calloc((size_t)n_temps, 1);
    if (any_wanted == NULL) return -1;
    for (int64_t g = 0; g < n_gammas; ++g)
      for (int64_t t = 0; t < n_temps; ++t) any_wanted[t] |= wanted[g * n_temps + t];
  }
  int failed = 0;
#pragma omp parallel num_threads(threads) reduction(| : failed)
  {
    float *buffer = malloc(sizeof(float) * 4 * (size_t)k);
    failed = buffer == NULL;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      if (buffer != NULL)
        one_sample(centred + i * k, second[i], top[i], label[i], k, gammas, n_gammas, betas, n_temps, wanted,
                   any_wanted, n, confidence + i, log_psi_label + i, buffer, buffer + k, buffer + 2 * k, buffer + 3 * k);
    }
    free(buffer);
  }
  free(any_wanted);
  return failed ? -1 : 0;
}
