// Rung 3, host side: the float64 reference, the traced launch of the editable kernel (buggy and fixed), the
// CPU backend's untraced program-by-program versions (a program's BLOCK_SIZE elements reduced as a tree,
// as a block reduces them), `run`, `bench` and the registry entry.
#include "kernels/rungs/softmax.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "kernels/runtime/cell_state.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/params.h"

namespace kl::softmax {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kThreePassBlock = 256;

}  // namespace

const char* variant_name(Variant v) {
  switch (v) {
    case Variant::Buggy: return "buggy";
    case Variant::Fixed: return "fixed";
    case Variant::Online: return "online";
    case Variant::ThreePass: return "three_pass";
  }
  return "?";
}

Variant parse_variant(const std::string& name) {
  for (Variant v : {Variant::Buggy, Variant::Fixed, Variant::Online, Variant::ThreePass})
    if (name == variant_name(v)) return v;
  throw InputError("--variant " + name + ": must be one of buggy|fixed|online|three_pass");
}

int64_t fixed_max_cols(const DeviceInfo& d) { return int64_t(d.max_threads_per_block) * kMaxRowRegsPerThread; }

int64_t block_size(Variant v, int64_t n_cols, int chunk) {
  switch (v) {
    case Variant::Buggy: return kBuggyBlock;
    case Variant::Fixed: return next_power_of_2(n_cols);
    case Variant::Online: return chunk;
    case Variant::ThreePass: return kThreePassBlock;
  }
  return 0;
}

void reference(const float* x, double* out, int64_t rows, int64_t n_cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n_cols;
    double* o = out + r * n_cols;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < n_cols; ++c) m = std::max(m, double(xr[c]));
    if (m == -std::numeric_limits<double>::infinity()) {  // nothing to attend to: 0, not NaN
      std::fill(o, o + n_cols, 0.0);
      continue;
    }
    double s = 0;
    for (int64_t c = 0; c < n_cols; ++c) s += (o[c] = std::exp(double(xr[c]) - m));
    for (int64_t c = 0; c < n_cols; ++c) o[c] /= s;
  }
}

void SoftmaxTrace::reset(Backend b, int64_t rows_, int64_t n_cols_, int64_t trace_row_, int chunk_) {
  rows = rows_;
  n_cols = n_cols_;
  trace_row = trace_row_;
  chunk = chunk_;
  n_chunks = (n_cols + chunk - 1) / chunk;
  writer.resize(b, size_t(rows * n_cols));
  write_count.resize(b, size_t(rows * n_cols));
  chunk_max.resize(b, size_t(n_chunks));
  running_max.resize(b, size_t(n_chunks));
  running_sum.resize(b, size_t(n_chunks));
  writer.fill_bytes(0xFF);
  write_count.fill_bytes(0);
  chunk_max.fill_bytes(0xFF);
  running_max.fill_bytes(0xFF);
  running_sum.fill_bytes(0xFF);
}

SoftmaxTraceView SoftmaxTrace::view() {
  SoftmaxTraceView v;
  v.writer = writer.data();
  v.write_count = write_count.data();
  v.chunk_max = chunk_max.data();
  v.running_max = running_max.data();
  v.running_sum = running_sum.data();
  v.rows = rows;
  v.n_cols = n_cols;
  v.trace_row = trace_row;
  v.n_chunks = n_chunks;
  v.chunk = chunk;
  return v;
}

