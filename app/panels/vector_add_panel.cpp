// Rung 1 panel: the launch grid of a vector add, drawn from the kernel's own trace. What it concludes
// (the checks, the grid and tail lines) comes from kernels/studies/vector_add_study.h; this file fills
// the textures and draws.
#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "app/panels/panels.h"
#include "app/panels/memory_access_view.h"
#include "app/notice.h"
#include "app/ui.h"
#include "kernels/runtime/errors.h"
#include "kernels/rungs/vector_add.h"
#include "kernels/studies/vector_add_study.h"
#include "viz/data_texture.h"
#include "viz/element_raster.h"
#include "viz/heatmap.h"

namespace kl::app {
namespace {

class VectorAddPanel : public Panel {
 public:
  VectorAddPanel()
      : params_(study::vector_add_params()) {  // the study's list: `study vector-add` takes the same
    grid_map_.set_scale({viz::ColorScale::Kind::Categorical, 0, 1, "pid"});  // compute() picks the scale
    tail_map_.set_scale({viz::ColorScale::Kind::Categorical, 0, 1, "pid"});
    tail_map_.set_colorbar(false);
  }

  std::string id() const override { return "vector-add"; }
  std::string title() const override { return "1 · Vector add"; }
  ParamValues& params() override { return params_; }
  SourceFocus source_focus() const override { return {"vector_add.cu", {"vector_add_traced"}}; }
  std::vector<TourStop> tour_stops() const override {
    return {{"n1000-block256", {"n=1000", "block_size=256"}},
            {"n2pow20-block1024", {"n=1048576", "block_size=1024"}}};
  }
  std::vector<Animation> animations() const override {
    return {{"tail-mask", "n=784..1024:16", {"block_size=256"}, 4}};
  }

  void draw(AppContext& ctx) override {
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
    if (valid_) notice(result_.notice);
    ImGui::PushItemWidth(220);
    ui::param_row(params_, {"n", "block_size", "seed"}, &control_error_);
    ImGui::PopItemWidth();
    ui::error_box(control_error_);
    ui::error_box(run_error_);
    if (!valid_) return;

    const study::VectorAddResult& r = result_;
    ui::wrapped(r.grid_line);
    ui::wrapped_dim(r.block_line);
    ui::status_line("matches reference:", r.matches_reference.sentence, r.matches_reference.pass);
    ui::status_line("trace:", r.trace_check.sentence, r.trace_check.pass);
    // Issue 31: sectors per request of this rung's main loads and stores (app/panels/memory_access_view.h).
    draw_memory_access(ctx.backend.backend, "vector-add", params_);

    ui::section("Programs of the launch grid");
    char caption[512];
    std::snprintf(caption, sizeof caption,
                  "each cell: %" PRId64 " element%s;  %s;  colour = pid that stored it (recorded);  "
                  "%s;  red checker = never stored%s",
                  raster_.lanes_per_cell, raster_.lanes_per_cell == 1 ? "" : "s", raster_.layout.c_str(),
                  r.past_n_label.c_str(),
                  r.accessed_past_n ? ";  lined row: the program whose access went past the end (the strip below "
                                      "marks the offset)" : "");
    ui::wrapped_dim(caption);
    pid_key(r.grid);
    const float axis_w = ImGui::CalcTextSize("pid 0000000").x + ui::px(8);
    const float avail = ImGui::GetContentRegionAvail().x - ui::px(110) - axis_w;
    const float img_w = std::max(ui::px(64), avail - grid_map_.colorbar_width());
    // Square cells where they fit; rows at least 24 px tall while there are few of them. Never shorter
    // than the colour bar's caption, which reads along it.
    const float cell = img_w / float(raster_.cols);
    const float min_h = std::max(ui::px(120), ImGui::CalcTextSize("pid (program id)").x + ImGui::GetFontSize() * 2);
    const float max_h = std::max(min_h, ImGui::GetContentRegionAvail().y - ui::px(130));
    const float height = std::min(max_h, float(raster_.rows) * std::max(cell, ui::px(24)));
    const float top_ticks = ImGui::GetTextLineHeight() + ui::px(4);
    element_axis(axis_w, img_w, height, top_ticks);
    grid_map_.set_grid(raster_.grid_cols, raster_.grid_rows);
    viz::HeatmapHover h = grid_map_.draw("programs", grid_tex_, ImVec2(img_w, height), fresh_);
    if (h.active) {
      const int64_t element = (int64_t(h.row) * raster_.cols + h.col) * raster_.lanes_per_cell;
      tooltip(ctx.backend.backend, element);
    }

    ui::section("The tail program, offset by offset");
    ui::wrapped_dim(r.tail_line);
    ImGui::SetCursorPosX(ImGui::GetCursorPosX() + axis_w);
    // The strip shares the grid's scale and its colour bar (set_colorbar(false) in the constructor).
    viz::HeatmapHover th = tail_map_.draw("tail", tail_tex_, ImVec2(img_w, ui::px(28)), fresh_);
    if (th.active) tooltip(ctx.backend.backend, (r.grid - 1) * r.block_size + th.col);
    if (ImGui::CollapsingHeader("What you are looking at")) ui::explain("vector_add.md");
    fresh_ = false;
  }

