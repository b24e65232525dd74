// Rung 4, host side: the float64 reference, the wall, the launch of the editable kernel
// (kernels/editable/sources/attention.cu) on either backend, the unfused variant, and the `run` / `bench`
// wiring.
#include "kernels/rungs/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "kernels/runtime/cell_state.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "kernels/rungs/softmax.h"

namespace kl::attention {

// The editable kernel writes a cell's state as the literals 0 (seen) and 1 (masked): kept in step here.
static_assert(kCellNormal == 0 && kCellMasked == 1, "kernels/editable/sources/attention.cu writes 0 and 1");

bool supported_head_dim(int d) { return d == 16 || d == 32 || d == 64 || d == 128; }
const char* head_dims_text() { return "16, 32, 64, 128"; }

std::string Shape::text() const {
  std::ostringstream s;
  s << "B=" << batch << " H=" << heads << " Lq=" << lq << " Lk=" << lk << " d=" << d;
  return s.str();
}

float Options::resolved_scale(int d) const {
  return scale > 0 ? float(scale) : float(1.0 / std::sqrt(double(d)));
}

// [SECTION] The wall -------------------------------------------------------------------------------

int64_t smem_bytes(int64_t lk, int d) {
  // K and V of the whole (batch, head), plus this program's kBlockQ query rows.
  return (2 * lk * int64_t(d) + int64_t(kBlockQ) * d) * int64_t(sizeof(float));
}

int64_t max_lk(int d, int64_t limit) {
  const int64_t fixed = int64_t(kBlockQ) * d * int64_t(sizeof(float));
  if (limit < fixed) return 0;
  return (limit - fixed) / (2 * int64_t(d) * int64_t(sizeof(float)));
}

int64_t smem_limit(Backend b) { return device_info(b).smem_per_block_optin; }

void check_wall(int64_t lk, int d, int64_t limit, bool limit_assumed) {
  const int64_t need = smem_bytes(lk, d);
  if (need <= limit) return;
  std::ostringstream m;
  m << "attention: Lk=" << lk << " at d=" << d << " needs " << need
    << " bytes of shared memory per block ((2*Lk*d + " << kBlockQ << "*d)*4: all of K and V, and the block's "
    << kBlockQ << " query rows); the limit is " << limit << " bytes"
    << (limit_assumed ? " (assumed: an H200's opt-in maximum, CPU backend)" : " (this device's opt-in maximum)")
    << "; the largest Lk that fits at d=" << d << " is " << max_lk(d, limit)
    << ". Rung 5 (flash-attention) streams K and V in tiles and has no such wall.";
  throw InputError(m.str());
}

void check_shape(Backend b, const Shape& s) {
  if (!supported_head_dim(s.d))
    throw InputError(out_of_range_message("d (head dimension)", std::to_string(s.d),
                                          std::string("one of ") + head_dims_text()));
  require_range("Lq", s.lq, 1, kMaxLen);
  require_range("Lk", s.lk, 1, kMaxLen);
  require_range("B", s.batch, 1, 65535);
  require_range("H", s.heads, 1, 65535);
  require_range("B*H", s.bh(), 1, 65535);
  const DeviceInfo info = device_info(b);
  check_wall(s.lk, s.d, info.smem_per_block_optin, info.assumed);
}

Shape shape_from_arrays(const Array& q, const Array& k, const Array& v) {
  auto rank_ok = [](const Array& a) { return a.shape.size() == 2 || a.shape.size() == 4; };
  if (!rank_ok(q)) throw InputError("--in q: shape " + q.shape_text() + " must be [L, d] or [B, H, L, d]");
  if (!rank_ok(k)) throw InputError("--in k: shape " + k.shape_text() + " must be [L, d] or [B, H, L, d]");
  if (k.shape != v.shape)
    throw InputError("--in v: shape " + v.shape_text() + " does not match k's " + k.shape_text());
  if (q.shape.size() != k.shape.size())
    throw InputError("--in k: shape " + k.shape_text() + " has another rank than q's " + q.shape_text());
  const size_t r = q.shape.size();
  Shape s;
  if (r == 4) {
    if (q.shape[0] != k.shape[0] || q.shape[1] != k.shape[1])
      throw InputError("--in k: batch and heads of " + k.shape_text() + " do not match q's " + q.shape_text());
    s.batch = q.shape[0];
    s.heads = q.shape[1];
  }
  if (q.shape[r - 1] != k.shape[r - 1])
    throw InputError("--in k: head dimension of " + k.shape_text() + " does not match q's " + q.shape_text());
  s.lq = q.shape[r - 2];
  s.lk = k.shape[r - 2];
  s.d = int(q.shape[r - 1]);
  if (!supported_head_dim(s.d))
    throw InputError(out_of_range_message("d (last dimension of q)", std::to_string(q.shape[r - 1]),
                                          std::string("one of ") + head_dims_text()));
  return s;
}

// [SECTION] Reference (float64) --------------------------------------------------------------------

void reference(const float* q, const float* k, const float* v, const Shape& s, const Options& o,
               double* out, double* weights) {
  const double scale = o.scale > 0 ? o.scale : 1.0 / std::sqrt(double(s.d));
  const int64_t d = s.d;
  std::vector<double> row(size_t(s.lk));
  for (int64_t bh = 0; bh < s.bh(); ++bh) {
    const float* kb = k + bh * s.lk * d;
    const float* vb = v + bh * s.lk * d;
    for (int64_t i = 0; i < s.lq; ++i) {
      const float* qi = q + (bh * s.lq + i) * d;
      double* oi = out + (bh * s.lq + i) * d;
      double* wi = weights ? weights + (bh * s.lq + i) * s.lk : nullptr;
      // Written out here rather than through visible_keys(), so the kernels' mask is checked
      // against an independent statement of it: query i sees key j iff j <= i + (Lk - Lq).
      int64_t n = 0;
      for (int64_t j = 0; j < s.lk; ++j)
        if (!o.causal || j <= i + (s.lk - s.lq)) n = j + 1;
      std::fill(oi, oi + d, 0.0);
      if (wi) std::fill(wi, wi + s.lk, 0.0);
      if (n == 0) continue;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t c = 0; c < d; ++c) acc += double(qi[c]) * double(kb[j * d + c]);
        row[size_t(j)] = acc * scale;
        mx = std::max(mx, row[size_t(j)]);
      }
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += (row[size_t(j)] = std::exp(row[size_t(j)] - mx));
      for (int64_t j = 0; j < n; ++j) {
        const double p = row[size_t(j)] / sum;
        if (wi) wi[j] = p;
        for (int64_t c = 0; c < d; ++c) oi[c] += p * double(vb[j * d + c]);
      }
    }
  }
}

