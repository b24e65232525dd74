// Rung 1 panel: the launch grid of a vector add, drawn from the kernel's own trace.
#include <imgui.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <random>

#include "app/panels/panels.h"
#include "app/ui.h"
#include "kernels/runtime/errors.h"
#include "kernels/rungs/vector_add.h"
#include "viz/data_texture.h"
#include "viz/element_raster.h"
#include "viz/heatmap.h"

namespace kl::app {
namespace {

class VectorAddPanel : public Panel {
 public:
  VectorAddPanel()
      : params_({int_param("n", 1, vector_add::kMaxN, 1000, "number of elements"),
                 pow2_param("block_size", vector_add::kMinBlock, vector_add::kMaxBlock, 256,
                            "BLOCK_SIZE: elements per program"),
                 int_param("seed", 0, 1 << 30, 1, "seed of the synthetic inputs (small integers)")}) {
    grid_map_.set_scale({viz::ColorScale::Kind::Categorical, 0, 1, "pid"});
    tail_map_.set_scale({viz::ColorScale::Kind::Categorical, 0, 1, "pid"});
  }

  std::string id() const override { return "vector-add"; }
  std::string title() const override { return "1 · Vector add"; }
  ParamValues& params() override { return params_; }
  SourceFocus source_focus() const override { return {"vector_add.cu", {"vector_add_traced"}}; }
  std::vector<TourStop> tour_stops() const override {
    return {{"n1000-block256", {"n=1000", "block_size=256"}},
            {"n2pow20-block1024", {"n=1048576", "block_size=1024"}}};
  }

  void draw(AppContext& ctx) override {
    if (ImGui::CollapsingHeader("What you are looking at", ImGuiTreeNodeFlags_DefaultOpen))
      ui::explain("vector_add.md");
    ui::section("Launch");
    ImGui::PushItemWidth(220);
    ui::param_row(params_, {"n", "block_size", "seed"}, &control_error_);
    ImGui::PopItemWidth();
    ui::error_box(control_error_);

    const std::string key = ui::settings_key(params_, {"n", "block_size", "seed"}, ctx.backend.backend);
    if (key != computed_key_) {
      computed_key_ = key;
      try {
        compute(ctx.backend.backend);
        run_error_.clear();
      } catch (const std::exception& e) {
        run_error_ = ui::error_text(e);
        valid_ = false;
      }
    }
    ui::error_box(run_error_);
    if (!valid_) return;

    const int64_t n = trace_.n, grid = trace_.grid, block = trace_.block_size;
    const int64_t lanes = grid * block;
    ImGui::Text("grid = ceil(n / BLOCK_SIZE) = ceil(%" PRId64 " / %" PRId64 ") = %" PRId64
                " programs,  %" PRId64 " lanes,  %" PRId64 " masked%s",
                n, block, grid, lanes, lanes - n, lanes > n ? " (all in the last program)" : "");
    ui::status_line("matches reference:", check_text_, check_ok_);
    ui::status_line("trace:", trace_text_, trace_ok_);

    ui::section("Programs of the launch grid");
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetColorU32(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("each cell: %" PRId64 " lane%s;  %s;  colour = pid that stored it (recorded);  "
                       "hatched = masked lane;  red checker = never stored",
                       raster_.lanes_per_cell, raster_.lanes_per_cell == 1 ? "" : "s", raster_.layout.c_str());
    ImGui::PopStyleColor();
    const float avail = ImGui::GetContentRegionAvail().x - 110.0f;
    // Square cells where they fit; rows at least 24 px tall while there are few of them.
    const float cell = avail / float(raster_.cols);
    const float max_h = std::max(120.0f, ImGui::GetContentRegionAvail().y - 110.0f);
    const float height = std::min(max_h, float(raster_.rows) * std::max(cell, 24.0f));
    grid_map_.set_grid(raster_.grid_cols, raster_.grid_rows);
    viz::HeatmapHover h = grid_map_.draw("programs", grid_tex_, ImVec2(avail, height), fresh_);
    if (h.active) {
      const int64_t lane = (int64_t(h.row) * raster_.cols + h.col) * raster_.lanes_per_cell;
      tooltip(ctx.backend.backend, lane);
    }

    ui::section("The tail program, lane by lane");
    if (lanes > n)
      ImGui::TextDisabled("pid %" PRId64 ": lanes 0..%" PRId64 " store, lanes %" PRId64 "..%" PRId64 " are masked",
                          grid - 1, n - (grid - 1) * block - 1, n - (grid - 1) * block, block - 1);
    else
      ImGui::TextDisabled("pid %" PRId64 ": every lane stores (n is a multiple of BLOCK_SIZE, nothing masked)", grid - 1);
    viz::HeatmapHover th = tail_map_.draw("tail", tail_tex_, ImVec2(avail, 28.0f), fresh_);
    if (th.active) tooltip(ctx.backend.backend, (grid - 1) * block + th.col);
    fresh_ = false;
  }

 private:
  void compute(Backend b) {
    valid_ = false;
    const int64_t n = params_.get_int("n");
    const int block = int(params_.get_int("block_size"));
    // Host bytes per element this computation holds at once: inputs, reference and read-backs (21),
    // plus the CPU backend's buffers and trace (21). Refused up front rather than failing half-way.
    mem::require_host(uint64_t(n) * (b == Backend::Cpu ? 42 : 21), "vector-add panel, n=" + std::to_string(n));
    std::mt19937 rng(uint32_t(params_.get_int("seed")));
    std::uniform_int_distribution<int> d(-100, 100);
    hx_.resize(size_t(n));
    hy_.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) hx_[size_t(i)] = float(d(rng)), hy_[size_t(i)] = float(d(rng));
    x_.resize(b, size_t(n));
    y_.resize(b, size_t(n));
    out_.resize(b, size_t(n));
    x_.upload(hx_);
    y_.upload(hy_);
    out_.fill_bytes(0xFF);  // poison: NaN wherever no program stores
    trace_.reset(b, n, block);
    ElementTraceView tv = trace_.view();
    vector_add::run_traced(b, x_.data(), y_.data(), out_.data(), n, block, &tv);

    // The check: against the CPU reference, on the host.
    std::vector<float> ref(static_cast<size_t>(n));
    vector_add::reference(hx_.data(), hy_.data(), ref.data(), n);
    const std::vector<float> got = out_.to_host();
    double max_diff = 0;
    int64_t nan_count = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(got[size_t(i)])) ++nan_count;
      else max_diff = std::max(max_diff, double(std::fabs(got[size_t(i)] - ref[size_t(i)])));
    }
    check_ok_ = nan_count == 0 && max_diff == 0;
    char buf[160];
    if (nan_count)
      std::snprintf(buf, sizeof buf, "no, %" PRId64 " elements never written", nan_count);
    else
      std::snprintf(buf, sizeof buf, "%s, max abs diff %g", check_ok_ ? "yes" : "no", max_diff);
    check_text_ = buf;