namespace detail {

void check_shape(Backend b, Variant v, int64_t rows, int64_t n_cols, int chunk) {
  require_range("rows", rows, 1, kMaxElements);
  require_range("n_cols", n_cols, 1, kMaxElements);
  if (rows * n_cols > kMaxElements)
    throw InputError(out_of_range_message("rows x n_cols", std::to_string(rows) + " x " + std::to_string(n_cols),
                                          "at most 2147483647 elements"));
  if (v == Variant::Online && (!is_power_of_2(chunk) || chunk < kMinChunk || chunk > kMaxChunk))
    throw InputError(out_of_range_message("chunk", std::to_string(chunk), "powers of two in [32, 4096]"));
  if (v == Variant::Fixed) {
    const DeviceInfo d = device_info(b);
    const int64_t limit = fixed_max_cols(d);
    if (n_cols > limit)
      throw InputError("softmax fixed: n_cols=" + std::to_string(n_cols) + " needs BLOCK_SIZE=" +
                       std::to_string(next_power_of_2(n_cols)) + ", past the widest row this build's fixed kernel "
                       "holds on " + d.name + ": " + std::to_string(limit) + " columns (" +
                       std::to_string(d.max_threads_per_block) + " threads x " +
                       std::to_string(kMaxRowRegsPerThread) +
                       " row values each in registers); use --variant online, which takes any width");
  }
}

editable::Launch traced_launch(Variant v, const float* x, float* out, int64_t rows, int64_t n_cols,
                               SoftmaxTraceView* t, int chunk) {
  using editable::DType;
  const int64_t block = block_size(v, n_cols, chunk);
  editable::Launch l;
  l.rung = "softmax";
  l.kernel = v == Variant::Online ? "softmax_online_traced" : "softmax_traced";
  l.grid.x = uint32_t(rows);
  // Triton's tutorial: num_warps 4, 8 from BLOCK_SIZE 2048, 16 from 4096; a block of 32 * num_warps threads.
  const int64_t threads = 32 * (block >= 4096 ? 16 : block >= 2048 ? 8 : 4);
  l.block.x = uint32_t(block < threads ? block : threads);
  l.args = {editable::tensor("x", DType::F32, const_cast<float*>(x), rows * n_cols, false),
            editable::tensor("out", DType::F32, out, rows * n_cols, true, t ? t->writer : nullptr,
                             t ? t->write_count : nullptr)};
  if (v == Variant::Online) {
    const std::pair<const char*, float*> records[] = {{"chunk_max", t ? t->chunk_max : nullptr},
                                                      {"running_max", t ? t->running_max : nullptr},
                                                      {"running_sum", t ? t->running_sum : nullptr}};
    for (const auto& [name, rec] : records)
      l.args.push_back(rec ? editable::tensor(name, DType::F32, rec, t->n_chunks, true)
                           : editable::absent(name, DType::F32));
    l.args.push_back(editable::i64("n_cols", n_cols));
    l.args.push_back(editable::i32("chunk", chunk));
    l.args.push_back(editable::i64("trace_row", t ? t->trace_row : -1));
    return l;
  }
  l.args.push_back(editable::i64("n_cols", n_cols));
  l.args.push_back(editable::i32("BLOCK_SIZE", int32_t(block)));
  return l;
}

// ---- the CPU backend: one program per row, its BLOCK_SIZE elements in the order a CUDA block reduces them -----------------------------

// Tree reduction over a program's elements (pairwise, as a block reduces): max or sum.
template <class Op>
static float tree(std::vector<float>& v, size_t n, Op op) {
  for (size_t width = n; width > 1; width = (width + 1) / 2) {
    const size_t half = (width + 1) / 2;
    for (size_t i = 0; i + half < width; ++i) v[i] = op(v[i], v[i + half]);
  }
  return v[0];
}
static float fmax2(float a, float b) { return a > b ? a : b; }
static float add2(float a, float b) { return a + b; }

static void record(SoftmaxTraceView* t, int64_t row, int64_t idx) {
  if (!t) return;
  t->writer[idx] = int32_t(row);
  t->write_count[idx] += 1;
}

// buggy and fixed: BLOCK elements at offsets 0..BLOCK-1 of the row, masked by col < n_cols.
static void program_one_block(int64_t row, const float* x, float* out, int64_t n_cols, int64_t block,
                              SoftmaxTraceView* t) {
  thread_local std::vector<float> lanes, scratch;
  lanes.resize(size_t(block));
  scratch.resize(size_t(block));
  const float* xr = x + row * n_cols;
  for (int64_t l = 0; l < block; ++l) lanes[size_t(l)] = l < n_cols ? xr[l] : kNegInf;
  scratch = lanes;
  const float m = tree(scratch, size_t(block), fmax2);
  const float m_safe = m == kNegInf ? 0.0f : m;
  for (int64_t l = 0; l < block; ++l) lanes[size_t(l)] = std::exp(lanes[size_t(l)] - m_safe);
  scratch = lanes;
  const float s = tree(scratch, size_t(block), add2);
  const float inv = s > 0.0f ? 1.0f / s : 0.0f;
  for (int64_t l = 0; l < block && l < n_cols; ++l) {
    out[row * n_cols + l] = lanes[size_t(l)] * inv;
    record(t, row, row * n_cols + l);
  }
}

// online: chunk by chunk with the running max and sum, then the normalising pass.
static void program_online(int64_t row, const float* x, float* out, int64_t n_cols, int chunk,
                           SoftmaxTraceView* t) {
  thread_local std::vector<float> lanes;
  lanes.resize(size_t(chunk));
  const float* xr = x + row * n_cols;
  float m = kNegInf, l = 0.0f;
  for (int64_t k = 0, c0 = 0; c0 < n_cols; ++k, c0 += chunk) {
    for (int j = 0; j < chunk; ++j) lanes[size_t(j)] = c0 + j < n_cols ? xr[c0 + j] : kNegInf;
    const float cmax = tree(lanes, size_t(chunk), fmax2);
    const float m_new = std::max(m, cmax);                     // m_new = max(m_old, rowmax(chunk))
    const float m_safe = m_new == kNegInf ? 0.0f : m_new;
    for (int j = 0; j < chunk; ++j) lanes[size_t(j)] = c0 + j < n_cols ? std::exp(xr[c0 + j] - m_safe) : 0.0f;
    const float csum = tree(lanes, size_t(chunk), add2);
    const float alpha = m == kNegInf ? 0.0f : std::exp(m - m_new);  // rescale the old sum to the new max
    l = l * alpha + csum;                                      // l_new = l_old * exp(m_old - m_new) + rowsum
    m = m_new;
    if (t && row == t->trace_row && k < t->n_chunks) {
      t->chunk_max[k] = cmax;
      t->running_max[k] = m;
      t->running_sum[k] = l;
    }
  }
  const float m_safe = m == kNegInf ? 0.0f : m;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int64_t c = 0; c < n_cols; ++c) {
    out[row * n_cols + c] = std::exp(xr[c] - m_safe) * inv;
    record(t, row, row * n_cols + c);
  }
}

