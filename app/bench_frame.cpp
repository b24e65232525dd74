// bench-frame: per-frame time of recompute + redraw of an attention-weight heatmap, through CUDA-GL interop
// and through the device-to-host + glTexSubImage2D path, in one run (see bench_frame.h).
#include "app/bench_frame.h"

#include <epoxy/gl.h>
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "app/cli/common.h"  // headless
#include "app/measure_export.h"
#include "kernels/rungs/attention_weights.h"
#include "kernels/runtime/backend.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/params.h"
#include "viz/data_texture.h"
#include "viz/gl_check.h"
#include "viz/heatmap.h"
#include "viz/png.h"
#include "viz/render_host.h"

namespace kl::app {
namespace {

namespace aw = attention_weights;

struct PathResult {
  std::string name, status;
  bool interop = false;
  int frames = 0;
  double median_ms = 0, mean_ms = 0, min_ms = 0, fps = 0;
};

// Queries and keys with positional structure, so the weights show something: component pairs
// (cos, sin) of the position at 32 frequencies, periods from 8 rows to L, plus a little noise. Then
// q_i . k_j = a^2 sum_f cos(w_f (i - j)) + noise: a bright diagonal (each query attends to its own
// position) and fainter bands at the longer periods. The per-frame shift moves the diagonal.
void make_inputs(int64_t L, std::vector<float>& q, std::vector<float>& k) {
  const int d = aw::kHeadDim;
  q.assign(size_t(L) * d, 0.0f);
  k.assign(size_t(L) * d, 0.0f);
  const double a = 1.0;
  uint64_t state = 0x243F6A8885A308D3ull;
  auto noise = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return float((state >> 40) * (1.0 / 16777216.0) - 0.5) * 0.6f;
  };
  for (int64_t i = 0; i < L; ++i)
    for (int f = 0; f < d / 2; ++f) {
      const double period = 8.0 * std::pow(std::max(2.0, double(L) / 8.0), double(f) / (d / 2 - 1));
      const double w = 2.0 * M_PI / period;
      q[size_t(i) * d + 2 * f] = float(a * std::cos(w * i)) + noise();
      q[size_t(i) * d + 2 * f + 1] = float(a * std::sin(w * i)) + noise();
      k[size_t(i) * d + 2 * f] = float(a * std::cos(w * i)) + noise();
      k[size_t(i) * d + 2 * f + 1] = float(a * std::sin(w * i)) + noise();
    }
}

// The largest weight of row 0 (the colour scale's top), on the host.
float row0_max_weight(const std::vector<float>& q, const std::vector<float>& k, int64_t L, float scale) {
  std::vector<double> s(static_cast<size_t>(L));
  double m = -INFINITY;
  for (int64_t j = 0; j < L; ++j) {
    double acc = 0;
    for (int c = 0; c < aw::kHeadDim; ++c) acc += double(q[size_t(c)]) * k[size_t(j) * aw::kHeadDim + c];
    s[size_t(j)] = acc * scale;
    m = std::max(m, s[size_t(j)]);
  }
  double l = 0;
  for (double v : s) l += std::exp(v - m);
  return float(1.0 / l);
}

PathResult run_path(viz::RenderHost& host, Backend b, bool upload, int64_t L, int frames, const float* q,
                    const float* k, float* scores, std::vector<float>& host_out, float hi, const std::string& title) {
  viz::DataTexture tex;
  viz::Heatmap map;
  map.set_scale({viz::ColorScale::Kind::Sequential, 0.0f, hi, "attention weight"});
  tex.resize(int(L), int(L), 1);
  if (upload) tex.force_upload_path(true);
  const float scale = 1.0f / std::sqrt(float(aw::kHeadDim));
  const int warmup = 5;
  std::vector<double> ms;
  int64_t shift = 0;
  PathResult r;
  r.name = upload ? "upload" : "interop";
  for (int f = 0; f < warmup + frames; ++f) {
    if (f == warmup) ms.clear();
    const auto t0 = std::chrono::steady_clock::now();
    if (!host.begin_frame()) throw RuntimeError("headless host stopped");
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImVec2(float(host.width()), float(host.height())));
    ImGui::Begin("bench-frame", nullptr,
                 ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoSavedSettings |
                     ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoScrollbar);
    ImGui::Text("%s", title.c_str());
    ImGui::Text("path: %s   frame %d   query shift %lld", r.name.c_str(), f, (long long)shift);
    // Recompute: every frame, the whole L x L matrix.
    if (b == Backend::Cuda) {
      float* dst = tex.begin_device_write();
      aw::run(b, q, k, scores, dst, L, scale, shift);
      tex.end_device_write();
    } else {
      aw::run(b, q, k, scores, host_out.data(), L, scale, shift);
      tex.upload(host_out.data());
    }
    shift = (shift + 1) % L;
    const float side = std::max(64.0f, std::min(ImGui::GetContentRegionAvail().x - map.colorbar_width() - 8.0f,
                                                ImGui::GetContentRegionAvail().y - 4.0f));
    map.draw("weights", tex, ImVec2(side, side), true);
    ImGui::End();
    host.end_frame();
    glFinish();
    mem::synchronize(b);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (f == warmup - 1) {
      r.interop = b == Backend::Cuda && tex.interop_active();
      r.status = tex.interop_status();  // on the CPU backend: DataTexture's own "not used (CPU backend ...)"
    }
  }
  r.frames = int(ms.size());
  double total = 0;
  for (double v : ms) total += v;
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  r.median_ms = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                  : 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]);
  r.min_ms = sorted.front();
  r.mean_ms = total / double(ms.size());
  r.fps = 1000.0 / r.mean_ms;
  return r;
}

}  // namespace