// [SECTION] The kernel: kernels/editable/sources/attention.cu on either backend ---------------------

namespace detail {

editable::Launch traced_launch(const float* q, const float* k, const float* v, float* out, const Shape& s,
                               float scale, bool causal, const Extras& x) {
  using editable::DType;
  editable::Launch l;
  l.rung = "attention";
  l.kernel = "attention_smem";
  l.grid.x = uint32_t((s.lq + kBlockQ - 1) / kBlockQ);
  l.grid.y = uint32_t(s.bh());
  l.block.x = kWarps * 32;
  l.shared_bytes = size_t(smem_bytes(s.lk, s.d));
  const int64_t nq = s.bh() * s.lq * s.d, nk = s.bh() * s.lk * s.d, cells = s.bh() * s.lq * s.lk * x.channels;
  auto view = [&](const char* name, float* p) {
    return p ? editable::tensor(name, DType::F32, p, cells, true) : editable::absent(name, DType::F32);
  };
  l.args = {editable::tensor("q", DType::F32, const_cast<float*>(q), nq, false),
            editable::tensor("k", DType::F32, const_cast<float*>(k), nk, false),
            editable::tensor("v", DType::F32, const_cast<float*>(v), nk, false),
            editable::tensor("out", DType::F32, out, nq, true, x.out_writer, x.out_count),
            view("scores", x.scores),
            view("weights", x.weights),
            editable::i64("lq", s.lq),
            editable::i64("lk", s.lk),
            editable::i32("d", s.d),
            editable::f32("scale", scale),
            editable::i32("causal", causal ? 1 : 0),
            editable::i32("channels", x.channels)};
  return l;
}

}  // namespace detail