// three_pass: three launches over all rows, intermediates in memory (scratch: rowmax, rowsum).
static void run_cpu_three_pass(const float* x, float* out, int64_t rows, int64_t n_cols, float* scratch,
                               SoftmaxTraceView* t) {
  float* rowmax = scratch;
  float* rowsum = scratch + rows;
  std::vector<float> lanes(kThreePassBlock);
  for (int64_t r = 0; r < rows; ++r) {  // kernel 1: rowmax
    std::fill(lanes.begin(), lanes.end(), kNegInf);
    for (int64_t c = 0; c < n_cols; ++c) lanes[size_t(c % kThreePassBlock)] = fmax2(lanes[size_t(c % kThreePassBlock)], x[r * n_cols + c]);
    rowmax[r] = tree(lanes, kThreePassBlock, fmax2);
  }
  for (int64_t r = 0; r < rows; ++r) {  // kernel 2: e = exp(x - m) into out, rowsum
    const float m_safe = rowmax[r] == kNegInf ? 0.0f : rowmax[r];
    std::fill(lanes.begin(), lanes.end(), 0.0f);
    for (int64_t c = 0; c < n_cols; ++c) {
      const float e = std::exp(x[r * n_cols + c] - m_safe);
      out[r * n_cols + c] = e;
      lanes[size_t(c % kThreePassBlock)] += e;
    }
    rowsum[r] = tree(lanes, kThreePassBlock, add2);
  }
  for (int64_t r = 0; r < rows; ++r) {  // kernel 3: normalise in place
    const float inv = rowsum[r] > 0.0f ? 1.0f / rowsum[r] : 0.0f;
    for (int64_t c = 0; c < n_cols; ++c) {
      out[r * n_cols + c] *= inv;
      record(t, r, r * n_cols + c);
    }
  }
}

