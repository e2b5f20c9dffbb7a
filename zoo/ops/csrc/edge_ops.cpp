// Fused CPU kernels for zoo.ops.edge_qsoftmax, zoo.ops.edge_entmax, zoo.ops.edge_gatv2_logits,
// zoo.ops.edge_weighted_sum and GatedGCN's message passing (zoo.ops.gated_gcn; see zoo/ops/_fused.py).
//
// One task per range of destinations of the graph's in-CSR (indptr, eids), balanced by edges;
// per destination, the heads of an edge's row are one vector (ATen's Vectorized, lanes = heads,
// in chunks of Vec::size()), and the destination's rows are copied once into a task-local
// buffer, so that every pass after the first runs in cache. The arithmetic mirrors the
// pure-torch path element by element (same clamps, flushes and branches).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace {

using at::vec::Vectorized;

// How exp_q / exp_eps is evaluated, chosen in Python (zoo/ops/_fused.py keeps the same numbers).
enum Mode : int64_t { SOFTMAX = 0, RELU = 1, SQUARE = 2, GENERAL = 3, TAYLOR = 4, MIXED = 5 };

constexpr int64_t NUM_TASKS = 256;  // fixed, so that per-task sums do not depend on the thread count

template <typename scalar_t>
struct Math {
  using Vec = Vectorized<scalar_t>;
  static constexpr int W = Vec::size();

  static scalar_t exp_low() {  // EXP_LOW of zoo/ops/_common.py
    static const scalar_t low = std::log(std::numeric_limits<scalar_t>::min()) + 2;
    return low;
  }

  // exp with results below ~7.4 tiny flushed to exactly 0 (exp_flush_); NaN propagates.
  static Vec exp_flush(Vec y) {
    static const scalar_t cut = std::exp(exp_low()) * static_cast<scalar_t>(1.01);
    Vec e = at::vec::clamp_min(y, Vec(exp_low())).exp();
    return Vec::blendv(e, Vec(0), e <= Vec(cut));
  }

  // exp_eps(d) = [1 + eps d]_+^(1/eps) for eps != 0 (expq_); RELU / SQUARE: float eps 1 / 0.5.
  static Vec expq(Vec d, Vec eps, Mode mode) {
    if (mode == RELU) return at::vec::clamp_min(d + Vec(1), Vec(0));
    if (mode == SQUARE) {
      Vec u = at::vec::clamp_min(d * Vec(0.5) + Vec(1), Vec(0));
      return u * u;
    }
    Vec w = at::vec::clamp_min(d * eps, Vec(-1));
    return exp_flush(w.log1p() * eps.reciprocal());
  }

  // Taylor branch of exp_q: exp(d) [1 - eps d^2 / 2]_+ (_taylor_).
  static Vec taylor(Vec d, Vec eps) {
    d = at::vec::clamp_min(d, Vec(exp_low()));
    Vec corr = at::vec::clamp_min((d * d) * eps * Vec(-0.5) + Vec(1), Vec(0));
    return exp_flush(d) * corr;
  }

  // exp_q for edge_qsoftmax (_exp_q_), ``small`` marks the Taylor lanes in MIXED mode.
  static Vec expq_q(Vec d, Vec eps, Vec small, Mode mode) {
    switch (mode) {
      case SOFTMAX: return exp_flush(d);
      case TAYLOR: return taylor(d, eps);
      case MIXED: {
        Vec exact = expq(d, Vec::blendv(eps, Vec(1), small), GENERAL);
        return Vec::blendv(exact, taylor(d, eps), small);
      }
      default: return expq(d, eps, mode);
    }
  }

  // p = exp_eps(d) and s = p / (1 + eps d) (entmax_terms_ with slope).
  static void terms(Vec d, Vec eps, Mode mode, Vec& p, Vec& s) {
    if (mode == RELU) {
      p = at::vec::clamp_min(d + Vec(1), Vec(0));
      s = Vec::blendv(Vec(0), Vec(1), p > Vec(0));
      return;
    }
    if (mode == SQUARE) {
      s = at::vec::clamp_min(d * Vec(0.5) + Vec(1), Vec(0));
      p = s * s;
      return;
    }
    Vec w = d * eps;
    p = exp_flush(at::vec::clamp_min(w, Vec(-1)).log1p() * eps.reciprocal());
    s = p / at::vec::clamp_min(w + Vec(1), Vec(std::numeric_limits<scalar_t>::min()));
  }

  // d log exp_eps / dd and (if need) d log exp_eps / d eps (expq_log_grads_).
  static Vec log_grads(Vec d, Vec eps, bool need, bool series, Vec& deps) {
    const scalar_t meps = std::numeric_limits<scalar_t>::epsilon();
    Vec w = at::vec::clamp_min(d * eps, Vec(-1 + meps));
    Vec rho = (w + Vec(1)).reciprocal();
    if (!need) return rho;
    Vec eps2 = eps * eps;
    eps2 = Vec::blendv(eps2, Vec(1), eps2 == Vec(0));
    Vec dlog = (w * rho - w.log1p()) / eps2;
    if (series) {  // Horner on -d^2 sum_{k>=2} (-1)^k (k-1)/k w^(k-2), used where |w| < 1e-2
      Vec acc(0);
      for (int k = 7; k > 1; --k) acc = acc * w + Vec(static_cast<scalar_t>((k % 2 ? -1.0 : 1.0) * (k - 1) / k));
      acc = Vec(0) - acc * d * d;
      dlog = Vec::blendv(dlog, acc, w.abs() < Vec(static_cast<scalar_t>(1e-2)));
    }
    deps = dlog;
    return rho;
  }

  // Log-derivatives of the Taylor branch: dx = 1 - eps d / c, deps = -d^2 / 2 / c.
  static Vec taylor_grads(Vec d, Vec eps, Vec& deps) {
    Vec sq = d * d;
    Vec c = at::vec::clamp_min(sq * eps * Vec(-0.5) + Vec(1), Vec(std::numeric_limits<scalar_t>::epsilon()));
    deps = sq * Vec(-0.5) / c;
    return Vec(1) - d * eps / c;
  }
};

// Contiguous ranges of destinations with about equal edges + nodes each.
std::vector<int64_t> task_bounds(const int64_t* indptr, int64_t n) {
  std::vector<int64_t> bounds(NUM_TASKS + 1, n);
  const int64_t e = indptr[n];
  bounds[0] = 0;
  int64_t v = 0;
  for (int64_t k = 1; k < NUM_TASKS; ++k) {
    const double target = static_cast<double>(e + n) * k / NUM_TASKS;
    while (v < n && static_cast<double>(indptr[v] + v) < target) ++v;
    bounds[k] = v;
  }
  return bounds;
}

// Rows of [E, H] arrays, gathered or scattered by edge id: prefetched AHEAD edges in advance,
// since the edge ids of a destination's in-edges point anywhere (memory latency bounds the kernels).
constexpr int64_t AHEAD = 16;

template <typename scalar_t>
struct Rows {
  std::vector<const scalar_t*> reads;
  std::vector<scalar_t*> writes;
  int64_t H;
  void fetch(int64_t eid) const {
    const int64_t bytes = H * static_cast<int64_t>(sizeof(scalar_t));
    for (const scalar_t* base : reads) {
      const char* row = reinterpret_cast<const char*>(base + eid * H);
      for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(row + off, 0);
      __builtin_prefetch(row + bytes - 1, 0);
    }
    for (scalar_t* base : writes) {
      const char* row = reinterpret_cast<const char*>(base + eid * H);
      for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(row + off, 1);
      __builtin_prefetch(row + bytes - 1, 1);
    }
  }
  // Edge ``pos + AHEAD`` of the task's in-edge list (which runs to ``end``).
  void ahead(const int64_t* eids, int64_t pos, int64_t end) const {
    if (pos + AHEAD < end) fetch(eids[pos + AHEAD]);
  }
};

// Runs body(task, first destination, end) for every task, in parallel unless the graph is small
// (fewer than ATen's GRAIN_SIZE scores: a parallel region would cost more than it saves).
template <typename F>
void for_each_task(const std::vector<int64_t>& bounds, int64_t scores, const F& body) {
  const int64_t grain = scores < at::internal::GRAIN_SIZE ? NUM_TASKS : 1;
  at::parallel_for(0, NUM_TASKS, grain, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) body(task, bounds[task], bounds[task + 1]);
  });
}

