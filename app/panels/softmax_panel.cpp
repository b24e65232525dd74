// Rung 3 panel: "The truncation bug". The buggy (BLOCK_SIZE = 1024) and fixed softmax outputs side by
// side over the same rows, the columns the buggy kernel never wrote drawn from its recorded trace, row
// sums, max abs diff against the float64 reference, and max abs diff over n_cols = 1..8192. A second
// view, "online", shows the running max and running sum chunk by chunk for one row. What it concludes is
// computed by kernels/studies/softmax_study (no GL); this file fills textures from the study's buffers and
// draws, showing the study's sentences verbatim.
// [SECTION] panel state and parameters
// [SECTION] the truncation bug view
// [SECTION] the online view
// [SECTION] computing (the study runs; textures filled on the backend)
#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>

#include "app/panels/panels.h"
#include "app/panels/memory_access_view.h"
#include "app/notice.h"
#include "app/ui.h"
#include "kernels/rungs/softmax.h"
#include "kernels/studies/softmax_study.h"
#include "viz/data_texture.h"
#include "viz/heatmap.h"
#include "viz/plot.h"

namespace kl::app {
namespace {

using softmax::Variant;
constexpr unsigned kBuggyColour = IM_COL32(235, 95, 80, 255);
constexpr unsigned kFixedColour = IM_COL32(90, 180, 240, 255);
constexpr unsigned kRefColour = IM_COL32(200, 200, 200, 255);
constexpr unsigned kClippedColour = IM_COL32(190, 190, 190, 255);

// [SECTION] panel state and parameters ---------------------------------------------------------------------
class SoftmaxPanel : public Panel {
 public:
  // The study's list is the panel's: `study softmax` and this panel take the same specs by construction.
  SoftmaxPanel() : params_(study::softmax_params()) {}

  std::string id() const override { return "softmax"; }
  std::string title() const override { return "3 · Softmax: the truncation bug"; }
  ParamValues& params() override { return params_; }
  SourceFocus source_focus() const override {
    return {"softmax.cu", {"softmax_traced", "block_reduce", "softmax_online_traced"}};
  }
  std::vector<TourStop> tour_stops() const override {
    return {{"bug-n2000", {"n_cols=2000"}},
            {"bug-n1024", {"n_cols=1024"}},
            {"online-n2000", {"view=online", "n_cols=2000", "chunk=256"}}};
  }
  std::vector<Animation> animations() const override { return {{"n-cols-across-1024", "n_cols=961..1089:16", {}, 2}}; }

  void draw(AppContext& ctx) override {
    const Backend b = ctx.backend.backend;
    // The view's study first, so its notice opens the panel.
    if (params_.get_text("view") == "online") {
      ensure_online(b);
      if (online_valid_) notice(online_.notice);
    } else {
      ensure_bug(b);
      if (bug_valid_) notice(bug_.notice);
    }
    ImGui::PushItemWidth(150);
    ui::param_row(params_, {"n_cols", "rows", "seed", "x_scale"}, &control_error_);
    ImGui::PopItemWidth();
    ui::error_box(control_error_);
    // Issue 31: sectors per request of this rung's main loads and stores (app/panels/memory_access_view.h).
    draw_memory_access(b, "softmax", params_);

    const bool want_online = params_.get_text("view") == "online";
    if (ImGui::BeginTabBar("softmax_views")) {
      const bool force = view_forced_ != params_.get_text("view");
      view_forced_ = params_.get_text("view");
      if (ImGui::BeginTabItem("The truncation bug", nullptr,
                              force && !want_online ? ImGuiTabItemFlags_SetSelected : 0)) {
        if (!force && want_online) params_.set("view", "bug"), view_forced_ = "bug";
        draw_bug(b);
        ImGui::EndTabItem();
      }
      if (ImGui::BeginTabItem("Online: running max and sum", nullptr,
                              force && want_online ? ImGuiTabItemFlags_SetSelected : 0)) {
        if (!force && !want_online) params_.set("view", "online"), view_forced_ = "online";
        draw_online(b);
        ImGui::EndTabItem();
      }
      ImGui::EndTabBar();
    }
  }

 private:
  // [SECTION] the truncation bug view ----------------------------------------------------------------------
  void ensure_bug(Backend b) {
    const std::string key = ui::settings_key(params_, {"n_cols", "rows", "seed", "x_scale"}, b);
    if (key != bug_key_) {
      bug_key_ = key;
      try {
        compute_bug(b);
        bug_error_.clear();
      } catch (const std::exception& e) {
        bug_error_ = ui::error_text(e);
        bug_valid_ = false;
      }
    }
  }