editable::Fault run(Backend b, const float* q, const float* k, const float* v, float* out, const Shape& s,
                    const Options& o, const Extras& x, const editable::Source* src) {
  check_shape(b, s);
  require_range("extras.channels", x.channels, 1, 4);
  const editable::Launch l = detail::traced_launch(q, k, v, out, s, o.resolved_scale(s.d), o.causal, x);
  const editable::Fault f = editable::launch(b, src, l);
  if (!src && f.kind != editable::Fault::None) throw RuntimeError("attention (shipped): " + f.text());
  return f;
}

// [SECTION] Unfused (standard) attention: S and P through device memory --------------------------------

void check_unfused_shape(const Shape& s) {
  if (!supported_head_dim(s.d))
    throw InputError(out_of_range_message("d (head dimension)", std::to_string(s.d),
                                          std::string("one of ") + head_dims_text()));
  require_range("Lq", s.lq, 1, int64_t(65535) * kUnfusedTile);  // grid.y of the 16 x 16 tiles
  require_range("Lk", s.lk, 1, kMaxLen);
  require_range("B", s.batch, 1, 65535);
  require_range("H", s.heads, 1, 65535);
  require_range("B*H", s.bh(), 1, 65535);
  const double cells = double(s.bh()) * double(s.lq) * double(s.lk);
  if (cells > double(softmax::kMaxElements))
    throw InputError(out_of_range_message("B*H*Lq*Lk (cells of S and P)", s.text(),
                                          "at most 2147483647 cells (rung 3's softmax reads S whole)"));
}

namespace detail {
namespace {
// One program of the scores kernel: the 16 x 16 tile (query block qb, key block kb) of S for one bh.
void scores_tile(const float* q, const float* k, float* S, const Shape& s, float scale, bool causal, int64_t bh,
                 int64_t qb, int64_t kb) {
  const int64_t d = s.d;
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t i = qb * kUnfusedTile; i < std::min(s.lq, (qb + 1) * kUnfusedTile); ++i) {
    const int64_t n = visible_keys(i, s.lq, s.lk, causal);
    const float* qi = q + (bh * s.lq + i) * d;
    for (int64_t j = kb * kUnfusedTile; j < std::min(s.lk, (kb + 1) * kUnfusedTile); ++j) {
      float acc = 0;
      for (int64_t c = 0; c < d; ++c) acc += qi[c] * k[(bh * s.lk + j) * d + c];
      S[(bh * s.lq + i) * s.lk + j] = j < n ? acc * scale : ninf;
    }
  }
}

// One program of the P V kernel: the 16 x 16 tile (query block qb, output columns cb) of O for one bh.
void pv_tile(const float* P, const float* v, float* out, const Shape& s, int64_t bh, int64_t qb, int64_t cb) {
  const int64_t d = s.d;
  for (int64_t i = qb * kUnfusedTile; i < std::min(s.lq, (qb + 1) * kUnfusedTile); ++i)
    for (int64_t c = cb * kUnfusedTile; c < (cb + 1) * kUnfusedTile; ++c) {
      float acc = 0;
      for (int64_t j = 0; j < s.lk; ++j) acc += P[(bh * s.lq + i) * s.lk + j] * v[(bh * s.lk + j) * d + c];
      out[(bh * s.lq + i) * d + c] = acc;
    }
}

void scores_cpu(const float* q, const float* k, float* S, const Shape& s, float scale, bool causal) {
  const int64_t qbs = (s.lq + kUnfusedTile - 1) / kUnfusedTile, kbs = (s.lk + kUnfusedTile - 1) / kUnfusedTile;
  for (int64_t bh = 0; bh < s.bh(); ++bh)
    for (int64_t qb = 0; qb < qbs; ++qb)
      for (int64_t kb = 0; kb < kbs; ++kb) scores_tile(q, k, S, s, scale, causal, bh, qb, kb);
}

void pv_cpu(const float* P, const float* v, float* out, const Shape& s) {
  const int64_t qbs = (s.lq + kUnfusedTile - 1) / kUnfusedTile, cbs = s.d / kUnfusedTile;
  for (int64_t bh = 0; bh < s.bh(); ++bh)
    for (int64_t qb = 0; qb < qbs; ++qb)
      for (int64_t cb = 0; cb < cbs; ++cb) pv_tile(P, v, out, s, bh, qb, cb);
}
}  // namespace
}  // namespace detail