// Parameter eps as [Qe, Qh] with Qe in {1, E}, Qh in {1, H}: its lanes for an edge's chunk.
template <typename scalar_t>
struct Param {
  const scalar_t* data;
  int64_t rows, cols;
  Vectorized<scalar_t> at(int64_t eid, int64_t h0, int64_t n) const {
    const scalar_t* row = data + (rows == 1 ? 0 : eid * cols);
    if (cols == 1) return Vectorized<scalar_t>(row[0]);
    return Vectorized<scalar_t>::loadu(row + h0, n);
  }
};

template <typename scalar_t>
Param<scalar_t> param_of(const at::Tensor& eps) {
  return {eps.data_ptr<scalar_t>(), eps.size(0), eps.size(1)};
}

// Sums the first n lanes.
template <typename scalar_t>
scalar_t lane_sum(Vectorized<scalar_t> v, int64_t n) {
  scalar_t buf[Vectorized<scalar_t>::size()];
  v.store(buf);
  scalar_t s = 0;
  for (int64_t l = 0; l < n; ++l) s += buf[l];
  return s;
}

// Gradient of eps reduced to its [Qe, Qh] shape: per edge written in place, else per task.
template <typename scalar_t>
struct ParamGrad {
  using Vec = Vectorized<scalar_t>;
  scalar_t* out;        // [Qe, Qh]
  scalar_t* partial;    // [NUM_TASKS, Qh] when Qe == 1
  int64_t rows, cols;
  void add(int64_t task, int64_t eid, int64_t h0, int64_t n, Vec g) const {
    scalar_t* row = rows == 1 ? partial + task * cols : out + eid * cols;
    if (cols == 1) {
      row[0] += lane_sum(g, n);
    } else {
      (Vec::loadu(row + h0, n) + g).store(row + h0, n);
    }
  }
};

template <typename scalar_t>
void finish_param_grad(at::Tensor& grad, const at::Tensor& partial) {
  if (grad.size(0) == 1) grad.copy_(partial.sum(0, true));  // tasks in a fixed order
}

// ------------------------------------------------------------------ q-softmax

template <typename scalar_t>
void qsoftmax_forward_kernel(const at::Tensor& indptr_t, const at::Tensor& eids_t, const at::Tensor& x_t,
                             const at::Tensor& eps_t, Mode mode, double taylor_eps, at::Tensor& p_t,
                             at::Tensor& m_t, at::Tensor& total_t) {
  using M = Math<scalar_t>;
  using Vec = typename M::Vec;
  const int64_t* indptr = indptr_t.data_ptr<int64_t>();
  const int64_t* eids = eids_t.data_ptr<int64_t>();
  const scalar_t* x = x_t.data_ptr<scalar_t>();
  scalar_t* p = p_t.data_ptr<scalar_t>();
  scalar_t* m = m_t.data_ptr<scalar_t>();
  scalar_t* total = total_t.data_ptr<scalar_t>();
  const int64_t n_dst = indptr_t.size(0) - 1, H = x_t.size(1);
  const Param<scalar_t> eps = param_of<scalar_t>(eps_t);
  const Vec teps(static_cast<scalar_t>(taylor_eps));
  const Rows<scalar_t> rows{{x}, {p}, H}, out_rows{{}, {p}, H};
  for_each_task(task_bounds(indptr, n_dst), x_t.numel(), [&](int64_t, int64_t v0, int64_t v1) {
    std::vector<scalar_t> buf;
    for (int64_t v = v0; v < v1; ++v) {
      const int64_t* in = eids + indptr[v];
      const int64_t k = indptr[v + 1] - indptr[v];
      if (buf.size() < static_cast<size_t>(k) * M::W) buf.resize(static_cast<size_t>(k) * M::W);
      for (int64_t h0 = 0; h0 < H; h0 += M::W) {
        const int64_t n = std::min<int64_t>(M::W, H - h0);
        Vec mx(-std::numeric_limits<scalar_t>::infinity());
        for (int64_t j = 0; j < k; ++j) {
          rows.ahead(eids, indptr[v] + j, indptr[v1]);
          Vec xv = Vec::loadu(x + in[j] * H + h0, n);
          xv.store(buf.data() + j * M::W);
          mx = at::vec::maximum(mx, xv);
        }
        if (k) {
          mx.store(m + v * H + h0, n);
        } else {
          Vec(0).store(m + v * H + h0, n);
        }
        Vec sum(0);
        for (int64_t j = 0; j < k; ++j) {
          Vec ev = eps.at(in[j], h0, n);
          Vec small = ev.abs() < teps;
          Vec e = M::expq_q(Vec::loadu(buf.data() + j * M::W) - mx, ev, small, mode);
          e.store(buf.data() + j * M::W);
          sum = sum + e;
        }
        sum.store(total + v * H + h0, n);
        for (int64_t j = 0; j < k; ++j) {
          out_rows.ahead(in, j, k);
          const Vec pv = Vec::loadu(buf.data() + j * M::W) / sum;
          pv.store(p + in[j] * H + h0, n);
        }
      }
    }
  });
}

// d log e / dx (returned) and, if need, d log e / d eps (into dq) at d = x - m, per mode (_log_grads_).
template <typename scalar_t>
Vectorized<scalar_t> q_log_grads(Vectorized<scalar_t> d, Vectorized<scalar_t> ev, Mode mode,
                                 Vectorized<scalar_t> teps, bool need, bool series, Vectorized<scalar_t>& dq) {
  using M = Math<scalar_t>;
  using Vec = Vectorized<scalar_t>;
  dq = Vec(0);
  if (mode == SOFTMAX) return Vec(1);
  if (mode == TAYLOR) return M::taylor_grads(d, ev, dq);
  if (mode == MIXED) {
    Vec tq, small = ev.abs() < teps;
    Vec tx = M::taylor_grads(d, ev, tq);
    Vec dx = Vec::blendv(M::log_grads(d, ev, need, series, dq), tx, small);
    dq = Vec::blendv(dq, tq, small);
    return dx;
  }
  return M::log_grads(d, ev, need, series, dq);
}

// Backward of q-softmax per destination: grad, logits and output rows gathered once into a
// local buffer; r = (g - sum g p) p, grad x = r dx, plus the max's gradient -sum r dx on the
// first in-edge at the max (as dgl.ops.copy_e_max's backward); a shared q's gradient summed per task.
template <typename scalar_t>
void qsoftmax_backward_kernel(const at::Tensor& indptr_t, const at::Tensor& eids_t, const at::Tensor& x_t,
                              const at::Tensor& p_t, const at::Tensor& m_t, const at::Tensor& g_t,
                              const at::Tensor& eps_t, Mode mode, double taylor_eps, bool need_q, bool series,
                              at::Tensor& gx_t, at::Tensor& gq_t, at::Tensor& part_t) {
  using M = Math<scalar_t>;
  using Vec = typename M::Vec;
  const int64_t* indptr = indptr_t.data_ptr<int64_t>();
  const int64_t* eids = eids_t.data_ptr<int64_t>();
  const scalar_t* x = x_t.data_ptr<scalar_t>();
  const scalar_t* p = p_t.data_ptr<scalar_t>();
  const scalar_t* m = m_t.data_ptr<scalar_t>();
  const scalar_t* g = g_t.data_ptr<scalar_t>();
  scalar_t* gx = gx_t.data_ptr<scalar_t>();
  const int64_t n_dst = indptr_t.size(0) - 1, H = x_t.size(1);
  const Param<scalar_t> eps = param_of<scalar_t>(eps_t);
  const ParamGrad<scalar_t> gq{need_q ? gq_t.data_ptr<scalar_t>() : nullptr,
                               need_q ? part_t.data_ptr<scalar_t>() : nullptr, eps_t.size(0), eps_t.size(1)};
  const Vec teps(static_cast<scalar_t>(taylor_eps));
  const Vec dlow(-std::pow(std::numeric_limits<scalar_t>::max(), static_cast<scalar_t>(0.25)));
  const Rows<scalar_t> rows{{x, p, g}, {gx}, H}, out_rows{{}, {gx}, H};
  for_each_task(task_bounds(indptr, n_dst), x_t.numel(), [&](int64_t task, int64_t v0, int64_t v1) {
    std::vector<scalar_t> buf;
    for (int64_t v = v0; v < v1; ++v) {
      const int64_t* in = eids + indptr[v];
      const int64_t k = indptr[v + 1] - indptr[v];
      if (k == 0) continue;
      if (buf.size() < static_cast<size_t>(k) * 3 * M::W) buf.resize(static_cast<size_t>(k) * 3 * M::W);
      auto slot = [&](int64_t j, int which) { return buf.data() + (3 * j + which) * M::W; };  // g, p, x
      for (int64_t h0 = 0; h0 < H; h0 += M::W) {
        const int64_t n = std::min<int64_t>(M::W, H - h0);
        Vec gp(0);
        for (int64_t j = 0; j < k; ++j) {
          rows.ahead(eids, indptr[v] + j, indptr[v1]);
          const int64_t at = in[j] * H + h0;
          const Vec gv = Vec::loadu(g + at, n), pv = Vec::loadu(p + at, n);
          gv.store(slot(j, 0));
          pv.store(slot(j, 1));
          Vec::loadu(x + at, n).store(slot(j, 2));
          gp = gp + gv * pv;
        }
        const Vec mv = Vec::loadu(m + v * H + h0, n);
        Vec gm(0);
        for (int64_t j = 0; j < k; ++j) {
          Vec r = (Vec::loadu(slot(j, 0)) - gp) * Vec::loadu(slot(j, 1));  // d loss / d log e
          const Vec d = at::vec::clamp_min(Vec::loadu(slot(j, 2)) - mv, dlow);  // -inf: weight 0
          const Vec ev = eps.at(in[j], h0, n);
          Vec dq;
          const Vec dx = q_log_grads<scalar_t>(d, ev, mode, teps, need_q, series, dq);
          if (need_q && mode != SOFTMAX) gq.add(task, in[j], h0, n, dq * r);
          r = r * dx;
          gm = gm - r;
          r.store(slot(j, 0));
        }
        scalar_t gml[M::W], ml[M::W];
        gm.store(gml);
        mv.store(ml);
        for (int64_t l = 0; l < n; ++l) {  // the max's gradient: first in-edge at the max
          for (int64_t j = 0; j < k; ++j) {
            if (slot(j, 2)[l] == ml[l]) {
              slot(j, 0)[l] += gml[l];
              break;
            }
          }
        }
        for (int64_t j = 0; j < k; ++j) {
          out_rows.ahead(in, j, k);
          Vec::loadu(slot(j, 0)).store(gx + in[j] * H + h0, n);
        }
      }
    }
  });
}

