// Recording a timeline on the GPU (kernels/measure/timeline.h, record): the inputs, the plain and the
// instrumented launches of the same kernel timed side by side, one recorded launch, the output check, and
// the trace buffer read back. CUDA builds only (timeline.cpp refuses without CUDA).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <functional>
#include <iterator>
#include <memory>

#include "kernels/measure/bench.h"
#include "kernels/measure/timeline.h"
#include "kernels/rungs/flash_attention_backward_fast.h"
#include "kernels/rungs/flash_attention_fast.h"
#include "kernels/rungs/flash_attention_fast_device.cuh"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/cuda_launch.cuh"

namespace kl::timeline {
namespace {

using flash_attention::FastPath;
using flash_attention::fast_detail::launch_fill_uniform;
using Bf16 = __nv_bfloat16;

constexpr uint64_t kMaxTraceBytes = uint64_t(2) << 30;  // the trace buffer's limit (2 GiB)

// One kernel's launches, whatever the rung: what the recording drives.
struct Job {
  virtual ~Job() = default;
  virtual void plain() = 0;                                  // the plain kernel, into the plain outputs
  virtual void traced(const TraceArgs& a) = 0;               // the instrumented one, into the traced outputs
  virtual void reset() = 0;                                  // poison both outputs (and redo what the kernel reads)
  virtual OutputPair outputs() = 0;                          // both outputs' bits
  Recording meta;                                            // shape, path, launch, tiles, flops
  std::vector<std::string> roles;                            // one per lane
  int capacity = 0;                                          // events per lane
};

void fill(Buffer<Bf16>& b, uint32_t seed) {
  launch_fill_uniform("timeline_fill", b.data(), int64_t(b.size()), seed);
}

std::vector<uint16_t> bits(const Buffer<Bf16>& b) {
  std::vector<uint16_t> out(b.size());
  mem::to_host(Backend::Cuda, out.data(), b.data(), b.size() * sizeof(Bf16));
  return out;
}

std::vector<std::string> forward_roles(int lanes) {
  std::vector<std::string> roles;
  for (int w = 0; w + 1 < lanes; ++w) roles.push_back("warpgroup " + std::to_string(w));
  roles.push_back("producer");
  return roles;
}

// ---- [SECTION] the forward -------------------------------------------------------------------------------------
FastPath forward_path(const std::string& name) {
  if (name == "auto") return FastPath::WgmmaByShape;
  for (FastPath p : flash_attention::kNamedWgmmaPaths)
    if (name == flash_attention::fast_path_name(p)) return p;
  throw InputError(out_of_range_message("--path", name, path_names(kForward)));
}

// Events a lane of the launch may mark, at most: 12 per K/V step, 24 per work tile, 16 besides (the counts
// in consume and produce_persistent stay below these), the worst CTA of the launch.
int forward_capacity(const flash_attention::FastParams& p, const flash_attention::FastTracedShape& s) {
  using namespace flash_attention;
  const int n_m = ceil_div(p.Lq, s.block_m), total = n_m * p.H * p.B;
  int64_t worst = 0;
  if (!s.persistent) {
    worst = 12 * int64_t(ceil_div(p.Lk, s.block_n)) + 24;
  } else {
    for (int c = 0; c < s.ctas; ++c) {
      int64_t steps = 0, tiles = 0;
      for (int k = 0; int64_t(k) * s.ctas < total; ++k) {
        const int idx = persistent_index(k, c, s.ctas, p.causal);
        if (idx >= total) continue;
        const PersistentTile t = persistent_tile(idx, n_m, p.H, p.B, p.causal);
        steps += key_tiles_for_block(t.m_block, p.Lq, p.Lk, s.block_m, s.block_n, p.causal);
        ++tiles;
      }
      worst = std::max(worst, 12 * steps + 24 * tiles);
    }
  }
  return int(std::min<int64_t>(worst + 16, INT32_MAX / 2));
}

struct ForwardJob : Job {
  flash_attention::FastParams p;
  FastPath path = FastPath::WgmmaByShape;
  Buffer<Bf16> q, k, v, o_plain, o_traced;