void run_unfused(Backend b, const float* q, const float* k, const float* v, float* out, float* scores,
                 float* weights, const Shape& s, const Options& o) {
  check_unfused_shape(s);
  if (!scores || !weights) throw RuntimeError("attention unfused: scores and weights scratch are required");
  const float scale = o.resolved_scale(s.d);
  // 1. S = Q K^T * scale to device memory
  if (b == Backend::Cpu) {
    detail::scores_cpu(q, k, scores, s, scale, o.causal);
  } else {
#ifdef KL_HAS_CUDA
    detail::scores_cuda(q, k, scores, s, scale, o.causal);
#else
    throw RuntimeError("built without CUDA");
#endif
  }
  // 2. rung 3's softmax reads S and writes P (rows that see nothing: all -inf, so all 0)
  const int64_t rows = s.bh() * s.lq;
  const softmax::Variant sv =
      s.lk <= softmax::fixed_max_cols(device_info(b)) ? softmax::Variant::Fixed : softmax::Variant::Online;
  softmax::run(b, sv, scores, weights, rows, s.lk);
  // 3. O = P V
  if (b == Backend::Cpu) return detail::pv_cpu(weights, v, out, s);
#ifdef KL_HAS_CUDA
  detail::pv_cuda(weights, v, out, s);
#endif
}

double traffic_bytes_smem(const Shape& s) {
  const double d = s.d, programs = double((s.lq + kBlockQ - 1) / kBlockQ);
  return double(s.bh()) * 4.0 * (2.0 * double(s.lq) * d + programs * 2.0 * double(s.lk) * d);
}

double traffic_bytes_unfused(const Shape& s) {
  const double d = s.d, lq = double(s.lq), lk = double(s.lk);
  return double(s.bh()) * 4.0 * (2.0 * lq * d + 2.0 * lk * d + 4.0 * lq * lk);
}

// [SECTION] Command line: run and bench ------------------------------------------------------------