// ------------------------------------------------------------------ entmax

// Whether a comparison mask is set in all / any of the first n lanes.
template <typename scalar_t>
bool mask_lanes(Vectorized<scalar_t> mask, int64_t n, bool all) {
  scalar_t buf[Vectorized<scalar_t>::size()];
  mask.store(buf);
  for (int64_t l = 0; l < n; ++l) {
    uint64_t bits = 0;
    std::memcpy(&bits, &buf[l], sizeof(scalar_t));
    if ((bits != 0) != all) return !all;
  }
  return all;
}

template <typename scalar_t>
scalar_t lane_max(Vectorized<scalar_t> v, int64_t n) {
  scalar_t buf[Vectorized<scalar_t>::size()];
  v.store(buf);
  scalar_t out = buf[0];
  for (int64_t l = 1; l < n; ++l) out = (buf[l] > out || std::isnan(buf[l])) ? buf[l] : out;
  return out;
}

template <typename scalar_t>
void entmax_forward_kernel(const at::Tensor& indptr_t, const at::Tensor& eids_t, const at::Tensor& x_t,
                           const at::Tensor& eps_t, Mode mode, int64_t n_bisect, int64_t max_iter,
                           at::Tensor& p_t, at::Tensor& t_t, at::Tensor& total_t, at::Tensor& stuck_t) {
  using M = Math<scalar_t>;
  using Vec = typename M::Vec;
  const int64_t* indptr = indptr_t.data_ptr<int64_t>();
  const int64_t* eids = eids_t.data_ptr<int64_t>();
  const scalar_t* x = x_t.data_ptr<scalar_t>();
  scalar_t* p = p_t.data_ptr<scalar_t>();
  scalar_t* tt = t_t.data_ptr<scalar_t>();
  scalar_t* total = total_t.data_ptr<scalar_t>();
  int64_t* stuck = stuck_t.data_ptr<int64_t>();  // [NUM_TASKS]: Newton did not converge
  const int64_t n_dst = indptr_t.size(0) - 1, H = x_t.size(1);
  const Param<scalar_t> eps = param_of<scalar_t>(eps_t);
  const scalar_t prec = std::numeric_limits<scalar_t>::epsilon();
  const scalar_t prec23 = std::pow(prec, static_cast<scalar_t>(2.0 / 3.0));
  const Rows<scalar_t> rows{{x}, {p}, H}, out_rows{{}, {p}, H};
  for_each_task(task_bounds(indptr, n_dst), x_t.numel(), [&](int64_t task, int64_t v0, int64_t v1) {
    std::vector<scalar_t> buf;
    for (int64_t v = v0; v < v1; ++v) {
      const int64_t* in = eids + indptr[v];
      const int64_t k = indptr[v + 1] - indptr[v];
      if (k == 0) {
        for (int64_t h = 0; h < H; ++h) tt[v * H + h] = total[v * H + h] = 0;
        continue;
      }
      if (buf.size() < static_cast<size_t>(k) * M::W) buf.resize(static_cast<size_t>(k) * M::W);
      scalar_t* b = buf.data();
      for (int64_t h0 = 0; h0 < H; h0 += M::W) {
        const int64_t n = std::min<int64_t>(M::W, H - h0);
        Vec lo(-std::numeric_limits<scalar_t>::infinity());
        for (int64_t j = 0; j < k; ++j) {
          rows.ahead(eids, indptr[v] + j, indptr[v1]);
          Vec xv = Vec::loadu(x + in[j] * H + h0, n);
          xv.store(b + j * M::W);
          lo = at::vec::maximum(lo, xv);
        }
        const Vec ev = eps.at(0, h0, n);
        auto sum_p = [&](Vec t) {
          Vec s(0);
          for (int64_t j = 0; j < k; ++j) s = s + M::expq(Vec::loadu(b + j * M::W) - t, ev, mode);
          return s;
        };
        Vec t, sum(0);
        if (mode == SOFTMAX) {
          for (int64_t j = 0; j < k; ++j) {
            Vec e = M::exp_flush(Vec::loadu(b + j * M::W) - lo);
            e.store(b + j * M::W);
            sum = sum + e;
          }
          t = lo + sum.log();
        } else {
          const scalar_t logd = std::log(static_cast<scalar_t>(k));
          Vec width = (Vec(0) - (Vec(0) - ev * Vec(logd)).expm1()) / ev;  // (1 - k^-eps) / eps
          const bool convex = mask_lanes(ev <= Vec(1), n, true);
          for (int64_t i = 0; i < (convex ? n_bisect : max_iter); ++i) {
            width = width / Vec(2);
            const Vec mid = lo + width;
            lo = Vec::blendv(lo, mid, sum_p(mid) >= Vec(1));
            if (!convex && mask_lanes(width <= Vec(prec) * (Vec(1) + lo.abs()), n, true)) break;
          }
          t = lo;
          if (convex) {
            const Vec sparse = ev == Vec(1);
            Vec last(0);
            bool done = false, failed = false;
            for (int64_t it = 0; it < max_iter && !done && !failed; ++it) {  // Newton from below
              Vec f(0), slope(0), pv, sv;
              for (int64_t j = 0; j < k; ++j) {
                M::terms(Vec::loadu(b + j * M::W) - t, ev, mode, pv, sv);
                f = f + pv;
                slope = slope + sv;
              }
              f = f - Vec(1);
              const Vec bad = (f != f) | (f.abs() == Vec(std::numeric_limits<scalar_t>::infinity()));
              if (mask_lanes(bad, n, false)) {  // NaN/+inf logits: caught in Python
                t = Vec::blendv(t, Vec(std::numeric_limits<scalar_t>::quiet_NaN()), bad);
                failed = true;
                continue;
              }
              const Vec step = Vec::blendv(Vec(0), f / slope, slope > Vec(0));
              t = t + step;
              const Vec sizes = Vec::blendv(Vec(0), slope, sparse);
              const scalar_t rel = lane_max(step.abs() / (Vec(1) + t.abs()), n);
              const bool stable = it > 0 && mask_lanes(sizes == last, n, true);
              last = sizes;
              done = rel <= 8 * prec || (rel <= prec23 && stable);
            }
            if (!done && !failed) stuck[task] = 1;
          }
          for (int64_t j = 0; j < k; ++j) {
            Vec e = M::expq(Vec::loadu(b + j * M::W) - t, ev, mode);
            e.store(b + j * M::W);
            sum = sum + e;
          }
        }
        t.store(tt + v * H + h0, n);
        sum.store(total + v * H + h0, n);
        for (int64_t j = 0; j < k; ++j) {
          out_rows.ahead(in, j, k);
          const Vec pv = Vec::loadu(b + j * M::W) / sum;
          pv.store(p + in[j] * H + h0, n);
        }
      }
    }
  });
}