  void draw_bug(Backend b) {
    ensure_bug(b);
    ui::error_box(bug_error_);
    if (!bug_valid_) return;
    const study::SoftmaxBug& r = bug_;

    // The headline: what the picture shows, in numbers.
    ui::wrapped_colored(r.truncated ? IM_COL32(255, 150, 130, 255) : IM_COL32(140, 220, 140, 255), r.headline);

    // Buggy beside fixed where the panel is wide enough, one above the other where it is not.
    const ui::ColumnsLayout cols = ui::columns_or_stack(2, 340.0f);
    const float half = cols.width;
    const float img_w = half - buggy_map_.colorbar_width();
    const float map_h = std::clamp(float(r.rows) * ui::px(14.0f), ui::px(90.0f), ui::px(230.0f));
    scale_ = {viz::ColorScale::Kind::Sequential, 0.0f, r.vmax, "softmax(x)"};
    buggy_map_.set_scale(scale_);
    fixed_map_.set_scale(scale_);

    ui::column_begin(cols, 0);
    ui::wrapped_colored(IM_COL32(235, 94, 79, 255), r.buggy_caption);
    viz::HeatmapHover hb = buggy_map_.draw("buggy", buggy_tex_, ImVec2(img_w, map_h), fresh_);
    ui::wrapped_dim(r.buggy_written);
    if (!r.buggy_unwritten.empty()) ui::wrapped_colored(IM_COL32(242, 89, 77, 255), r.buggy_unwritten);
    ui::column_end();
    ui::column_begin(cols, 1);
    ui::wrapped_colored(IM_COL32(89, 179, 240, 255), r.fixed_caption);
    viz::HeatmapHover hf = fixed_map_.draw("fixed", fixed_tex_, ImVec2(img_w, map_h), fresh_);
    ui::wrapped_dim(r.fixed_written);
    ui::column_end();
    if (hb.active) tooltip(hb.row, hb.col, true);
    if (hf.active) tooltip(hf.row, hf.col, false);
    fresh_ = false;

    ui::status_line("buggy matches reference:", r.buggy.sentence, r.buggy.pass);
    ui::status_line("fixed matches reference:", r.fixed.sentence, r.fixed.pass);
    if (!r.nonfinite_sentence.empty()) ui::wrapped_colored(IM_COL32(255, 150, 130, 255), r.nonfinite_sentence);
    ui::wrapped_dim(r.inputs_sentence);

    // Row sums (left) and the max abs diff over n_cols (right), one above the other where the panel is
    // narrow; the panel scrolls vertically where they do not fit.
    const ui::ColumnsLayout bottom = ui::columns_or_stack(2, 420.0f);
    const float col_w = bottom.width;
    ui::column_begin(bottom, 0);
    draw_row_sums(col_w);
    ImGui::Spacing();
    ui::explain("softmax.md");
    ui::column_end();
    ui::column_begin(bottom, 1);
    const ImGuiStyle& st = ImGui::GetStyle();
    float below = ImGui::CalcTextSize(sweep_.sentence.c_str(), nullptr, false, col_w).y + st.ItemSpacing.y;
    if (!sweep_.clipped_sentence.empty())
      below += ImGui::CalcTextSize(sweep_.clipped_sentence.c_str(), nullptr, false, col_w).y + st.ItemSpacing.y;
    // Beside the row sums it fills the height left; stacked, it is half as tall as wide.
    const float fill = ImGui::GetContentRegionAvail().y - below - st.ItemSpacing.y;
    const float sweep_h = bottom.per_row == 2 ? std::max(ui::px(170.0f), fill) : std::max(ui::px(220.0f), col_w * 0.5f);
    draw_sweep(ImVec2(col_w, sweep_h));
    ui::wrapped(sweep_.sentence);
    if (!sweep_.clipped_sentence.empty()) {
      ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
      ui::wrapped(sweep_.clipped_sentence);
      ImGui::PopStyleColor();
    }
    ui::column_end();
  }