static void run_cpu(Variant v, const float* x, float* out, int64_t rows, int64_t n_cols, SoftmaxTraceView* t,
                    int chunk, float* scratch) {
  switch (v) {
    case Variant::Buggy:
      for (int64_t r = 0; r < rows; ++r) program_one_block(r, x, out, n_cols, kBuggyBlock, t);
      break;
    case Variant::Fixed: {
      const int64_t block = next_power_of_2(n_cols);
      for (int64_t r = 0; r < rows; ++r) program_one_block(r, x, out, n_cols, block, t);
      break;
    }
    case Variant::Online:
      for (int64_t r = 0; r < rows; ++r) program_online(r, x, out, n_cols, chunk, t);
      break;
    case Variant::ThreePass: run_cpu_three_pass(x, out, rows, n_cols, scratch, t); break;
  }
}

}  // namespace detail

editable::Fault run(Backend b, Variant v, const float* x, float* out, int64_t rows, int64_t n_cols,
                    SoftmaxTraceView* trace, int chunk, float* scratch, const editable::Source* src) {
  detail::check_shape(b, v, rows, n_cols, chunk);
  if (trace && (trace->rows != rows || trace->n_cols != n_cols || (v == Variant::Online && trace->chunk != chunk)))
    throw RuntimeError("softmax: trace was reset for another shape");
  const bool editable_variant = v != Variant::ThreePass;
  if (src && !editable_variant)
    throw InputError(std::string("--source: --variant ") + variant_name(v) +
                     " is not editable; the editable source holds buggy, fixed (softmax_traced) and online "
                     "(softmax_online_traced)");
  if (editable_variant && (trace || src)) {
    const editable::Fault f = editable::launch(b, src, detail::traced_launch(v, x, out, rows, n_cols, trace, chunk));
    if (!src && f.kind != editable::Fault::None) throw RuntimeError("softmax (shipped): " + f.text());
    return f;
  }
  Buffer<float> own;
  if (v == Variant::ThreePass && !scratch) {
    own.resize(b, size_t(2 * rows));
    scratch = own.data();
  }
  if (b == Backend::Cpu) {
    detail::run_cpu(v, x, out, rows, n_cols, trace, chunk, scratch);
    return {};
  }
#ifdef KL_HAS_CUDA
  detail::run_cuda(v, x, out, rows, n_cols, trace, chunk, scratch);
  if (own.size()) mem::synchronize(b);  // `own` is freed on return; the kernels must be done with it
  return {};
#else
  throw RuntimeError("built without CUDA");
#endif
}

void output_cells(Backend b, const float* out, const int32_t* writer, int64_t n_cols, int64_t row0, int64_t n_rows,
                  float* cells) {
  if (b == Backend::Cpu) {
    for (int64_t i = 0; i < n_rows * n_cols; ++i) {
      const int64_t src = row0 * n_cols + i;
      cells[2 * i] = out[src];
      cells[2 * i + 1] = cell_value(writer[src] < 0 ? kCellUnwritten : kCellNormal);
    }
    return;
  }
#ifdef KL_HAS_CUDA
  detail::output_cells_cuda(out, writer, n_cols, row0, n_rows, cells);
#else
  throw RuntimeError("built without CUDA");
#endif
}

void value_cells(Backend b, const float* values, int64_t count, float* cells) {
  if (b == Backend::Cpu) {
    for (int64_t i = 0; i < count; ++i) cells[2 * i] = values[i], cells[2 * i + 1] = cell_value(kCellNormal);
    return;
  }
#ifdef KL_HAS_CUDA
  detail::value_cells_cuda(values, count, cells);
#else
  throw RuntimeError("built without CUDA");
#endif
}