template <typename scalar_t>
void entmax_backward_kernel(const at::Tensor& indptr_t, const at::Tensor& eids_t, const at::Tensor& x_t,
                            const at::Tensor& t_t, const at::Tensor& p_t, const at::Tensor& g_t,
                            const at::Tensor& eps_t, Mode mode, bool need_alpha, bool series, at::Tensor& gx_t,
                            at::Tensor& ga_t, at::Tensor& part_t) {
  using M = Math<scalar_t>;
  using Vec = typename M::Vec;
  const int64_t* indptr = indptr_t.data_ptr<int64_t>();
  const int64_t* eids = eids_t.data_ptr<int64_t>();
  const scalar_t* x = x_t.data_ptr<scalar_t>();
  const scalar_t* tt = t_t.data_ptr<scalar_t>();
  const scalar_t* p = p_t.data_ptr<scalar_t>();
  const scalar_t* g = g_t.data_ptr<scalar_t>();
  scalar_t* gx = gx_t.data_ptr<scalar_t>();
  const int64_t n_dst = indptr_t.size(0) - 1, H = x_t.size(1);
  const Param<scalar_t> eps = param_of<scalar_t>(eps_t);
  const ParamGrad<scalar_t> ga{need_alpha ? ga_t.data_ptr<scalar_t>() : nullptr,
                               need_alpha ? part_t.data_ptr<scalar_t>() : nullptr, 1, eps_t.size(1)};
  constexpr int S = 0, G = 1, P = 2, D = 3, NB = 4;  // buffer slots per edge: s, g, p, dlog
  const Rows<scalar_t> rows{{x, p, g}, {gx}, H}, out_rows{{}, {gx}, H};
  for_each_task(task_bounds(indptr, n_dst), x_t.numel(), [&](int64_t task, int64_t v0, int64_t v1) {
    std::vector<scalar_t> buf;
    for (int64_t v = v0; v < v1; ++v) {
      const int64_t* in = eids + indptr[v];
      const int64_t k = indptr[v + 1] - indptr[v];
      if (k == 0) continue;
      if (buf.size() < static_cast<size_t>(k) * NB * M::W) buf.resize(static_cast<size_t>(k) * NB * M::W);
      auto slot = [&](int64_t j, int which) { return buf.data() + (j * NB + which) * M::W; };
      for (int64_t h0 = 0; h0 < H; h0 += M::W) {
        const int64_t n = std::min<int64_t>(M::W, H - h0);
        const Vec ev = eps.at(0, h0, n), tv = Vec::loadu(tt + v * H + h0, n);
        Vec sg(0), ss(0);
        for (int64_t j = 0; j < k; ++j) {
          rows.ahead(eids, indptr[v] + j, indptr[v1]);
          const int64_t at = in[j] * H + h0;
          const Vec pv = Vec::loadu(p + at, n), gv = Vec::loadu(g + at, n);
          Vec s, dlog(0);
          if (mode == SOFTMAX) {
            s = pv;
          } else if (mode == RELU) {
            s = Vec::blendv(Vec(0), Vec(1), pv > Vec(0));
          } else if (mode == SQUARE) {
            s = pv.sqrt();
          } else {
            s = M::log_grads(Vec::loadu(x + at, n) - tv, ev, need_alpha, series, dlog) * pv;
          }
          s.store(slot(j, S));
          gv.store(slot(j, G));
          pv.store(slot(j, P));
          dlog.store(slot(j, D));
          sg = sg + s * gv;
          ss = ss + s;
        }
        const Vec gbar = sg / ss;
        Vec acc(0);
        for (int64_t j = 0; j < k; ++j) {
          out_rows.ahead(in, j, k);
          const Vec r = Vec::loadu(slot(j, G)) - gbar;
          (Vec::loadu(slot(j, S)) * r).store(gx + in[j] * H + h0, n);
          if (need_alpha) acc = acc + Vec::loadu(slot(j, D)) * (r * Vec::loadu(slot(j, P)));
        }
        if (need_alpha) ga.add(task, 0, h0, n, acc);
      }
    }
  });
}

// ------------------------------------------------------------------ GATv2 logits

// logits[e, h] = sum_f attn[h, f] LeakyReLU(z[e, h, f]), z = src_rows[i] + dst_rows[j] (+ edge_rows[e])
// for edge e = i -> j, rows of R = H F lanes (head h: lanes [h F, (h + 1) F)).
template <typename scalar_t>
struct Gatv2 {
  using Vec = Vectorized<scalar_t>;
  const scalar_t* fe;    // [E, R], or nullptr
  const scalar_t* attn;  // [R]
  int64_t H, F, R;
  Vec slope;

  Vec leaky(Vec z, Vec positive) const { return Vec::blendv(z * slope, z, positive); }
  // z at lanes [c, c + n) of edge e, from the rows of its two ends
  Vec z(const scalar_t* own, const scalar_t* other, int64_t e, int64_t c, int64_t n) const {
    const Vec v = Vec::loadu(other + c, n) + Vec::loadu(own + c, n);
    return fe ? v + Vec::loadu(fe + e * R + c, n) : v;
  }
};

// A CSR over one end of the edges: node v's edges are eids[indptr[v]:indptr[v + 1]], their other
// ends nbr[...] (DGL's adj_tensors; the in-CSR for destinations, the out-CSR for sources).
struct Csr {
  const int64_t* indptr;
  const int64_t* nbr;
  const int64_t* eids;
  int64_t n;
};

Csr csr_of(const at::Tensor& indptr, const at::Tensor& nbr, const at::Tensor& eids) {
  TORCH_CHECK(indptr.dtype() == at::kLong && nbr.dtype() == at::kLong && eids.dtype() == at::kLong,
              "indptr, nbr and eids must be int64");
  TORCH_CHECK(indptr.is_contiguous() && nbr.is_contiguous() && eids.is_contiguous(), "inputs must be contiguous");
  TORCH_CHECK(nbr.numel() == eids.numel(), "nbr and eids must have one entry per edge");
  return {indptr.data_ptr<int64_t>(), nbr.data_ptr<int64_t>(), eids.data_ptr<int64_t>(), indptr.size(0) - 1};
}

// out[h] = the sum over head h's F lanes of term(c, n), a vector of lanes [c, c + n) of a row of
// H F: heads at least a vector wide sum in a vector, then its lanes; narrower heads take the row's
// terms in whole vectors (into ``terms``, H F lanes), then each head's lanes one by one.
template <typename scalar_t, typename Term>
void head_sums(int64_t H, int64_t F, scalar_t* terms, const Term& term, scalar_t* out) {
  using Vec = Vectorized<scalar_t>;
  constexpr int64_t W = Vec::size();
  if (F < W) {
    for (int64_t c = 0; c < H * F; c += W) {
      const int64_t n = std::min<int64_t>(W, H * F - c);
      term(c, n).store(terms + c, n);
    }
    for (int64_t h = 0; h < H; ++h) {
      scalar_t sum = 0;
      for (int64_t f = 0; f < F; ++f) sum += terms[h * F + f];
      out[h] = sum;
    }
    return;
  }
  for (int64_t h = 0; h < H; ++h) {
    Vec acc(0);
    for (int64_t f = 0; f < F; f += W) acc = acc + term(h * F + f, std::min<int64_t>(W, F - f));
    out[h] = lane_sum(acc, W);  // lanes past n hold 0 (loadu fills them so)
  }
}

// Each head's value of a row [H] spread over its F lanes of ``lanes`` [H F].
template <typename scalar_t>
void spread_heads(const scalar_t* per_head, int64_t H, int64_t F, scalar_t* lanes) {
  for (int64_t h = 0; h < H; ++h) std::fill_n(lanes + h * F, F, per_head[h]);
}