  explicit ForwardJob(const RecordRequest& r) {
    p.B = r.B, p.H = r.H, p.H_kv = r.Hkv, p.Lq = p.Lk = r.L, p.d = r.d;  // H_kv 0: as many as H
    p.scale = 1.0f / std::sqrt(float(r.d));
    p.causal = r.causal;
    p.dtype = flash_attention::FastDtype::Bf16;
    const FastPath requested = forward_path(r.path);
    if (requested != FastPath::WgmmaByShape && !flash_attention::fast_wgmma_kernels_loaded())
      throw InputError("--path " + r.path + ": the wgmma kernels need an H100/H200 with the sm_90a build loaded; "
                       "this device or build is not one");
    path = flash_attention::fast_kernel_for(requested, p);
    const size_t n = size_t(p.B) * p.H * p.Lq * p.d, n_kv = size_t(p.B) * flash_attention::kv_heads(p) * p.Lk * p.d;
    q.resize(Backend::Cuda, n), k.resize(Backend::Cuda, n_kv), v.resize(Backend::Cuda, n_kv);
    o_plain.resize(Backend::Cuda, n), o_traced.resize(Backend::Cuda, n);
    fill(q, 1u), fill(k, 2u), fill(v, 3u);
    p.q = q.data(), p.k = k.data(), p.v = v.data();
    flash_attention::set_contiguous_strides(p);
    const flash_attention::FastTracedShape s = flash_attention::fast_traced_shape(with_out(o_traced), path);
    meta.kernel = kForward;
    meta.path = flash_attention::fast_path_name(path);
    meta.requested = r.path;
    meta.launch = s.launch;
    meta.grid_ctas = s.ctas, meta.block_m = s.block_m, meta.block_n = s.block_n;
    meta.flops = 4.0 * p.B * p.H * double(p.Lq) * p.Lk * p.d * (p.causal ? 0.5 : 1.0);
    roles = forward_roles(s.lanes);
    capacity = forward_capacity(p, s);
  }
  flash_attention::FastParams with_out(Buffer<Bf16>& o) const {
    flash_attention::FastParams r = p;
    r.o = o.data();
    return r;
  }
  void plain() override { flash_attention::run_fast_path(with_out(o_plain), path); }
  void traced(const TraceArgs& a) override { flash_attention::run_fast_traced(with_out(o_traced), path, a); }
  void reset() override {
    o_plain.fill_bytes(0xFF);  // 0xFFFF is NaN in bf16: an unwritten element shows
    o_traced.fill_bytes(0xFF);
  }
  OutputPair outputs() override { return OutputPair{bits(o_plain), bits(o_traced)}; }
};

// ---- [SECTION] the backward's main kernel -----------------------------------------------------------------------
struct BackwardJob : Job {
  flash_attention_backward::FastBackwardParams p;
  bool atomic = true;
  Buffer<Bf16> q, k, v, o, dout, dq, dk_plain, dv_plain, dk_traced, dv_traced;
  Buffer<float> lse, drow, accum;