 private:
  // A swatch per program when the palette has a colour for each (at most 12 programs), else the palette's
  // twelve as pid mod 12 (neighbouring programs always differ; a smooth colour ramp over a thousand pids
  // read as a gradient of values), wrapping onto the next line where a swatch would leave the region.
  static void pid_key(int64_t programs) {
    if (programs <= 12) {
      ImGui::TextDisabled("pid:");
    } else {  // the explanation on its own (wrapped) line, the twelve swatches after it
      ui::wrapped_dim("pid mod 12 (colours repeat every 12 programs; hover a cell for its pid):");
      programs = 12;
    }
    const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    const float sw = ui::px(14), inner = ui::px(4), spacing = ImGui::GetStyle().ItemSpacing.x;
    for (int64_t pid = 0; pid < programs; ++pid) {
      float c[3];
      viz::categorical_rgb(int(pid), c);
      const std::string label = std::to_string(pid);
      const float w = sw + inner + ImGui::CalcTextSize(label.c_str()).x;
      if (ImGui::GetItemRectMax().x + spacing + w <= right) ImGui::SameLine();
      ImGui::ColorButton(("##pid" + label).c_str(), ImVec4(c[0], c[1], c[2], 1.0f),
                         ImGuiColorEditFlags_NoTooltip | ImGuiColorEditFlags_NoDragDrop, ImVec2(sw, sw));
      ImGui::SameLine(0, inner);
      ImGui::TextUnformatted(label.c_str());
    }
  }

  // The axes: down the left the program each row starts ("pid 3"; the row's first element where a program
  // spans rows), along the top "+offset" within the row from the row's first element.
  void element_axis(float axis_w, float img_w, float height, float top_ticks) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImU32 col = ImGui::GetColorU32(ImGuiCol_TextDisabled);
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    const ImVec2 img0(p0.x + axis_w, p0.y + top_ticks);
    const float pad = ui::px(6);
    dl->AddText(ImVec2(img0.x - pad - ImGui::CalcTextSize("offset").x, p0.y), col, "offset");
    const int64_t per_row = raster_.lanes_per_row, block = raster_.block_size;
    // Top: offsets within a row, at program boundaries when a row holds 2 to 8 programs, else quarters.
    const int64_t programs_per_row = per_row / block;
    const int64_t step = programs_per_row >= 2 && programs_per_row <= 8 ? block : std::max<int64_t>(1, per_row / 4);
    for (int64_t off = 0; off <= per_row; off += step) {
      const std::string t = "+" + std::to_string(off);
      const float x = img0.x + img_w * float(double(off) / double(per_row));
      const float tw = ImGui::CalcTextSize(t.c_str()).x;
      const float tx = off == 0 ? x : (off == per_row ? x - tw : x - tw * 0.5f);
      dl->AddText(ImVec2(tx, p0.y), col, t.c_str());
      dl->AddLine(ImVec2(x, img0.y - ui::px(3)), ImVec2(x, img0.y), col);
    }
    // Left: each row's first element; every row while their labels fit, else evenly spaced rows.
    const float lh = ImGui::GetTextLineHeight();
    const int fit = std::max(1, int(height / (lh * 3.0f)));
    const int ticks = float(raster_.rows) * (lh + 2.0f) <= height ? raster_.rows : std::min(raster_.rows, fit);
    for (int k = 0; k < ticks; ++k) {
      const int row = ticks == raster_.rows ? k : (ticks == 1 ? 0 : int(int64_t(raster_.rows - 1) * k / (ticks - 1)));
      const float y = img0.y + height * (float(row) + 0.5f) / float(raster_.rows);
      // The row's first element, and its program where the row starts one ("768  pid 3").
      const int64_t first = int64_t(row) * per_row;
      const std::string t = first % block == 0 ? "pid " + std::to_string(first / block) : std::to_string(first);
      const ImVec2 ts = ImGui::CalcTextSize(t.c_str());
      dl->AddText(ImVec2(img0.x - pad - ts.x, std::min(y - ts.y * 0.5f, img0.y + height - ts.y)), col, t.c_str());
    }
    ImGui::Dummy(ImVec2(axis_w, top_ticks));
    ImGui::SetCursorScreenPos(img0);
  }