// Forward per destination over the in-CSR (the destination's row stays in cache while its in-edges
// run), each edge's logits by head_sums: each logit is its own sum, whatever the thread count.
template <typename scalar_t>
void gatv2_forward_kernel(const Gatv2<scalar_t>& op, const Csr& in, const scalar_t* fs, const scalar_t* fd,
                          scalar_t* out) {
  using Vec = Vectorized<scalar_t>;
  const int64_t R = op.R, H = op.H, F = op.F;
  const Rows<scalar_t> ahead{{fs}, {}, R};
  for_each_task(task_bounds(in.indptr, in.n), in.indptr[in.n] * R, [&](int64_t, int64_t v0, int64_t v1) {
    std::vector<scalar_t> terms(R);
    for (int64_t v = v0; v < v1; ++v) {
      const scalar_t* own = fd + v * R;
      for (int64_t k = in.indptr[v]; k < in.indptr[v + 1]; ++k) {
        if (k + AHEAD < in.indptr[v1]) ahead.fetch(in.nbr[k + AHEAD]);
        const int64_t e = in.eids[k];
        const scalar_t* other = fs + in.nbr[k] * R;
        head_sums(H, F, terms.data(), [&](int64_t c, int64_t n) {
          const Vec z = op.z(own, other, e, c, n);
          return Vec::loadu(op.attn + c, n) * op.leaky(z, z > Vec(0));
        }, out + e * H);
      }
    }
  });
}

// One pass of the backward over a CSR (csr_of): for node v, row[v] = sum over its edges of dz
// (aten's leaky_relu_backward of attn * grad), each edge's dz also into edge_grad and its attn
// terms into the task's attn_part row. Wide heads: per node and chunk of lanes, the node's own
// lanes and the sums stay in registers while its edges run (the other ends' rows are prefetched
// whole in the first chunk, so later chunks find them in cache); heads narrower than a vector:
// whole rows, with each edge's grad spread over its heads' lanes.
template <typename scalar_t>
void gatv2_grad_pass(const Gatv2<scalar_t>& op, const scalar_t* g, const Csr& csr, const scalar_t* own_rows,
                     const scalar_t* other_rows, scalar_t* row, scalar_t* edge_grad, scalar_t* attn_part) {
  using Vec = Vectorized<scalar_t>;
  constexpr int64_t W = Vec::size();
  const int64_t R = op.R, H = op.H, F = op.F;
  const Rows<scalar_t> ahead{{other_rows}, {}, R};
  for_each_task(task_bounds(csr.indptr, csr.n), csr.indptr[csr.n] * R, [&](int64_t task, int64_t v0, int64_t v1) {
    scalar_t* part = attn_part ? attn_part + task * R : nullptr;
    if (F < W) {
      std::vector<scalar_t> acc(R), spread(R);
      for (int64_t v = v0; v < v1; ++v) {
        std::fill(acc.begin(), acc.end(), scalar_t(0));
        const scalar_t* own = own_rows + v * R;
        for (int64_t k = csr.indptr[v]; k < csr.indptr[v + 1]; ++k) {
          if (k + AHEAD < csr.indptr[v1]) ahead.fetch(csr.nbr[k + AHEAD]);
          const int64_t e = csr.eids[k];
          const scalar_t* other = other_rows + csr.nbr[k] * R;
          spread_heads(g + e * H, H, F, spread.data());
          for (int64_t c = 0; c < R; c += W) {
            const int64_t n = std::min<int64_t>(W, R - c);
            const Vec z = op.z(own, other, e, c, n), gv = Vec::loadu(spread.data() + c, n), positive = z > Vec(0);
            const Vec up = gv * Vec::loadu(op.attn + c, n), dz = op.leaky(up, positive);
            (Vec::loadu(acc.data() + c, n) + dz).store(acc.data() + c, n);
            if (edge_grad) dz.store(edge_grad + e * R + c, n);
            if (part) (Vec::loadu(part + c, n) + gv * op.leaky(z, positive)).store(part + c, n);
          }
        }
        if (row) std::copy(acc.begin(), acc.end(), row + v * R);
      }
      return;
    }
    for (int64_t v = v0; v < v1; ++v) {
      const int64_t k0 = csr.indptr[v], k1 = csr.indptr[v + 1];
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t f = 0; f < F; f += W) {
          const int64_t c = h * F + f, n = std::min<int64_t>(W, F - f);
          const Vec at = Vec::loadu(op.attn + c, n);
          Vec acc(0), pa(0);
          for (int64_t k = k0; k < k1; ++k) {
            if (c == 0 && k + AHEAD < k1) ahead.fetch(csr.nbr[k + AHEAD]);
            const int64_t e = csr.eids[k];
            const Vec z = op.z(own_rows + v * R, other_rows + csr.nbr[k] * R, e, c, n), positive = z > Vec(0);
            const Vec gh(g[e * H + h]), dz = op.leaky(gh * at, positive);
            acc = acc + dz;
            if (edge_grad) dz.store(edge_grad + e * R + c, n);
            if (part) pa = pa + gh * op.leaky(z, positive);
          }
          if (row) acc.store(row + v * R + c, n);
          if (part) (Vec::loadu(part + c, n) + pa).store(part + c, n);
        }
      }
    }
  });
}

// ------------------------------------------------------------------ attention aggregation

// out[v] = sum over v's edges (a CSR, csr_of) of w[e, h] * rows[nbr], each head's weight over its F
// lanes of the rows' R = H F: edge_weighted_sum's forward over the in-CSR, its feat gradient over
// the out-CSR. Wide heads: per node and chunk of lanes the sum stays in a register while the
// node's edges run (their rows prefetched whole in the first chunk); narrow heads: whole rows.
template <typename scalar_t>
void weighted_rows_kernel(const Csr& csr, const scalar_t* w, const scalar_t* rows, int64_t H, int64_t F,
                          scalar_t* out) {
  using Vec = Vectorized<scalar_t>;
  constexpr int64_t W = Vec::size();
  const int64_t R = H * F;
  const Rows<scalar_t> ahead{{rows}, {}, R};
  for_each_task(task_bounds(csr.indptr, csr.n), csr.indptr[csr.n] * R, [&](int64_t, int64_t v0, int64_t v1) {
    std::vector<scalar_t> acc(F < W ? R : 0), spread(F < W ? R : 0);
    for (int64_t v = v0; v < v1; ++v) {
      const int64_t k0 = csr.indptr[v], k1 = csr.indptr[v + 1];
      if (F < W) {
        std::fill(acc.begin(), acc.end(), scalar_t(0));
        for (int64_t k = k0; k < k1; ++k) {
          if (k + AHEAD < csr.indptr[v1]) ahead.fetch(csr.nbr[k + AHEAD]);
          const int64_t e = csr.eids[k];
          spread_heads(w + e * H, H, F, spread.data());
          for (int64_t c = 0; c < R; c += W) {
            const int64_t n = std::min<int64_t>(W, R - c);
            const Vec term = Vec::loadu(spread.data() + c, n) * Vec::loadu(rows + csr.nbr[k] * R + c, n);
            (Vec::loadu(acc.data() + c, n) + term).store(acc.data() + c, n);
          }
        }
        std::copy(acc.begin(), acc.end(), out + v * R);
        continue;
      }
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t f = 0; f < F; f += W) {
          const int64_t c = h * F + f, n = std::min<int64_t>(W, F - f);
          Vec sum(0);
          for (int64_t k = k0; k < k1; ++k) {
            if (c == 0 && k + AHEAD < k1) ahead.fetch(csr.nbr[k + AHEAD]);
            sum = sum + Vec(w[csr.eids[k] * H + h]) * Vec::loadu(rows + csr.nbr[k] * R + c, n);
          }
          sum.store(out + v * R + c, n);
        }
      }
    }
  });
}

// out[e, h] = sum_f own[v, h, f] * other[nbr, h, f] for every edge e of node v (a CSR), by
// head_sums: the weight gradient of edge_weighted_sum (own: the output's gradient per
// destination, other: feat).
template <typename scalar_t>
void head_dots_kernel(const Csr& csr, const scalar_t* own_rows, const scalar_t* other_rows, int64_t H, int64_t F,
                      scalar_t* out) {
  using Vec = Vectorized<scalar_t>;
  const int64_t R = H * F;
  const Rows<scalar_t> ahead{{other_rows}, {}, R};
  for_each_task(task_bounds(csr.indptr, csr.n), csr.indptr[csr.n] * R, [&](int64_t, int64_t v0, int64_t v1) {
    std::vector<scalar_t> terms(R);
    for (int64_t v = v0; v < v1; ++v) {
      const scalar_t* own = own_rows + v * R;
      for (int64_t k = csr.indptr[v]; k < csr.indptr[v + 1]; ++k) {
        if (k + AHEAD < csr.indptr[v1]) ahead.fetch(csr.nbr[k + AHEAD]);
        const scalar_t* other = other_rows + csr.nbr[k] * R;
        head_sums(H, F, terms.data(), [&](int64_t c, int64_t n) {
          return Vec::loadu(own + c, n) * Vec::loadu(other + c, n);
        }, out + csr.eids[k] * H);
      }
    }
  });
}