    // What the trace says (read back for the summary line only; the raster below stays on the device).
    const std::vector<uint32_t> counts = trace_.write_count.to_host();
    const std::vector<uint8_t> lanes = trace_.lane_state.to_host();
    int64_t once = 0, masked = 0;
    for (uint32_t c : counts) once += c == 1;
    for (uint8_t s : lanes) masked += s == kLaneMasked;
    const int64_t expect_masked = trace_.grid * block - n;
    trace_ok_ = once == n && masked == expect_masked;
    std::snprintf(buf, sizeof buf, "%" PRId64 " of %" PRId64 " elements stored exactly once; %" PRId64
                  " masked lanes recorded (expected %" PRId64 ")", once, n, masked, expect_masked);
    trace_text_ = buf;

    raster_ = viz::plan_element_raster(trace_.grid, block);
    grid_tex_.resize(raster_.cols, raster_.rows, 2);
    tail_tex_.resize(block, 1, 2);
    if (b == Backend::Cuda) {
      // Kernels write the GL buffers directly (CUDA-GL interop): no trip through the host.
      viz::DataTexture::begin_device_write_all({&grid_tex_, &tail_tex_});
      try {  // a failure must leave the buffers unmapped, or the next parameter change cannot map them
        viz::raster_element_trace(b, tv, raster_, grid_tex_.device_pointer());
        viz::raster_program_lanes(b, tv, trace_.grid - 1, tail_tex_.device_pointer());
      } catch (...) {
        viz::DataTexture::end_device_write_all({&grid_tex_, &tail_tex_});
        throw;
      }
      viz::DataTexture::end_device_write_all({&grid_tex_, &tail_tex_});
    } else {
      std::vector<float> cells(size_t(raster_.cols) * raster_.rows * 2);
      viz::raster_element_trace(b, tv, raster_, cells.data());
      grid_tex_.upload(cells.data());
      std::vector<float> tail(size_t(block) * 2);
      viz::raster_program_lanes(b, tv, trace_.grid - 1, tail.data());
      tail_tex_.upload(tail.data());
    }
    fresh_ = true;
    valid_ = true;
  }

  void tooltip(Backend b, int64_t lane) {
    if (lane < 0 || lane >= trace_.grid * trace_.block_size) return;
    const int64_t block = trace_.block_size;
    const int64_t pid = lane / block, l = lane % block;
    const bool mask = lane < trace_.n;
    ImGui::BeginTooltip();
    ImGui::Text("element %" PRId64 "   pid %" PRId64 "   lane %" PRId64, lane, pid, l);
    ImGui::Text("offset = %" PRId64 " * %" PRId64 " + %" PRId64 "   mask (offset < n) = %d", pid, block, l, mask);
    if (mask) {
      float out = 0;
      int32_t writer = -1;
      mem::to_host(b, &out, out_.data() + lane, sizeof out);
      mem::to_host(b, &writer, trace_.writer.data() + lane, sizeof writer);
      ImGui::Text("x = %g   y = %g   out = %g", hx_[size_t(lane)], hy_[size_t(lane)], out);
      ImGui::Text("stored by pid %d (recorded)", writer);
    } else {
      ImGui::TextUnformatted("masked lane: no load, no store");
    }
    if (raster_.lanes_per_cell > 1) ImGui::TextDisabled("(first of the cell's %" PRId64 " lanes)", raster_.lanes_per_cell);
    ImGui::EndTooltip();
  }

  ParamValues params_;
  std::string control_error_, run_error_, computed_key_;
  std::vector<float> hx_, hy_;
  Buffer<float> x_, y_, out_;
  ElementTrace trace_;
  viz::ElementRaster raster_;
  viz::DataTexture grid_tex_, tail_tex_;
  viz::Heatmap grid_map_, tail_map_;
  std::string check_text_, trace_text_;
  bool check_ok_ = false, trace_ok_ = false, valid_ = false, fresh_ = false;
};

}  // namespace

std::unique_ptr<Panel> make_vector_add_panel() { return std::make_unique<VectorAddPanel>(); }

}  // namespace kl::app