std::vector<bench::Row> bench_rows(Backend b, bool quick) {
  const int64_t rows = quick ? 64 : 4096;
  std::vector<int64_t> widths = quick ? std::vector<int64_t>{1024, 4096}
                                      : std::vector<int64_t>{1024, 2048, 4096, 8192, 16384, 32768};
  const int iters = b == Backend::Cpu ? 3 : 30;
  std::vector<bench::Row> out_rows;
  for (int64_t n : widths) {
    const int64_t N = rows * n;
    std::vector<float> hx(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) hx[size_t(i)] = float((i * 2654435761ull) % 1000) * 0.004f - 2.0f;
    // Timed cold: each launch takes the next of `sets` (x, out) pairs, so a shape that fits the L2 is not
    // timed from it; the copy baseline rotates the same way.
    const int sets = bench::cold_sets(b, 2 * size_t(N) * sizeof(float));
    std::vector<Buffer<float>> x, out;
    for (int k = 0; k < sets; ++k) {
      x.emplace_back(b, size_t(N));
      x.back().upload(hx);
      out.emplace_back(b, size_t(N));
    }
    Buffer<float> scratch(b, size_t(2 * rows));
    const double copy = bench::copy_bandwidth_gbs(b, size_t(N) * sizeof(float), sets);
    char base[80];
    std::snprintf(base, sizeof base, "%s copy %.0f GB/s, %d set%s", b == Backend::Cpu ? "CPU" : "d2d", copy, sets,
                  sets == 1 ? "" : "s");
    const int64_t limit = fixed_max_cols(device_info(b));
    for (Variant v : {Variant::Fixed, Variant::Online, Variant::ThreePass}) {
      if (v == Variant::Fixed && n > limit) continue;
      int k = 0;
      const bench::Timing t = bench::time(
          b,
          [&] {
            run(b, v, x[size_t(k)].data(), out[size_t(k)].data(), rows, n, nullptr, kDefaultChunk, scratch.data());
            k = (k + 1) % sets;
          },
          3, iters);
      bench::Row r;
      r.kernel = "softmax";
      r.variant = variant_name(v);
      r.shape = std::to_string(rows) + "x" + std::to_string(n) + " fp32";
      r.ms = t.median_ms;
      r.gbs = 8.0 * double(N) / (t.median_ms * 1e-3) / 1e9;  // the bytes softmax must move: read + write
      r.ratio = r.gbs / copy;
      r.baseline = base;
      out_rows.push_back(r);
    }
  }
  return out_rows;
}

ParamSpec param::chunk() {
  return pow2_param("chunk", kMinChunk, kMaxChunk, kDefaultChunk, "online: columns per chunk");
}

KernelEntry entry() {
  KernelEntry e;
  e.name = "softmax";
  e.summary = "row softmax of x [rows, n_cols]: buggy (BLOCK_SIZE 1024), fixed (one pass), online, three_pass";
  e.variants = {"buggy", "fixed", "online", "three_pass"};
  e.untraced_variants = {"three_pass"};
  e.default_variant = "fixed";
  e.inputs = {"x"};
  e.params = {param::chunk()};
  e.run = [](const KernelRunRequest& r) {
    const Array& x = r.inputs.at("x");
    if (x.shape.size() != 1 && x.shape.size() != 2)
      throw InputError("--in x: shape " + x.shape_text() + " must be [rows, n_cols]");
    const int64_t n_cols = x.shape.back();
    const int64_t rows = x.shape.size() == 2 ? x.shape[0] : 1;
    const Variant v = parse_variant(r.variant);
    const int chunk = int(r.params.get_int("chunk"));
    detail::check_shape(r.backend, v, rows, n_cols, chunk);
    Buffer<float> dx(r.backend, size_t(rows * n_cols)), dout(r.backend, size_t(rows * n_cols));
    dx.upload(x.data);
    dout.fill_bytes(0xFF);  // poison: columns nobody writes (buggy) come back as NaN
    // buggy, fixed and online: the shipped build of the editable source (as an edited copy runs), not the
    // untraced versions `run` falls back to for the Measure view and bench.
    const editable::Fault f =
        v == Variant::ThreePass
            ? run(r.backend, v, dx.data(), dout.data(), rows, n_cols, nullptr, chunk, nullptr, r.source)
            : editable::launch(r.backend, r.source, detail::traced_launch(v, dx.data(), dout.data(), rows, n_cols, nullptr, chunk));
    if (f.kind != editable::Fault::None) throw editable::FaultError(f);
    KernelRunResult res;
    res.outputs["out"] = Array{x.shape, dout.to_host()};
    return res;
  };
  e.bench = [](Backend b, bool quick) { return bench_rows(b, quick); };
  return e;
}

}  // namespace kl::softmax