// ------------------------------------------------------------------ GatedGCN edge step

// GatedGCN's message passing (zoo/ops/gated_gcn.py) on proj = [A h | B h | D h | E h] ([N, 4D])
// and ce = C e ([E, D]): for edge e = i -> j, e'[e] = D h[i] + E h[j] + ce[e] and s = sigmoid(e');
// h'[j] = A h[j] + sum_in s B h[i] / (sum_in s + 1e-6). Per node and chunk of lanes, the sums stay
// in registers while the node's edges run (a molecule's neighbours have nearby ids, so their rows
// are mostly in cache: no prefetching). The arithmetic is torch's element by element (its sigmoid
// 1 / (1 + exp(-z)) and sigmoid_backward g (1 - s) s); only the sums run in another order.
template <typename scalar_t>
struct GatedGcn {
  using Vec = Vectorized<scalar_t>;
  enum Block { A = 0, B = 1, D = 2, E = 3 };
  int64_t dim;
  const scalar_t* proj;
  Vec lanes(const scalar_t* rows, int64_t v, Block b, int64_t c, int64_t n) const {
    return Vec::loadu(rows + (4 * v + b) * dim + c, n);
  }
  static Vec sigmoid(Vec z) { return (Vec(1) + z.neg().exp()).reciprocal(); }
  static Vec eps() { return Vec(static_cast<scalar_t>(1e-6)); }
  // body(v, c, n) for every node v of ``csr`` and chunk [c, c + n) of its D lanes, in tasks balanced by edges.
  template <typename Body>
  void each_chunk(const Csr& csr, const Body& body) const {
    constexpr int64_t W = Vec::size();
    for_each_task(task_bounds(csr.indptr, csr.n), csr.indptr[csr.n] * dim, [&](int64_t, int64_t v0, int64_t v1) {
      for (int64_t v = v0; v < v1; ++v) {
        for (int64_t c = 0; c < dim; c += W) body(v, c, std::min<int64_t>(W, dim - c));
      }
    });
  }
};

template <typename scalar_t>
void gated_gcn_forward_kernel(const GatedGcn<scalar_t>& op, const scalar_t* ce, const Csr& in, scalar_t* h_out,
                              scalar_t* e_out) {
  using Vec = Vectorized<scalar_t>;
  using G = GatedGcn<scalar_t>;
  const int64_t D = op.dim;
  op.each_chunk(in, [&](int64_t v, int64_t c, int64_t n) {
    const Vec eh = op.lanes(op.proj, v, G::E, c, n);
    Vec num(0), den(0);
    for (int64_t k = in.indptr[v]; k < in.indptr[v + 1]; ++k) {
      const int64_t e = in.eids[k], u = in.nbr[k];
      const Vec z = op.lanes(op.proj, u, G::D, c, n) + eh + Vec::loadu(ce + e * D + c, n);
      z.store(e_out + e * D + c, n);
      const Vec s = G::sigmoid(z);
      num = num + op.lanes(op.proj, u, G::B, c, n) * s;
      den = den + s;
    }
    (op.lanes(op.proj, v, G::A, c, n) + num / (den + G::eps())).store(h_out + v * D + c, n);
  });
}

// Backward per destination (in-CSR): the gradient of A h (gh), of each edge's e' (ge plus the
// sigmoid's share, into grad_e), of E h (its sum over in-edges) and, for the per-source pass, of
// each destination's numerator (gnum = gh / (den + 1e-6)).
template <typename scalar_t>
void gated_gcn_dst_pass(const GatedGcn<scalar_t>& op, const scalar_t* gh, const scalar_t* ge, const scalar_t* e_new,
                        const Csr& in, scalar_t* grad_proj, scalar_t* grad_e, scalar_t* gnum) {
  using Vec = Vectorized<scalar_t>;
  using G = GatedGcn<scalar_t>;
  const int64_t D = op.dim;
  op.each_chunk(in, [&](int64_t v, int64_t c, int64_t n) {
    const int64_t k0 = in.indptr[v], k1 = in.indptr[v + 1];
    Vec num(0), den(0);
    for (int64_t k = k0; k < k1; ++k) {
      const Vec s = G::sigmoid(Vec::loadu(e_new + in.eids[k] * D + c, n));
      num = num + op.lanes(op.proj, in.nbr[k], G::B, c, n) * s;
      den = den + s;
    }
    const Vec g = Vec::loadu(gh + v * D + c, n), shifted = den + G::eps();
    const Vec g_num = g / shifted, g_den = Vec(0) - g * num / (shifted * shifted);  // torch's div backward
    g.store(grad_proj + (4 * v + G::A) * D + c, n);
    g_num.store(gnum + v * D + c, n);
    Vec g_eh(0);
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t e = in.eids[k];
      const Vec s = G::sigmoid(Vec::loadu(e_new + e * D + c, n));
      const Vec g_s = g_num * op.lanes(op.proj, in.nbr[k], G::B, c, n) + g_den;
      const Vec g_z = Vec::loadu(ge + e * D + c, n) + g_s * (Vec(1) - s) * s;
      g_z.store(grad_e + e * D + c, n);
      g_eh = g_eh + g_z;
    }
    g_eh.store(grad_proj + (4 * v + G::E) * D + c, n);
  });
}

// Backward per source (out-CSR): the gradients of B h (sum of gnum[j] s) and D h (sum of grad_e).
template <typename scalar_t>
void gated_gcn_src_pass(const GatedGcn<scalar_t>& op, const scalar_t* e_new, const scalar_t* grad_e,
                        const scalar_t* gnum, const Csr& out, scalar_t* grad_proj) {
  using Vec = Vectorized<scalar_t>;
  using G = GatedGcn<scalar_t>;
  const int64_t D = op.dim;
  op.each_chunk(out, [&](int64_t u, int64_t c, int64_t n) {
    Vec g_bh(0), g_dh(0);
    for (int64_t k = out.indptr[u]; k < out.indptr[u + 1]; ++k) {
      const int64_t e = out.eids[k];
      g_bh = g_bh + Vec::loadu(gnum + out.nbr[k] * D + c, n) * G::sigmoid(Vec::loadu(e_new + e * D + c, n));
      g_dh = g_dh + Vec::loadu(grad_e + e * D + c, n);
    }
    g_bh.store(grad_proj + (4 * u + G::B) * D + c, n);
    g_dh.store(grad_proj + (4 * u + G::D) * D + c, n);
  });
}

// ------------------------------------------------------------------ entry points