  void draw_row_sums(float width) {
    const study::SoftmaxBug& r = bug_;
    ui::section("Row sums");
    if (ImGui::BeginTable("rowsums", 5, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp,
                          ImVec2(width, 0))) {
      // The row index as wide as its header: a stretched share would wrap "row" a letter per line.
      ImGui::TableSetupColumn("row", ImGuiTableColumnFlags_WidthFixed, ImGui::CalcTextSize("row").x);
      ImGui::TableSetupColumn("buggy, all cols");
      ImGui::TableSetupColumn("buggy, written");
      ImGui::TableSetupColumn("fixed");
      ImGui::TableSetupColumn("ref. mass, first 1024 cols");
      ui::table_headers_wrapped();
      const int64_t show = std::min<int64_t>(r.rows, 6);
      for (int64_t row = 0; row < show; ++row) {
        const size_t i = size_t(row);
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("%" PRId64, row);
        ImGui::TableNextColumn();
        if (std::isnan(r.sum_buggy_all[i])) ImGui::TextColored(ImVec4(0.95f, 0.4f, 0.35f, 1), "NaN (unwritten)");
        else ImGui::Text("%.6f", r.sum_buggy_all[i]);
        ImGui::TableNextColumn();
        if (std::isnan(r.sum_buggy_written[i])) ImGui::TextColored(ImVec4(0.95f, 0.4f, 0.35f, 1), "NaN");  // an edited kernel's
        else ImGui::Text("%.6f", r.sum_buggy_written[i]);
        ImGui::TableNextColumn();
        if (std::isnan(r.sum_fixed[i])) ImGui::TextColored(ImVec4(0.95f, 0.4f, 0.35f, 1), "NaN");  // an edited kernel's
        else ImGui::Text("%.6f", r.sum_fixed[i]);
        ImGui::TableNextColumn();
        ImGui::Text("%.6f", r.ref_head_mass[i]);
      }
      ImGui::EndTable();
    }
    ui::wrapped(r.row_sums_sentence);
  }

  // The sweep's diffs on a log axis: values below the floor (exact zeros) are drawn on it, and marked
  // again in grey so no clipped point passes for a measured one.
  void draw_sweep(const ImVec2& size) {
    const study::SoftmaxSweep& s = sweep_;
    const double floor = s.plot_floor;
    viz::Series buggy{"buggy (BLOCK_SIZE 1024)", {}, {}, kBuggyColour, false};
    viz::Series fixed{"fixed", {}, {}, kFixedColour, true};
    viz::Series clipped{"exact 0, drawn on the floor", {}, {}, kClippedColour, true};
    for (size_t i = 0; i < s.n_cols.size(); ++i) {
      const double n = double(s.n_cols[i]);
      buggy.x.push_back(n), buggy.y.push_back(std::max(s.buggy[i], floor));
      fixed.x.push_back(n), fixed.y.push_back(std::max(s.fixed[i], floor));
      if (s.buggy[i] < floor || s.fixed[i] < floor) clipped.x.push_back(n), clipped.y.push_back(floor);
    }
    viz::PlotOptions opt;
    opt.title = s.title;
    opt.x_label = "n_cols";
    opt.y_label = "max abs diff";
    opt.log_x = true;
    opt.log_y = true;
    opt.y_min = floor;
    opt.y_max = s.plot_ceiling;
    opt.v_lines = {1024.0};
    opt.v_line_labels = {"BLOCK_SIZE = 1024"};
    if (clipped.x.empty()) viz::line_plot("sweep", {buggy, fixed}, opt, size);
    else viz::line_plot("sweep", {buggy, fixed, clipped}, opt, size);
  }

  void tooltip(int row, int col, bool buggy) {
    const study::SoftmaxBug& r = bug_;
    if (row < 0 || col < 0 || row >= r.rows || col >= r.n_cols) return;
    const size_t i = size_t(row) * size_t(r.n_cols) + size_t(col);
    ImGui::BeginTooltip();
    ImGui::Text("row %d (pid %d), column %d   x = %.4f", row, row, col, r.x[i]);
    const float o = buggy ? r.out_buggy[i] : r.out_fixed[i];
    if (std::isnan(o)) ImGui::TextColored(ImVec4(0.95f, 0.4f, 0.35f, 1), "out = NaN: never written (offset %d >= BLOCK_SIZE = 1024)", col);
    else ImGui::Text("out = %.6g   reference = %.6g", o, r.ref[i]);
    ImGui::EndTooltip();
  }

  // [SECTION] the online view --------------------------------------------------------------------------------
  void ensure_online(Backend b) {
    const std::string key = ui::settings_key(params_, {"n_cols", "rows", "seed", "chunk", "trace_row"}, b);
    if (key != online_key_) {
      online_key_ = key;
      try {
        compute_online(b);
        online_error_.clear();
      } catch (const std::exception& e) {
        online_error_ = ui::error_text(e);
        online_valid_ = false;
      }
    }
  }