namespace {
// --weights for bh*lq*lk cells up to this many (1 GiB of float32); larger runs skip the weights.
constexpr int64_t kMaxWeightCells = int64_t(1) << 28;

std::vector<int64_t> weights_shape(const Array& q, const Shape& s) {
  if (q.shape.size() == 4) return {s.batch, s.heads, s.lq, s.lk};
  return {s.lq, s.lk};
}

bench::Row bench_row(const char* variant, const Shape& s, const bench::Timing& t, double bytes) {
  bench::Row row;
  row.kernel = "attention";
  row.variant = variant;
  row.shape = s.text();
  row.ms = t.median_ms;
  const double flops = 4.0 * double(s.bh()) * double(s.lq) * double(s.lk) * s.d;
  row.tflops = bench::tflops(flops, t.median_ms);
  row.gbs = t.median_ms > 0 ? bytes / (t.median_ms * 1e-3) / 1e9 : 0;  // the counted traffic / time
  return row;
}

// smem (rung 4) and unfused (standard attention) on the same shape and inputs, in the same run; the
// unfused row's ratio is rung 4's time over its own (below 1: slower than rung 4).
std::vector<bench::Row> bench_rows(Backend b, bool quick) {
  std::vector<bench::Row> rows;
  const DeviceInfo info = device_info(b);
  for (int d : {64, 128}) {
    Shape s;
    s.batch = quick ? 1 : 4;
    s.heads = quick ? 1 : 8;
    s.lq = quick ? 64 : 4096;
    s.lk = std::min<int64_t>(quick ? 64 : 4096, max_lk(d, info.smem_per_block_optin));
    s.d = d;
    const size_t nq = size_t(s.bh() * s.lq * d), nk = size_t(s.bh() * s.lk * d), cells = size_t(s.bh() * s.lq * s.lk);
    Buffer<float> dq(b, nq), dk(b, nk), dv(b, nk), dout(b, nq), ds(b, cells), dp(b, cells);
    std::vector<float> h(nk);
    for (size_t i = 0; i < nk; ++i) h[i] = float((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    dk.upload(h);
    dv.upload(h);
    h.resize(nq);
    dq.upload(h);
    Options o;
    const int warm = quick ? 1 : 5, reps = quick ? 3 : 20;
    const bench::Timing t4 = bench::time(b, [&] { run(b, dq.data(), dk.data(), dv.data(), dout.data(), s, o); }, warm, reps);
    const bench::Timing tu = bench::time(
        b, [&] { run_unfused(b, dq.data(), dk.data(), dv.data(), dout.data(), ds.data(), dp.data(), s, o); }, warm,
        reps);
    bench::Row r4 = bench_row("smem", s, t4, traffic_bytes_smem(s));
    r4.baseline = "none (the slow teaching kernel; Lk capped by the wall)";
    bench::Row ru = bench_row("unfused", s, tu, traffic_bytes_unfused(s));
    ru.ratio = tu.median_ms > 0 ? t4.median_ms / tu.median_ms : 0;
    ru.baseline = "smem (rung 4), same run";
    rows.push_back(r4);
    rows.push_back(ru);
  }
  return rows;
}
}  // namespace

// Off by default, as in PyTorch's scaled_dot_product_attention and FlashAttention: a kernel run on
// someone's Q, K, V should not mask unless asked.
ParamSpec param::causal() {
  return bool_param("causal", false, "causal mask, bottom-right aligned: query i sees keys j <= i + Lk - Lq");
}
ParamSpec param::scale() { return float_param("scale", 0, 1e6, 0, "softmax scale; 0 means 1/sqrt(d)"); }

KernelEntry entry() {
  KernelEntry e;
  e.name = "attention";
  e.summary = "softmax(Q K^T * scale) V with all of K and V in shared memory: the wall";
  e.variants = {"smem", "unfused"};
  e.untraced_variants = {"unfused"};
  e.default_variant = "smem";
  e.inputs = {"q", "k", "v"};
  e.params = {param::causal(), param::scale()};
  e.run = [](const KernelRunRequest& r) {
    const Array& q = r.inputs.at("q");
    const Array& k = r.inputs.at("k");
    const Array& v = r.inputs.at("v");
    const Shape s = shape_from_arrays(q, k, v);
    const bool unfused = r.variant == "unfused";
    if (unfused) check_unfused_shape(s);
    else check_shape(r.backend, s);
    Options o;
    o.causal = r.params.get_bool("causal");
    o.scale = r.params.get_float("scale");
    Buffer<float> dq(r.backend, q.data.size()), dk(r.backend, k.data.size()), dv(r.backend, v.data.size());
    dq.upload(q.data);
    dk.upload(k.data);
    dv.upload(v.data);
    Buffer<float> dout(r.backend, q.data.size());
    dout.fill_bytes(0xFF);  // poison: anything the kernel does not write comes back NaN
    const int64_t cells = s.bh() * s.lq * s.lk;
    Buffer<float> dw, ds;
    Extras x;
    if (cells <= kMaxWeightCells || unfused) {  // unfused needs S and P whatever their size
      dw.resize(r.backend, size_t(cells));
      dw.fill_bytes(0xFF);
      x.weights = dw.data();
    }
    if (unfused && r.source)
      throw InputError("--source: --variant unfused is not editable; the editable source is the smem kernel's");
    if (unfused) {
      ds.resize(r.backend, size_t(cells));
      ds.fill_bytes(0xFF);
      run_unfused(r.backend, dq.data(), dk.data(), dv.data(), dout.data(), ds.data(), dw.data(), s, o);
    } else {
      const editable::Fault f = run(r.backend, dq.data(), dk.data(), dv.data(), dout.data(), s, o, x, r.source);
      if (f.kind != editable::Fault::None) throw editable::FaultError(f);
    }
    KernelRunResult res;
    res.outputs["out"] = Array{q.shape, dout.to_host()};
    if (x.weights && cells <= kMaxWeightCells) res.outputs["weights"] = Array{weights_shape(q, s), dw.to_host()};
    return res;
  };
  e.bench = [](Backend b, bool quick) { return bench_rows(b, quick); };
  return e;
}

}  // namespace kl::attention