void check_inputs(const at::Tensor& indptr, const at::Tensor& eids, const at::Tensor& x) {
  TORCH_CHECK(indptr.dtype() == at::kLong && eids.dtype() == at::kLong, "indptr and eids must be int64");
  TORCH_CHECK(indptr.is_contiguous() && eids.is_contiguous() && x.is_contiguous(), "inputs must be contiguous");
  TORCH_CHECK(x.dim() == 2 && x.device().is_cpu(), "x must be a [E, H] CPU tensor");
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> qsoftmax_forward(const at::Tensor& indptr, const at::Tensor& eids,
                                                                 const at::Tensor& x, const at::Tensor& eps,
                                                                 int64_t mode, double taylor_eps) {
  check_inputs(indptr, eids, x);
  const int64_t n = indptr.size(0) - 1, H = x.size(1);
  at::Tensor p = at::empty_like(x), m = at::empty({n, H}, x.options()), total = at::empty({n, H}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "qsoftmax_forward", [&] {
    qsoftmax_forward_kernel<scalar_t>(indptr, eids, x, eps.contiguous(), static_cast<Mode>(mode), taylor_eps, p, m,
                                      total);
  });
  return {p, m, total};
}

std::tuple<at::Tensor, at::Tensor> qsoftmax_backward(const at::Tensor& indptr, const at::Tensor& eids,
                                                     const at::Tensor& x, const at::Tensor& p, const at::Tensor& m,
                                                     const at::Tensor& grad, const at::Tensor& eps, int64_t mode,
                                                     double taylor_eps, bool need_q, bool series) {
  check_inputs(indptr, eids, x);
  at::Tensor gx = at::empty_like(x), e = eps.contiguous();
  at::Tensor gq = need_q ? at::zeros_like(e) : at::Tensor();
  at::Tensor part = at::zeros({NUM_TASKS, e.size(1)}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "qsoftmax_backward", [&] {
    qsoftmax_backward_kernel<scalar_t>(indptr, eids, x, p.contiguous(), m, grad.contiguous(), e,
                                       static_cast<Mode>(mode), taylor_eps, need_q, series, gx, gq, part);
    if (need_q) finish_param_grad<scalar_t>(gq, part);
  });
  return {gx, need_q ? gq : at::empty({0}, x.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, bool> entmax_forward(const at::Tensor& indptr, const at::Tensor& eids,
                                                                    const at::Tensor& x, const at::Tensor& eps,
                                                                    int64_t mode, int64_t n_bisect, int64_t max_iter) {
  check_inputs(indptr, eids, x);
  TORCH_CHECK(eps.size(0) == 1, "entmax's eps is [1, 1] or [1, H]");
  const int64_t n = indptr.size(0) - 1, H = x.size(1);
  at::Tensor p = at::empty_like(x), t = at::empty({n, H}, x.options()), total = at::empty({n, H}, x.options());
  at::Tensor stuck = at::zeros({NUM_TASKS}, x.options().dtype(at::kLong));
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "entmax_forward", [&] {
    entmax_forward_kernel<scalar_t>(indptr, eids, x, eps.contiguous(), static_cast<Mode>(mode), n_bisect, max_iter,
                                    p, t, total, stuck);
  });
  return {p, t, total, stuck.any().item<bool>()};
}

std::tuple<at::Tensor, at::Tensor> entmax_backward(const at::Tensor& indptr, const at::Tensor& eids,
                                                   const at::Tensor& x, const at::Tensor& t, const at::Tensor& p,
                                                   const at::Tensor& grad, const at::Tensor& eps, int64_t mode,
                                                   bool need_alpha, bool series) {
  check_inputs(indptr, eids, x);
  at::Tensor gx = at::empty_like(x), e = eps.contiguous();
  at::Tensor ga = need_alpha ? at::zeros_like(e) : at::Tensor();
  at::Tensor part = at::zeros({NUM_TASKS, e.size(1)}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "entmax_backward", [&] {
    entmax_backward_kernel<scalar_t>(indptr, eids, x, t, p, grad.contiguous(), e, static_cast<Mode>(mode),
                                     need_alpha, series, gx, ga, part);
    if (need_alpha) finish_param_grad<scalar_t>(ga, part);
  });
  return {gx, need_alpha ? ga : at::empty({0}, x.options())};
}

void check_gatv2(const at::Tensor& fs, const at::Tensor& fd, const at::Tensor& attn,
                 const c10::optional<at::Tensor>& fe, const Csr& in) {
  TORCH_CHECK(attn.dim() == 2 && fs.dim() == 2 && fd.dim() == 2, "attn is [H, F], the node rows [N, H F]");
  TORCH_CHECK(fs.size(1) == attn.numel() && fd.size(1) == attn.numel(), "node rows must have H F columns");
  TORCH_CHECK(in.n == fd.size(0), "the in-CSR must have N_dst + 1 entries in indptr");
  TORCH_CHECK(!fe || (fe->dim() == 2 && fe->size(0) == in.indptr[in.n] && fe->size(1) == attn.numel()),
              "edge rows must be [E, H F]");
  for (const at::Tensor& t : {fs, fd, attn}) TORCH_CHECK(t.is_contiguous() && t.device().is_cpu());
  TORCH_CHECK(!fe || (fe->is_contiguous() && fe->scalar_type() == fs.scalar_type()));
  TORCH_CHECK(fd.scalar_type() == fs.scalar_type() && attn.scalar_type() == fs.scalar_type(), "one dtype");
}

template <typename scalar_t>
Gatv2<scalar_t> gatv2_of(const at::Tensor& attn, const c10::optional<at::Tensor>& fe, double slope) {
  return {fe ? fe->data_ptr<scalar_t>() : nullptr, attn.data_ptr<scalar_t>(), attn.size(0), attn.size(1),
          attn.numel(), Vectorized<scalar_t>(static_cast<scalar_t>(slope))};
}

at::Tensor gatv2_logits_forward(const at::Tensor& fs, const at::Tensor& fd, const at::Tensor& attn,
                                const c10::optional<at::Tensor>& fe, double slope, const at::Tensor& in_indptr,
                                const at::Tensor& in_src, const at::Tensor& in_eids) {
  const Csr in = csr_of(in_indptr, in_src, in_eids);
  check_gatv2(fs, fd, attn, fe, in);
  at::Tensor logits = at::empty({in_eids.numel(), attn.size(0)}, fs.options());
  AT_DISPATCH_FLOATING_TYPES(fs.scalar_type(), "gatv2_logits_forward", [&] {
    gatv2_forward_kernel<scalar_t>(gatv2_of<scalar_t>(attn, fe, slope), in, fs.data_ptr<scalar_t>(),
                                   fd.data_ptr<scalar_t>(), logits.data_ptr<scalar_t>());
  });
  return logits;
}

// (grad src rows, grad dst rows, grad attn, grad edge rows); an empty tensor for each not needed.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> gatv2_logits_backward(
    const at::Tensor& grad, const at::Tensor& fs, const at::Tensor& fd, const at::Tensor& attn,
    const c10::optional<at::Tensor>& fe, double slope, const at::Tensor& in_indptr, const at::Tensor& in_src,
    const at::Tensor& in_eids, const at::Tensor& out_indptr, const at::Tensor& out_dst, const at::Tensor& out_eids,
    bool need_src, bool need_dst, bool need_attn, bool need_edge) {
  const Csr in = csr_of(in_indptr, in_src, in_eids), out = csr_of(out_indptr, out_dst, out_eids);
  check_gatv2(fs, fd, attn, fe, in);
  TORCH_CHECK(out.n == fs.size(0) && out_eids.numel() == in_eids.numel(), "the out-CSR must have N_src + 1 entries");
  TORCH_CHECK(grad.dim() == 2 && grad.is_contiguous() && grad.size(0) == in_eids.numel() &&
              grad.size(1) == attn.size(0) && grad.scalar_type() == fs.scalar_type(), "grad must be [E, H]");
  need_edge = need_edge && fe.has_value();
  at::Tensor empty = at::empty({0}, fs.options());
  at::Tensor gs = need_src ? at::empty_like(fs) : empty, gd = need_dst ? at::empty_like(fd) : empty;
  at::Tensor ge = need_edge ? at::empty_like(*fe) : empty;
  at::Tensor part = need_attn ? at::zeros({NUM_TASKS, attn.numel()}, fs.options()) : empty;
  AT_DISPATCH_FLOATING_TYPES(fs.scalar_type(), "gatv2_logits_backward", [&] {
    const Gatv2<scalar_t> op = gatv2_of<scalar_t>(attn, fe, slope);
    const scalar_t* g = grad.data_ptr<scalar_t>();
    const scalar_t *src_rows = fs.data_ptr<scalar_t>(), *dst_rows = fd.data_ptr<scalar_t>();
    if (need_dst || need_attn || need_edge) {
      gatv2_grad_pass<scalar_t>(op, g, in, dst_rows, src_rows, need_dst ? gd.data_ptr<scalar_t>() : nullptr,
                                need_edge ? ge.data_ptr<scalar_t>() : nullptr,
                                need_attn ? part.data_ptr<scalar_t>() : nullptr);
    }
    if (need_src) gatv2_grad_pass<scalar_t>(op, g, out, src_rows, dst_rows, gs.data_ptr<scalar_t>(), nullptr, nullptr);
  });
  at::Tensor ga = need_attn ? part.sum(0).view(attn.sizes()) : empty;  // tasks in a fixed order
  return {gs, gd, ga, ge};
}

void check_rows(const at::Tensor& rows, int64_t heads, const char* name) {
  TORCH_CHECK(rows.dim() == 2 && rows.is_contiguous() && rows.device().is_cpu() && heads > 0 &&
              rows.size(1) % heads == 0, name, " must be contiguous CPU rows [N, H F]");
}

at::Tensor edge_weighted_rows(const at::Tensor& weights, const at::Tensor& rows, int64_t heads,
                              const at::Tensor& indptr, const at::Tensor& nbr, const at::Tensor& eids) {
  const Csr csr = csr_of(indptr, nbr, eids);
  check_rows(rows, heads, "rows");
  TORCH_CHECK(weights.dim() == 2 && weights.is_contiguous() && weights.size(0) == eids.numel() &&
              weights.size(1) == heads && weights.scalar_type() == rows.scalar_type(), "weights must be [E, H]");
  at::Tensor out = at::empty({csr.n, rows.size(1)}, rows.options());
  AT_DISPATCH_FLOATING_TYPES(rows.scalar_type(), "edge_weighted_rows", [&] {
    weighted_rows_kernel<scalar_t>(csr, weights.data_ptr<scalar_t>(), rows.data_ptr<scalar_t>(), heads,
                                   rows.size(1) / heads, out.data_ptr<scalar_t>());
  });
  return out;
}

at::Tensor edge_head_dots(const at::Tensor& own_rows, const at::Tensor& other_rows, int64_t heads,
                          const at::Tensor& indptr, const at::Tensor& nbr, const at::Tensor& eids) {
  const Csr csr = csr_of(indptr, nbr, eids);
  check_rows(own_rows, heads, "own_rows");
  check_rows(other_rows, heads, "other_rows");
  TORCH_CHECK(own_rows.size(0) == csr.n && own_rows.size(1) == other_rows.size(1) &&
              own_rows.scalar_type() == other_rows.scalar_type(), "own_rows must be [N, H F] of the CSR's nodes");
  at::Tensor out = at::empty({eids.numel(), heads}, own_rows.options());
  AT_DISPATCH_FLOATING_TYPES(own_rows.scalar_type(), "edge_head_dots", [&] {
    head_dots_kernel<scalar_t>(csr, own_rows.data_ptr<scalar_t>(), other_rows.data_ptr<scalar_t>(), heads,
                               own_rows.size(1) / heads, out.data_ptr<scalar_t>());
  });
  return out;
}

void check_gated_gcn(const at::Tensor& proj, const at::Tensor& edge_rows, const Csr& in) {
  TORCH_CHECK(proj.dim() == 2 && proj.is_contiguous() && proj.device().is_cpu() && proj.size(1) % 4 == 0 &&
              proj.size(0) == in.n, "proj must be contiguous CPU rows [N, 4 D] of the graph's nodes");
  TORCH_CHECK(edge_rows.dim() == 2 && edge_rows.is_contiguous() && edge_rows.size(0) == in.indptr[in.n] &&
              edge_rows.size(1) == proj.size(1) / 4 && edge_rows.scalar_type() == proj.scalar_type(),
              "edge rows must be contiguous [E, D] of proj's dtype");
}

// (h' [N, D], e' [E, D])
std::tuple<at::Tensor, at::Tensor> gated_gcn_forward(const at::Tensor& proj, const at::Tensor& ce,
                                                     const at::Tensor& in_indptr, const at::Tensor& in_src,
                                                     const at::Tensor& in_eids) {
  const Csr in = csr_of(in_indptr, in_src, in_eids);
  check_gated_gcn(proj, ce, in);
  at::Tensor h = at::empty({in.n, ce.size(1)}, proj.options()), e = at::empty_like(ce);
  AT_DISPATCH_FLOATING_TYPES(proj.scalar_type(), "gated_gcn_forward", [&] {
    const GatedGcn<scalar_t> op{ce.size(1), proj.data_ptr<scalar_t>()};
    gated_gcn_forward_kernel<scalar_t>(op, ce.data_ptr<scalar_t>(), in, h.data_ptr<scalar_t>(), e.data_ptr<scalar_t>());
  });
  return {h, e};
}

// (grad proj [N, 4 D], grad ce [E, D])
std::tuple<at::Tensor, at::Tensor> gated_gcn_backward(
    const at::Tensor& grad_h, const at::Tensor& grad_e, const at::Tensor& proj, const at::Tensor& e_new,
    const at::Tensor& in_indptr, const at::Tensor& in_src, const at::Tensor& in_eids, const at::Tensor& out_indptr,
    const at::Tensor& out_dst, const at::Tensor& out_eids) {
  const Csr in = csr_of(in_indptr, in_src, in_eids), out = csr_of(out_indptr, out_dst, out_eids);
  check_gated_gcn(proj, e_new, in);
  check_gated_gcn(proj, grad_e, in);
  TORCH_CHECK(out.n == in.n && out_eids.numel() == in_eids.numel(), "the out-CSR must be of the same graph");
  TORCH_CHECK(grad_h.dim() == 2 && grad_h.is_contiguous() && grad_h.sizes() == at::IntArrayRef({in.n, e_new.size(1)}) &&
              grad_h.scalar_type() == proj.scalar_type(), "grad_h must be contiguous [N, D]");
  at::Tensor grad_proj = at::empty_like(proj), grad_ce = at::empty_like(e_new), gnum = at::empty_like(grad_h);
  AT_DISPATCH_FLOATING_TYPES(proj.scalar_type(), "gated_gcn_backward", [&] {
    const GatedGcn<scalar_t> op{e_new.size(1), proj.data_ptr<scalar_t>()};
    gated_gcn_dst_pass<scalar_t>(op, grad_h.data_ptr<scalar_t>(), grad_e.data_ptr<scalar_t>(),
                                 e_new.data_ptr<scalar_t>(), in, grad_proj.data_ptr<scalar_t>(),
                                 grad_ce.data_ptr<scalar_t>(), gnum.data_ptr<scalar_t>());
    gated_gcn_src_pass<scalar_t>(op, e_new.data_ptr<scalar_t>(), grad_ce.data_ptr<scalar_t>(),
                                 gnum.data_ptr<scalar_t>(), out, grad_proj.data_ptr<scalar_t>());
  });
  return {grad_proj, grad_ce};
}

}  // namespace

TORCH_LIBRARY(zoo_edge_ops, lib) {
  lib.def("qsoftmax_forward(Tensor indptr, Tensor eids, Tensor x, Tensor eps, int mode, float taylor_eps)"
          " -> (Tensor, Tensor, Tensor)", &qsoftmax_forward);
  lib.def("qsoftmax_backward(Tensor indptr, Tensor eids, Tensor x, Tensor p, Tensor m, Tensor grad, Tensor eps,"
          " int mode, float taylor_eps, bool need_q, bool series) -> (Tensor, Tensor)", &qsoftmax_backward);
  lib.def("entmax_forward(Tensor indptr, Tensor eids, Tensor x, Tensor eps, int mode, int n_bisect, int max_iter)"
          " -> (Tensor, Tensor, Tensor, bool)", &entmax_forward);
  lib.def("entmax_backward(Tensor indptr, Tensor eids, Tensor x, Tensor t, Tensor p, Tensor grad, Tensor eps,"
          " int mode, bool need_alpha, bool series) -> (Tensor, Tensor)", &entmax_backward);
  lib.def("gatv2_logits_forward(Tensor src_rows, Tensor dst_rows, Tensor attn, Tensor? edge_rows, float slope,"
          " Tensor in_indptr, Tensor in_src, Tensor in_eids) -> Tensor", &gatv2_logits_forward);
  lib.def("gatv2_logits_backward(Tensor grad, Tensor src_rows, Tensor dst_rows, Tensor attn, Tensor? edge_rows,"
          " float slope, Tensor in_indptr, Tensor in_src, Tensor in_eids, Tensor out_indptr, Tensor out_dst,"
          " Tensor out_eids, bool need_src, bool need_dst, bool need_attn, bool need_edge)"
          " -> (Tensor, Tensor, Tensor, Tensor)", &gatv2_logits_backward);
  lib.def("edge_weighted_rows(Tensor weights, Tensor rows, int heads, Tensor indptr, Tensor nbr, Tensor eids)"
          " -> Tensor", &edge_weighted_rows);
  lib.def("edge_head_dots(Tensor own_rows, Tensor other_rows, int heads, Tensor indptr, Tensor nbr, Tensor eids)"
          " -> Tensor", &edge_head_dots);
  lib.def("gated_gcn_forward(Tensor proj, Tensor edge_rows, Tensor in_indptr, Tensor in_src, Tensor in_eids)"
          " -> (Tensor, Tensor)", &gated_gcn_forward);
  lib.def("gated_gcn_backward(Tensor grad_h, Tensor grad_e, Tensor proj, Tensor e_new, Tensor in_indptr,"
          " Tensor in_src, Tensor in_eids, Tensor out_indptr, Tensor out_dst, Tensor out_eids) -> (Tensor, Tensor)",
          &gated_gcn_backward);
}