  void compute(Backend b) {
    valid_ = false;
    result_ = study::run_vector_add(b, params_);
    study::VectorAddResult& r = result_;
    ElementTraceView tv = r.trace.view();
    raster_ = viz::plan_element_raster(r.grid, r.block_size);
    // The palette's twelve colours by pid (mod 12 past twelve programs), keyed by swatches: neighbouring
    // programs always differ, and no colour ramp suggests that a pid is a value.
    const viz::ColorScale scale{viz::ColorScale::Kind::Categorical, 0, 1, "pid"};
    grid_map_.set_scale(scale);
    tail_map_.set_scale(scale);
    mark_fault(r);
    grid_tex_.resize(raster_.cols, raster_.rows, 2);
    tail_tex_.resize(r.block_size, 1, 2);
    if (b == Backend::Cuda) {
      // Kernels write the GL buffers directly (CUDA-GL interop): no trip through the host.
      viz::DataTexture::begin_device_write_all({&grid_tex_, &tail_tex_});
      try {  // a failure must leave the buffers unmapped, or the next parameter change cannot map them
        viz::raster_element_trace(b, tv, raster_, grid_tex_.device_pointer());
        viz::raster_program_lanes(b, tv, r.grid - 1, tail_tex_.device_pointer());
      } catch (...) {
        viz::DataTexture::end_device_write_all({&grid_tex_, &tail_tex_});
        throw;
      }
      viz::DataTexture::end_device_write_all({&grid_tex_, &tail_tex_});
    } else {
      std::vector<float> cells(size_t(raster_.cols) * raster_.rows * 2);
      viz::raster_element_trace(b, tv, raster_, cells.data());
      grid_tex_.upload(cells.data());
      std::vector<float> tail(size_t(r.block_size) * 2);
      viz::raster_program_lanes(b, tv, r.grid - 1, tail.data());
      tail_tex_.upload(tail.data());
    }
    fresh_ = true;
    valid_ = true;
  }

  // Cross lines through the cell of an edited kernel's first access past n (none otherwise).
  void mark_fault(const study::VectorAddResult& r) {
    grid_map_.set_highlight(-1, -1);
    tail_map_.set_highlight(-1, -1);
    if (r.fault_offset < 0 || r.fault_offset >= r.offsets) return;
    // The grid lines the faulting program's row only (cross lines through the cell ran through programs
    // that never faulted); the tail strip, which is that program, marks the offset.
    const int64_t cell = r.fault_offset / raster_.lanes_per_cell;
    grid_map_.set_highlight(int(cell / raster_.cols), -1);
    tail_map_.set_highlight(-1, int(r.fault_offset - (r.grid - 1) * r.block_size));
  }

  void tooltip(Backend b, int64_t element) {
    const study::VectorAddResult& r = result_;
    if (element < 0 || element >= r.offsets) return;
    const int64_t block = r.block_size;
    const int64_t pid = element / block, l = element % block;
    const bool mask = element < r.n;
    ImGui::BeginTooltip();
    ImGui::Text("offset %" PRId64 "   pid %" PRId64 "   arange index %" PRId64, element, pid, l);
    ImGui::Text("offset = %" PRId64 " * %" PRId64 " + %" PRId64 "   mask (offset < n) = %d", pid, block, l, mask);
    if (mask) {
      float out = 0;
      int32_t writer = -1;
      mem::to_host(b, &out, r.out.data() + element, sizeof out);
      mem::to_host(b, &writer, r.trace.writer.data() + element, sizeof writer);
      ImGui::Text("x = %g   y = %g   out = %g", r.x[size_t(element)], r.y[size_t(element)], out);
      ImGui::Text("stored by pid %d (recorded)", writer);
    } else {
      ui::wrapped_at(r.past_n_tooltip, ui::px(420));
    }
    if (raster_.lanes_per_cell > 1) ImGui::TextDisabled("(first of the cell's %" PRId64 " elements)", raster_.lanes_per_cell);
    ImGui::EndTooltip();
  }

  ParamValues params_;
  std::string control_error_, run_error_, computed_key_;
  study::VectorAddResult result_;
  viz::ElementRaster raster_;
  viz::DataTexture grid_tex_, tail_tex_;
  viz::Heatmap grid_map_, tail_map_;
  bool valid_ = false, fresh_ = false;
};

}  // namespace

std::unique_ptr<Panel> make_vector_add_panel() { return std::make_unique<VectorAddPanel>(); }

}  // namespace kl::app