int bench_frame(const BenchFrameOptions& o) {
  const BackendChoice bc = choose_backend(o.backend);
  const Backend b = bc.backend;
  const bool cuda = b == Backend::Cuda;
  const int64_t L = o.size ? o.size : (cuda ? 4096 : 512);
  require_range("--size", L, 16, cuda ? aw::kMaxLen : 2048);
  const int frames = o.frames ? o.frames : (cuda ? 120 : 10);
  require_range("--frames", frames, 1, 100000);

  auto host = cli::headless(cli::Size{1400, 900});
  const std::string renderer = host->gl_renderer();
  std::printf("bench-frame: %s; %s; GL_RENDERER %s\n", bc.reason.c_str(), host->kind().c_str(), renderer.c_str());
  std::printf("  every frame: L=%lld attention weights (d=64: S = Q K^T / 8, row softmax) recomputed and drawn "
              "through the Heatmap widget, then glFinish + device sync; %d frames per path after 5 warm-up frames\n",
              (long long)L, frames);
  if (!cuda)
    std::printf("  CPU backend: the weights are computed on the CPU and only the upload path (glTexSubImage2D) "
                "exists; these are CPU figures\n");
  std::fflush(stdout);

  std::vector<float> hq, hk;
  make_inputs(L, hq, hk);
  const float hi = row0_max_weight(hq, hk, L, 1.0f / std::sqrt(float(aw::kHeadDim)));
  Buffer<float> q(b, hq.size()), k(b, hk.size()), scores(b, size_t(L) * size_t(L));
  q.upload(hq);
  k.upload(hk);
  std::vector<float> host_out(cuda ? 0 : size_t(L) * size_t(L));

  std::vector<PathResult> paths;
  const std::string title = "bench-frame: " + std::to_string(L) + " x " + std::to_string(L) +
                            " attention weights, recomputed every frame (" + bc.reason + ")";
  if (cuda) paths.push_back(run_path(*host, b, false, L, frames, q.data(), k.data(), scores.data(), host_out, hi, title));
  paths.push_back(run_path(*host, b, true, L, frames, q.data(), k.data(), scores.data(), host_out, hi, title));

  for (const PathResult& p : paths)
    std::printf("  %-8s %8.3f ms/frame median (mean %.3f, min %.3f), %7.1f fps  [%s]\n", p.name.c_str(), p.median_ms,
                p.mean_ms, p.min_ms, p.fps, p.status.c_str());
  double ratio = 0;
  if (cuda) {
    const PathResult& in = paths[0];
    const PathResult& up = paths[1];
    std::printf("  interop path: %s\n", in.interop ? "used (the kernel wrote the mapped GL buffer)"
                                                     : ("NOT used: " + in.status).c_str());
    if (in.interop && in.median_ms > 0) {
      ratio = up.median_ms / in.median_ms;
      std::printf("  ratio upload / interop per frame: %.2fx (goal >= 5x: %s); interop fps %.1f (goal >= 60: %s)\n",
                  ratio, ratio >= 5 ? "met" : "not met", in.fps, in.fps >= 60 ? "met" : "not met");
    } else {
      std::printf("  ratio upload / interop per frame: n/a (the interop path was not available)\n");
    }
  }

  if (!o.png.empty()) {
    std::vector<uint8_t> rgba;
    int w = 0, h = 0;
    if (!host->read_pixels(rgba, w, h)) throw RuntimeError("could not read the last frame back");
    viz::write_png(o.png, rgba, w, h);
    std::printf("wrote %s\n", o.png.c_str());
  }
  if (!o.json.empty()) {
    nlohmann::json j;
    j["backend"] = backend_name(b);
    j["backend_reason"] = bc.reason;
    j["device"] = cuda ? device_info(b).name : "CPU";
    j["cpu_figures"] = !cuda;
    j["gl_renderer"] = renderer;
    j["host"] = host->kind();
    j["size"] = L;
    j["frames"] = frames;
    for (const PathResult& p : paths)
      j["paths"].push_back({{"path", p.name}, {"interop", p.interop}, {"status", p.status}, {"frames", p.frames},
                            {"median_ms", p.median_ms}, {"mean_ms", p.mean_ms}, {"min_ms", p.min_ms}, {"fps", p.fps}});
    j["ratio_upload_over_interop"] = ratio;
    write_text_file(o.json, j.dump(2) + "\n", "--json");
    std::printf("wrote %s\n", o.json.c_str());
  }
  const int errors = viz::gl_error_count();
  if (errors) std::fprintf(stderr, "kernel-ladder: %d GL errors, first: %s\n", errors, viz::gl_first_error().c_str());
  return errors ? 1 : 0;
}

}  // namespace kl::app