  explicit BackwardJob(const RecordRequest& r) {
    using namespace flash_attention_backward;
    p.B = r.B, p.H = r.H, p.Lq = p.Lk = r.L, p.d = r.d;
    p.scale = 1.0f / std::sqrt(float(r.d));
    p.causal = r.causal;
    p.dtype = FastDtype::Bf16;
    p.deterministic = r.deterministic;
    p.path = r.path == "wgmma-tma" ? FastBackwardPath::WgmmaTma : FastBackwardPath::Wgmma;
    atomic = !r.deterministic;
    const size_t n = size_t(p.B) * p.H * p.Lq * p.d, rows = size_t(p.B) * p.H * p.Lq;
    for (Buffer<Bf16>* b : {&q, &k, &v, &o, &dout, &dq, &dk_plain, &dv_plain, &dk_traced, &dv_traced})
      b->resize(Backend::Cuda, n);
    lse.resize(Backend::Cuda, rows), drow.resize(Backend::Cuda, rows), accum.resize(Backend::Cuda, atomic ? n : 0);
    fill(q, 1u), fill(k, 2u), fill(v, 3u), fill(dout, 4u);
    p.q = q.data(), p.k = k.data(), p.v = v.data(), p.o = o.data(), p.dout = dout.data(), p.lse = lse.data();
    // The deterministic mode records its dK/dV kernel alone: no accumulator, so no shape takes the ordered adds
    // (fast_backward_ordered_dq), whose kernel has no instrumented build.
    p.dq = dq.data(), p.drow = drow.data(), p.dq_accum = atomic ? accum.data() : nullptr;
    set_outputs(dk_traced, dv_traced);
    const FastBackwardTracedShape s = fast_backward_traced_shape(p, atomic);  // refuses before the forward runs
    fast_forward_state(p, o.data(), lse.data());
    meta.kernel = kBackward;
    meta.path = fast_backward_path_name(p.path);  // deterministic: that path's dK, dV kernel (DkDvTma or DkDv)
    meta.requested = r.path;
    meta.launch = s.launch;
    meta.dq = atomic ? "atomic" : "deterministic";
    meta.grid_ctas = s.ctas, meta.block_m = s.block_m, meta.block_n = s.block_n;
    // S, dP, dV, dK and (atomic mode) dQ: 2 B H Lq Lk d FLOP each, halved under the mask.
    meta.flops = (atomic ? 5.0 : 4.0) * 2.0 * p.B * p.H * double(p.Lq) * p.Lk * p.d * (p.causal ? 0.5 : 1.0);
    roles = {"warpgroup 0", "warpgroup 1"};
    const int steps = flash_attention::ceil_div(p.Lq, s.block_m);
    capacity = 16 * steps + 32;  // at most 15 events per query step, 32 besides
  }
  void set_outputs(Buffer<Bf16>& dk, Buffer<Bf16>& dv) { p.dk = dk.data(), p.dv = dv.data(); }
  void plain() override {
    set_outputs(dk_plain, dv_plain);
    flash_attention_backward::launch_wgmma_main(p, atomic);
  }
  void traced(const TraceArgs& a) override {
    set_outputs(dk_traced, dv_traced);
    flash_attention_backward::launch_wgmma_main_traced(p, atomic, a);
  }
  void reset() override {
    for (Buffer<Bf16>* b : {&dk_plain, &dv_plain, &dk_traced, &dv_traced}) b->fill_bytes(0xFF);
    flash_attention_backward::run_fast_preprocess(p);  // D, and the dQ accumulator zeroed
  }
  OutputPair outputs() override {
    OutputPair out{bits(dk_plain), bits(dk_traced)};
    const std::vector<uint16_t> vp = bits(dv_plain), vt = bits(dv_traced);
    out.plain.insert(out.plain.end(), vp.begin(), vp.end());
    out.traced.insert(out.traced.end(), vt.begin(), vt.end());
    return out;
  }
};

std::unique_ptr<Job> make_job(const RecordRequest& r) {
  validate(r);
  flash_attention::require_cuda_device("timeline " + r.kernel);
  if (r.kernel == kBackward) return std::make_unique<BackwardJob>(r);
  return std::make_unique<ForwardJob>(r);
}

// ---- [SECTION] the recording ------------------------------------------------------------------------------------
// The CTAs to record: the request's (checked against the launch), or the first, the middle and the last.
std::vector<int> chosen_ctas(const RecordRequest& r, int ctas) {
  if (r.all_ctas) {
    std::vector<int> all(static_cast<size_t>(ctas));
    for (int c = 0; c < ctas; ++c) all[size_t(c)] = c;
    return all;
  }
  if (r.ctas.empty()) {
    std::vector<int> d = {0, ctas / 2, ctas - 1};
    d.erase(std::unique(d.begin(), d.end()), d.end());
    return d;
  }
  for (int c : r.ctas)
    if (c >= ctas)
      throw InputError(out_of_range_message("--ctas", std::to_string(c),
                                            "[0, " + std::to_string(ctas - 1) + "] (this launch has " +
                                                std::to_string(ctas) + " CTAs)"));
  return r.ctas;
}

TraceArgs trace_args(const RecordRequest& r, const std::vector<int>& slots, int lanes, int capacity) {
  TraceArgs a;
  std::memset(&a, 0, sizeof a);
  a.n_ctas = r.all_ctas ? -1 : int(slots.size());
  if (!r.all_ctas) std::copy(slots.begin(), slots.end(), a.ctas);
  a.lanes = lanes;
  a.capacity = capacity;
  return a;
}

// The GPU's time for one call of fn, queued behind a short spin so the host's launch is not timed.
double time_once(const std::function<void()>& fn) {
  cudaEvent_t a, b;
  KL_CUDA_CHECK(cudaEventCreate(&a));
  KL_CUDA_CHECK(cudaEventCreate(&b));
  bench::detail::enqueue_spin(5.0);
  KL_CUDA_CHECK(cudaEventRecord(a));
  fn();
  KL_CUDA_CHECK(cudaEventRecord(b));
  KL_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  KL_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  KL_CUDA_CHECK(cudaEventDestroy(a));
  KL_CUDA_CHECK(cudaEventDestroy(b));
  return double(ms);
}

std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char b[16];
  std::strftime(b, sizeof b, "%Y-%m-%d", &tm);
  return b;
}

std::string cuda_version() {
  int v = 0;
  KL_CUDA_CHECK(cudaRuntimeGetVersion(&v));
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

void fill_machine(Recording& rec, const RecordRequest& r) {
  rec.B = r.B, rec.H = r.H, rec.Hkv = r.Hkv > 0 ? r.Hkv : r.H, rec.Lq = rec.Lk = r.L, rec.d = r.d;
  rec.causal = r.causal;
  rec.dtype = "bf16";
  rec.device = device_info(Backend::Cuda).name;
  rec.date = today_utc();
  rec.cuda = cuda_version();
  rec.iterations = r.iterations;
}

Recording run_job(Job& job, const RecordRequest& r) {
  Recording rec = job.meta;
  fill_machine(rec, r);
  const std::vector<int> slots = chosen_ctas(r, rec.grid_ctas);
  const int lanes = int(job.roles.size());
  const uint64_t bytes = uint64_t(slots.size()) * lanes * uint64_t(kHeaderRecords + job.capacity) * 16;
  if (bytes > kMaxTraceBytes)
    throw InputError("--ctas: recording " + std::to_string(slots.size()) + " CTAs of this launch needs " +
                     mem::bytes_text(bytes) + " of trace buffer (allowed up to " + mem::bytes_text(kMaxTraceBytes) +
                     "); record fewer CTAs or a smaller shape");
  Buffer<uint32_t> buf(Backend::Cuda, size_t(bytes / 4));
  TraceArgs args = trace_args(r, slots, lanes, job.capacity);
  args.buf = buf.data();
  job.reset();
  rec.plain_ms = bench::time(Backend::Cuda, [&] { job.plain(); }, 3, r.iterations).median_ms;
  rec.traced_ms = bench::time(Backend::Cuda, [&] { job.traced(args); }, 3, r.iterations).median_ms;
  job.reset();
  buf.fill_bytes(0);
  rec.recorded_ms = time_once([&] { job.traced(args); });
  job.plain();
  mem::synchronize(Backend::Cuda);
  const OutputPair out = job.outputs();
  rec.same_output = out.plain == out.traced;
  const BufferLayout layout{slots, job.roles, job.capacity};
  rec.ctas = decode(buf.to_host(), layout, &rec.clock_ghz);
  return rec;
}

}  // namespace

Recording record(const RecordRequest& r) {
  const std::unique_ptr<Job> job = make_job(r);
  return run_job(*job, r);
}

OutputPair outputs_plain_and_traced(const RecordRequest& r) {
  const std::unique_ptr<Job> job = make_job(r);
  const std::vector<int> slots = chosen_ctas(r, job->meta.grid_ctas);
  const int lanes = int(job->roles.size());
  Buffer<uint32_t> buf(Backend::Cuda, slots.size() * size_t(lanes) * size_t(kHeaderRecords + job->capacity) * 4);
  TraceArgs args = trace_args(r, slots, lanes, job->capacity);
  args.buf = buf.data();
  job->reset();
  job->traced(args);
  job->plain();
  mem::synchronize(Backend::Cuda);
  return job->outputs();
}

}  // namespace kl::timeline