  void draw_online(Backend b) {
    ImGui::PushItemWidth(150);
    ui::param_row(params_, {"chunk", "trace_row"}, &control_error_);
    ImGui::PopItemWidth();
    ensure_online(b);
    ui::error_box(online_error_);
    if (!online_valid_) return;
    const study::SoftmaxOnline& r = online_;
    const int64_t n = r.n_cols;
    ui::wrapped(r.intro);
    ui::status_line("online matches reference (this row):", r.check.sentence, r.check.pass);

    ui::section("The row, chunk by chunk");
    ui::wrapped_dim("synthetic input: a rising wave plus noise");
    const float avail = ImGui::GetContentRegionAvail().x;
    row_map_.set_scale({viz::ColorScale::Kind::Diverging, -r.row_absmax, r.row_absmax, "x value"});
    row_map_.set_grid(r.chunk < n ? r.chunk : 0, 0);
    viz::HeatmapHover h =
        row_map_.draw("row", row_tex_, ImVec2(avail - row_map_.colorbar_width(), ui::px(64.0f)), on_fresh_);
    on_fresh_ = false;
    if (h.active && h.col >= 0 && h.col < n) {
      const int64_t k = h.col / r.chunk;
      const study::SoftmaxOnlineStep& s = r.steps[size_t(k)];
      ImGui::SetTooltip("column %d (chunk %" PRId64 ")  x = %.4f\nafter chunk %" PRId64 ": m = %.4f, l = %.4f", h.col, k,
                        r.row_x[size_t(h.col)], k, s.m, s.l);
    }

    const float plot_h = std::clamp(ImGui::GetContentRegionAvail().y * 0.5f, ui::px(170.0f), ui::px(300.0f));
    draw_online_plots(ui::columns_or_stack(2, 420.0f), plot_h);
    ui::section("Recorded per chunk (from the kernel's trace)");
    draw_online_table();
  }

  // The maxes beside the sums where the panel is wide enough, one above the other where it is not.
  void draw_online_plots(const ui::ColumnsLayout& cols, float plot_h) {
    const study::SoftmaxOnline& r = online_;
    viz::Series cmax{"rowmax(chunk)", {}, {}, kBuggyColour, true};
    viz::Series rmax{"running max m", {}, {}, kFixedColour, false};
    viz::Series rsum{"running sum l", {}, {}, kFixedColour, false};
    viz::Series full{"sum exp(x - m) so far, float64", {}, {}, kRefColour, true};
    for (size_t k = 0; k < r.steps.size(); ++k) {
      const study::SoftmaxOnlineStep& s = r.steps[k];
      const double x1 = double(s.last_col + 1);  // columns seen after chunk k
      cmax.x.push_back(x1), cmax.y.push_back(s.chunk_max);
      // m is a staircase: it keeps its value while the next chunk is read and jumps once that chunk ends.
      // (A riser only where m moved: a repeated point would leave a zero-length segment in the polyline.)
      if (k && s.m != r.steps[k - 1].m) rmax.x.push_back(x1), rmax.y.push_back(r.steps[k - 1].m);
      rmax.x.push_back(x1), rmax.y.push_back(s.m);
      rsum.x.push_back(x1), rsum.y.push_back(s.l);
      full.x.push_back(x1), full.y.push_back(s.ref_sum);
    }
    viz::PlotOptions o1;
    o1.title = "max: the chunk's own and the running m";
    o1.x_label = "columns seen";
    o1.y_label = "x and m";
    ui::column_begin(cols, 0);
    viz::line_plot("maxes", {cmax, rmax}, o1, ImVec2(cols.width, plot_h));
    ui::column_end();
    viz::PlotOptions o2;
    o2.title = "running sum l, rescaled whenever m moves";
    o2.x_label = "columns seen";
    o2.y_label = "running sum l";
    ui::column_begin(cols, 1);
    viz::line_plot("sums", {rsum, full}, o2, ImVec2(cols.width, plot_h));
    ui::column_end();
  }

  void draw_online_table() {
    const study::SoftmaxOnline& r = online_;
    if (ImGui::BeginTable("chunks", 6, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY,
                          ImVec2(0, std::max(ui::px(80.0f), ImGui::GetContentRegionAvail().y - ui::px(6.0f))))) {
      ImGui::TableSetupScrollFreeze(0, 1);
      ImGui::TableSetupColumn("chunk");
      ImGui::TableSetupColumn("columns");
      ImGui::TableSetupColumn("rowmax(chunk)");
      ImGui::TableSetupColumn("m after");
      ImGui::TableSetupColumn("exp(m_old - m_new)");
      ImGui::TableSetupColumn("l after");
      ImGui::TableHeadersRow();
      for (size_t k = 0; k < r.steps.size(); ++k) {
        const study::SoftmaxOnlineStep& s = r.steps[k];
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("%zu", k);
        ImGui::TableNextColumn();
        ImGui::Text("%" PRId64 "..%" PRId64, s.first_col, s.last_col);
        ImGui::TableNextColumn();
        ImGui::Text("%.4f", s.chunk_max);
        ImGui::TableNextColumn();
        ImGui::Text("%.4f", s.m);
        ImGui::TableNextColumn();
        if (k == 0) ImGui::TextDisabled("(first chunk)");
        else if (s.m_moved) ImGui::TextColored(ImVec4(1.0f, 0.75f, 0.35f, 1), "%.4f  (m moved)", s.alpha);
        else ImGui::Text("1");
        ImGui::TableNextColumn();
        ImGui::Text("%.4f", s.l);
      }
      ImGui::EndTable();
    }
  }

  // [SECTION] computing: the study runs, the panel fills its textures -----------------------------------------
  void compute_bug(Backend b) {
    bug_valid_ = false;
    bug_ = study::softmax_bug(b, params_);
    const study::SoftmaxBug& r = bug_;
    const int64_t n = r.n_cols, rows = r.rows;
    // The heatmaps: (value, state) cells from the outputs and their recorded writers, on the backend.
    buggy_tex_.resize(int(n), int(rows), 2);
    fixed_tex_.resize(int(n), int(rows), 2);
    if (b == Backend::Cuda) {
      viz::DataTexture::begin_device_write_all({&buggy_tex_, &fixed_tex_});
      try {  // a failure must leave the buffers unmapped, or the next parameter change cannot map them
        softmax::output_cells(b, r.dev_out_buggy.data(), r.trace_buggy.writer.data(), n, 0, rows,
                              buggy_tex_.begin_device_write());
        softmax::output_cells(b, r.dev_out_fixed.data(), r.trace_fixed.writer.data(), n, 0, rows,
                              fixed_tex_.begin_device_write());
      } catch (...) {
        viz::DataTexture::end_device_write_all({&buggy_tex_, &fixed_tex_});
        throw;
      }
      viz::DataTexture::end_device_write_all({&buggy_tex_, &fixed_tex_});
    } else {
      std::vector<float> cells(size_t(n * rows) * 2);
      softmax::output_cells(b, r.dev_out_buggy.data(), r.trace_buggy.writer.data(), n, 0, rows, cells.data());
      buggy_tex_.upload(cells.data());
      softmax::output_cells(b, r.dev_out_fixed.data(), r.trace_fixed.writer.data(), n, 0, rows, cells.data());
      fixed_tex_.upload(cells.data());
    }
    const std::string sweep_key = ui::settings_key(params_, {"seed"}, b);
    if (sweep_key_ != sweep_key) {
      sweep_key_.clear();
      sweep_ = study::softmax_sweep(b, params_);
      sweep_key_ = sweep_key;
    }
    fresh_ = true;
    bug_valid_ = true;
  }

  void compute_online(Backend b) {
    online_valid_ = false;
    online_ = study::softmax_online(b, params_);
    const study::SoftmaxOnline& r = online_;
    const int64_t n = r.n_cols;
    const float* row_x = r.dev_x.data() + r.row * n;
    row_tex_.resize(int(n), 1, 2);
    if (b == Backend::Cuda) {
      viz::DataTexture::begin_device_write_all({&row_tex_});
      try {  // a failure must leave the buffer unmapped, or the next parameter change cannot map it
        softmax::value_cells(b, row_x, n, row_tex_.begin_device_write());
      } catch (...) {
        viz::DataTexture::end_device_write_all({&row_tex_});
        throw;
      }
      viz::DataTexture::end_device_write_all({&row_tex_});
    } else {
      std::vector<float> cells(size_t(n) * 2);
      softmax::value_cells(b, row_x, n, cells.data());
      row_tex_.upload(cells.data());
    }
    on_fresh_ = true;
    online_valid_ = true;
  }

  ParamValues params_;
  std::string control_error_, view_forced_;
  // the bug view
  std::string bug_key_, bug_error_, sweep_key_;
  bool bug_valid_ = false, fresh_ = false;
  study::SoftmaxBug bug_;
  study::SoftmaxSweep sweep_;
  viz::DataTexture buggy_tex_, fixed_tex_;
  viz::Heatmap buggy_map_, fixed_map_;
  viz::ColorScale scale_;
  // the online view
  std::string online_key_, online_error_;
  bool online_valid_ = false, on_fresh_ = false;
  study::SoftmaxOnline online_;
  viz::DataTexture row_tex_;
  viz::Heatmap row_map_;
};

}  // namespace

std::unique_ptr<Panel> make_softmax_panel() { return std::make_unique<SoftmaxPanel>(); }

}  // namespace kl::app
