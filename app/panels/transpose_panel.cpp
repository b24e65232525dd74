// Rung 1½ panel (issue 31): the warp's view of memory, through a matrix transpose. Everything it states is
// kernels/studies/transpose_study.h's (the three kernels' access logs turned into sectors and bank
// conflicts, their outputs checked, the GB/s measured or recorded); this file draws:
//   [SECTION] Panel state and controls
//   [SECTION] Per kernel: sectors per request, bank conflicts, GB/s against a copy
//   [SECTION] A warp on the matrix: its 32 lanes on the chosen program's tile, the sectors each request moves
//   [SECTION] Shared-memory banks: 32 columns, the words each bank is asked for and the lanes asking
#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <set>

#include "app/notice.h"
#include "app/panels/panels.h"
#include "app/ui.h"
#include "kernels/studies/transpose_study.h"
#include "viz/layout_audit.h"
#include "viz/plot.h"

namespace kl::app {
namespace {

namespace ts = study::transpose_study;
namespace wa = warp_access;
using transpose::Variant;

// Lane L's colour: a hue walking from red (lane 0) to violet (lane 31).
ImU32 lane_colour(int lane, float alpha = 1.0f) {
  float r, g, b;
  ImGui::ColorConvertHSVtoRGB(0.8f * float(lane) / 31.0f, 0.75f, 0.95f, r, g, b);
  return ImGui::GetColorU32(ImVec4(r, g, b, alpha));
}
constexpr ImU32 kMoved = IM_COL32(230, 170, 60, 255);      // a sector's bytes the request moves but no lane asked for
constexpr ImU32 kIdle = IM_COL32(58, 60, 68, 255);         // an element of the tile the request does not touch
constexpr ImU32 kOutside = IM_COL32(26, 26, 30, 255);      // past the matrix's edge
constexpr ImU32 kGrid = IM_COL32(20, 20, 24, 255);
constexpr ImU32 kSectorEdge = IM_COL32(255, 215, 120, 255);

// Text wrapped at the current wrap position (inside ui::column_begin: the column's right edge).
void column_text(const std::string& text, ImU32 color = 0) {
  if (color) ImGui::PushStyleColor(ImGuiCol_Text, color);
  ImGui::TextUnformatted(text.c_str());
  if (color) ImGui::PopStyleColor();
}

// [SECTION] Panel state and controls ------------------------------------------------------------------

class TransposePanel : public Panel {
 public:
  TransposePanel() : params_(ts::params()) {}  // the study's list: `study transpose` takes the same

  std::string id() const override { return "transpose"; }
  std::string title() const override { return "1½ · Memory: transpose"; }
  ParamValues& params() override { return params_; }
  SourceFocus source_focus() const override {  // the kernel the warp views draw
    return {"transpose.cu", {transpose::kernel_name(transpose::parse_variant(params_.get_text("variant")))}};
  }
  std::vector<TourStop> tour_stops() const override {
    return {{"naive", {"variant=naive"}}, {"tiled", {"variant=tiled"}}, {"padded", {"variant=padded"}}};
  }

  void draw(AppContext& ctx) override {
    const Backend b = ctx.backend.backend;
    const std::string key = ui::settings_key(params_, {"rows", "cols", "variant", "program", "warp"}, b);
    if (key != computed_key_) {
      computed_key_ = key;
      compute(b);
    }
    if (valid_) notice(result_.notice);
    ui::section("Matrix and warp");
    ImGui::PushItemWidth(150);
    ui::param_row(params_, {"rows", "cols"}, &control_error_, 18);
    ui::param_row(params_, {"variant", "program", "warp"}, &control_error_, 18);
    ImGui::PopItemWidth();
    ui::error_box(control_error_);
    ui::error_box(run_error_);
    if (!valid_) return;

    const ts::TransposeResult& r = result_;
    ui::wrapped_dim(r.grid_line);
    if (!r.source_line.empty()) ui::wrapped_colored(IM_COL32(255, 190, 120, 255), r.source_line);
    draw_checks(r);
    // The warp's view first (on a 1280x720 projector under the source pane it starts above the fold), then the
    // three kernels side by side, then the help.
    draw_warp(r);
    draw_banks(r);
    draw_costs(r);
    draw_speed(r);
    if (ImGui::CollapsingHeader("What you are looking at")) ui::explain("transpose.md");
  }

 private:
  void compute(Backend b) {
    valid_ = false;
    try {
      result_ = ts::run(b, params_);
      run_error_.clear();
      valid_ = true;
    } catch (const std::exception& e) {
      run_error_ = ui::error_text(e);
    }
  }

  // Each kernel against the reference, on one line where they fit (status_line: the editor reads the verdicts).
  static void draw_checks(const ts::TransposeResult& r) {
    const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x, gap = ui::px(24);
    bool first = true;
    for (const ts::KernelCosts& k : r.kernels) {
      const std::string label = std::string(transpose::variant_name(k.variant)) + " matches reference:";
      const float w = ImGui::CalcTextSize((label + " " + k.matches.sentence).c_str()).x + ImGui::GetStyle().ItemSpacing.x;
      if (!first && ImGui::GetItemRectMax().x + gap + w <= right) ImGui::SameLine(0, gap);
      first = false;
      ui::status_line(label.c_str(), k.matches.sentence, k.matches.pass);
    }
    for (const ts::KernelCosts& k : r.kernels)
      if (!k.fault_line.empty()) ui::error_box(k.fault_line);
  }

  // [SECTION] Per kernel -------------------------------------------------------------------------------

  void draw_costs(const ts::TransposeResult& r) {
    ui::section("Per kernel, every program's requests");
    const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchSame;
    if (!ImGui::BeginTable("costs", 5, flags)) return;
    ImGui::TableSetupColumn("kernel");
    ImGui::TableSetupColumn("in's loads: sectors / request");
    ImGui::TableSetupColumn("out's stores: sectors / request");
    ImGui::TableSetupColumn("tile stores: bank conflict");
    ImGui::TableSetupColumn("tile loads: bank conflict");
    ui::table_headers_wrapped();
    for (const ts::KernelCosts& k : r.kernels) {
      ImGui::TableNextRow();
      ImGui::TableSetColumnIndex(0);
      ImGui::TextUnformatted(transpose::variant_name(k.variant));
      ImGui::TableSetColumnIndex(1);
      sectors_cell(k.loads);
      ImGui::TableSetColumnIndex(2);
      sectors_cell(k.stores);
      ImGui::TableSetColumnIndex(3);
      degree_cell(k, k.tile_stores);
      ImGui::TableSetColumnIndex(4);
      degree_cell(k, k.tile_loads);
    }
    ImGui::EndTable();
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetColorU32(ImGuiCol_TextDisabled));
    ui::wrapped("4 sectors (128 B) is a coalesced request of 32 floats; a conflict's degree is the passes the "
                "worst request needs (1: none).");
    ImGui::PopStyleColor();
  }

  static void sectors_cell(const wa::Totals& t) {
    const std::string v = ts::per_request_text(t.sectors_per_request());
    const bool ideal = t.sectors_per_request() <= 4.05;
    ImGui::TextColored(ideal ? ImVec4(0.55f, 0.9f, 0.55f, 1) : ImVec4(1.0f, 0.55f, 0.45f, 1), "%s", v.c_str());
  }
  static void degree_cell(const ts::KernelCosts& k, const wa::Totals& t) {
    if (!k.uses_tile) {
      ImGui::TextDisabled("no tile");
      return;
    }
    if (t.max_degree <= 1) ImGui::TextColored(ImVec4(0.55f, 0.9f, 0.55f, 1), "none");
    else ImGui::TextColored(ImVec4(1.0f, 0.55f, 0.45f, 1), "%d-way", t.max_degree);
  }

  void draw_speed(const ts::TransposeResult& r) {
    if (!r.speed_line.empty()) ui::wrapped_dim(r.speed_line);
    if (!r.measured && !r.recorded) return;
    ui::wrapped_dim(r.speed_source);
    std::vector<viz::Bar> bars;
    if (r.measured) bars.push_back({"copy", r.copy_gbs, IM_COL32(150, 150, 160, 255)});
    for (Variant v : transpose::kVariants)
      if (r.speed[int(v)].known)
        bars.push_back({transpose::variant_name(v), r.speed[int(v)].gbs, v == Variant::Naive ? IM_COL32(230, 110, 90, 255)
                                                                                             : IM_COL32(110, 170, 230, 255)});
    viz::PlotOptions o;
    o.title = r.speed_title;
    o.y_label = "GB/s";
    const float w = std::min(ImGui::GetContentRegionAvail().x, ui::px(560));
    viz::bar_chart("speed", bars, o, ImVec2(w, ui::px(170)));
  }

  // [SECTION] A warp on the matrix ----------------------------------------------------------------------

  void draw_warp(const ts::TransposeResult& r) {
    const ts::KernelCosts& k = r.of(r.shown);
    char title[160];
    std::snprintf(title, sizeof title, "A warp on the matrix: %s, program %" PRId64 " (tile %" PRId64 ", %" PRId64 "), warp %d",
                  transpose::variant_name(r.shown), r.program, r.program_x, r.program_y, r.warp);
    ui::section(title);
    ui::wrapped_dim(r.warp_line);
    const ui::ColumnsLayout c = ui::columns_or_stack(2, 300.0f);
    ui::column_begin(c, 0);
    // in: the program's tile at in's rows 32 by, columns 32 bx.
    tile_view("in", k.warp_loads.empty() ? nullptr : &k.warp_loads[0], r.rows, r.cols, r.program_y * 32,
              r.program_x * 32, c.width);
    ui::column_end();
    ui::column_begin(c, 1);
    // out: the same tile transposed, at out's rows 32 bx, columns 32 by.
    tile_view("out", k.warp_stores.empty() ? nullptr : &k.warp_stores[0], r.cols, r.rows, r.program_x * 32,
              r.program_y * 32, c.width);
    ui::column_end();
    ui::wrapped_dim("colour: the lane that asked for the element (lane 0 red .. lane 31 violet); amber: the rest of "
                        "a 32-byte sector the request moves; grey: the tile's other elements; dark: past the edge");
  }

  // The 32 x 32 region of a [mrows, mcols] matrix at (r0, c0), named `what` ("in", "out").
  struct Region {
    const char* what;
    int64_t mrows, mcols, r0, c0;
  };
  // What a request touches: the element each lane asked for, and the sectors it moves.
  struct Touched {
    std::map<int64_t, int> lane_of;  // element -> lane
    std::set<int64_t> sectors;
  };

  // The 32 x 32 region of a [mrows, mcols] matrix at (r0, c0), the request's lanes and sectors on it.
  static void tile_view(const char* what, const wa::Request* req, int64_t mrows, int64_t mcols, int64_t r0, int64_t c0,
                        float width) {
    const Region g{what, mrows, mcols, r0, c0};
    region_captions(g, req);
    const Touched t = touched_by(req);
    const float cell = std::max(2.0f, std::floor(std::min(width, ui::px(320)) / 32.0f));
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    int hover_r = -1, hover_c = -1;
    draw_region_cells(g, t, p0, cell, &hover_r, &hover_c);
    draw_sector_outlines(g, t, p0, cell);
    ImGui::Dummy(ImVec2(cell * 32, cell * 32));
    viz::audit::last_item(std::string("tile of ") + what);
    if (hover_r >= 0 && ImGui::IsItemHovered()) region_tooltip(g, t, hover_r, hover_c);
  }

  // What the request is (or that there is none), and which rows and columns the region shows.
  static void region_captions(const Region& g, const wa::Request* req) {
    const char* what = g.what;
    const int64_t r0 = g.r0, c0 = g.c0;
    const std::string subject = std::string("the warp's first ") + (req && req->store ? "store to " : "load of ") + what;
    column_text(req ? ts::global_caption(*req, subject) : std::string(what) + ": this warp made no request",
                ImGui::GetColorU32(ImGuiCol_Text));
    char where[160];
    const int64_t r1 = std::min(r0 + 31, g.mrows - 1), c1 = std::min(c0 + 31, g.mcols - 1);
    std::snprintf(where, sizeof where, "%s rows %" PRId64 "..%" PRId64 ", columns %" PRId64 "..%" PRId64 "%s", what, r0, r1,
                  c0, c1, r1 < r0 + 31 || c1 < c0 + 31 ? " (the rest of the 32 x 32 tile lies past the edge)" : "");
    column_text(where, ImGui::GetColorU32(ImGuiCol_TextDisabled));
  }

  static Touched touched_by(const wa::Request* req) {
    Touched t;
    if (!req) return t;
    for (int l = 0; l < wa::kWarpSize; ++l)
      if ((req->active >> l) & 1u) t.lane_of[req->offset[l] / 4] = l;
    t.sectors = wa::sectors_of(*req);
    return t;
  }

  // One `cell` square per element from `p0`, coloured by the lane that asked for it, else by whether its sector
  // moves; the cell under the mouse goes to `hover_r`, `hover_c`.
  static void draw_region_cells(const Region& g, const Touched& t, ImVec2 p0, float cell, int* hover_r, int* hover_c) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    for (int i = 0; i < 32; ++i)
      for (int j = 0; j < 32; ++j) {
        const ImVec2 a(p0.x + float(j) * cell, p0.y + float(i) * cell), b(a.x + cell, a.y + cell);
        const int64_t r = g.r0 + i, c = g.c0 + j;
        ImU32 col = kOutside;
        if (r < g.mrows && c < g.mcols) {
          const int64_t e = r * g.mcols + c;
          auto it = t.lane_of.find(e);
          col = it != t.lane_of.end() ? lane_colour(it->second) : t.sectors.count(e * 4 / wa::kSectorBytes) ? kMoved : kIdle;
        }
        dl->AddRectFilled(a, b, col);
        if (cell >= 6) dl->AddRect(a, b, kGrid);
        if (mouse.x >= a.x && mouse.x < b.x && mouse.y >= a.y && mouse.y < b.y) *hover_r = i, *hover_c = j;
      }
  }

  // Each sector the request moves, outlined where it lies in the region (a run of 8 floats in one row).
  static void draw_sector_outlines(const Region& g, const Touched& t, ImVec2 p0, float cell) {
    const int64_t mrows = g.mrows, mcols = g.mcols, r0 = g.r0, c0 = g.c0;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (int i = 0; i < 32 && !t.sectors.empty(); ++i) {
      const int64_t r = r0 + i;
      if (r >= mrows) break;
      int j = 0;
      while (j < 32) {
        const int64_t c = c0 + j;
        if (c >= mcols) break;
        const int64_t s = (r * mcols + c) * 4 / wa::kSectorBytes;
        int end = j;
        while (end < 32 && c0 + end < mcols && (r * mcols + c0 + end) * 4 / wa::kSectorBytes == s) ++end;
        if (t.sectors.count(s))
          dl->AddRect(ImVec2(p0.x + float(j) * cell, p0.y + float(i) * cell),
                      ImVec2(p0.x + float(end) * cell, p0.y + float(i + 1) * cell), kSectorEdge, 0, 0, 1.5f);
        j = end;
      }
    }
  }

  // The hovered element (row `i`, column `j` of the region): where it lies, and which lane asked for it.
  static void region_tooltip(const Region& g, const Touched& t, int i, int j) {
    const char* what = g.what;
    const int64_t mrows = g.mrows, mcols = g.mcols;
    const int64_t r = g.r0 + i, c = g.c0 + j;
    ImGui::BeginTooltip();
    if (r < mrows && c < mcols) {
      const int64_t e = r * mcols + c;
      ImGui::Text("%s[%" PRId64 "][%" PRId64 "]: element %" PRId64 ", byte %" PRId64 ", sector %" PRId64, what, r, c, e,
                  e * 4, e * 4 / wa::kSectorBytes);
      auto it = t.lane_of.find(e);
      if (it != t.lane_of.end()) ImGui::Text("asked for by lane %d", it->second);
      else if (t.sectors.count(e * 4 / wa::kSectorBytes)) ImGui::TextUnformatted("moved with its sector, asked for by no lane");
    } else {
      ImGui::Text("past the matrix's edge (%" PRId64 " x %" PRId64 ")", mrows, mcols);
    }
    ImGui::EndTooltip();
  }

  // [SECTION] Shared-memory banks ---------------------------------------------------------------------

  void draw_banks(const ts::TransposeResult& r) {
    const ts::KernelCosts& k = r.of(r.shown);
    ui::section("Shared-memory banks: the tile's requests of this warp");
    if (!k.uses_tile) {
      ui::wrapped_dim(std::string(transpose::variant_name(r.shown)) +
                              " uses no shared memory: pick variant tiled or padded to see its tile's banks");
      return;
    }
    ui::wrapped_dim("each column is a bank (4-byte word w is in bank w % 32); each box one word asked of it, "
                        "coloured by the first lane asking; a bank serves one word per pass, so the tallest "
                        "column is the passes the request takes");
    // The warp's first store into the tile and its first load from it.
    const wa::Request* store = nullptr;
    const wa::Request* load = nullptr;
    for (const wa::Request& q : k.warp_tile) {
      if (q.store && !store) store = &q;
      if (!q.store && !load) load = &q;
    }
    const ui::ColumnsLayout c = ui::columns_or_stack(2, 300.0f);
    int i = 0;
    for (const wa::Request* q : {store, load}) {
      ui::column_begin(c, i++);
      if (q) bank_view(*q, c.width);
      else column_text("no such request", ImGui::GetColorU32(ImGuiCol_TextDisabled));
      ui::column_end();
    }
  }

  static void bank_view(const wa::Request& q, float width) {
    column_text(ts::shared_caption(q, q.store ? "the warp's first store to the tile" : "the warp's first load of the tile"),
                ImGui::GetColorU32(ImGuiCol_Text));
    // Per bank, its distinct words in order, each with the lanes asking for it.
    std::map<int64_t, std::vector<int>> words[wa::kBanks];
    for (int l = 0; l < wa::kWarpSize; ++l)
      if ((q.active >> l) & 1u) {
        const int64_t w = q.offset[l] / wa::kBankBytes;
        words[w % wa::kBanks][w].push_back(l);
      }
    int most = 1;
    for (const auto& b : words) most = std::max(most, int(b.size()));
    const float label_h = ImGui::GetTextLineHeight();
    const float bw = std::floor(std::min(width, ui::px(460)) / float(wa::kBanks));
    const float chart_h = ui::px(150);
    const float bh = std::min(ui::px(20), chart_h / float(std::max(most, 4)));
    // Lane numbers in the boxes only where every one fits ("31" the widest), so none is half there.
    const ImVec2 widest = ImGui::CalcTextSize("31");
    const bool numbers = widest.x <= bw - 3 && widest.y <= bh;
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    const float base = p0.y + chart_h;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddRectFilled(p0, ImVec2(p0.x + bw * wa::kBanks, base), IM_COL32(34, 36, 42, 255));
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    int hover_bank = -1;
    for (int b = 0; b < wa::kBanks; ++b) {
      const float x = p0.x + float(b) * bw;
      int level = 0;
      for (const auto& [word, lanes] : words[b]) {
        const ImVec2 a(x + 1, base - float(level + 1) * bh + 1), z(x + bw - 1, base - float(level) * bh);
        dl->AddRectFilled(a, z, lane_colour(lanes.front()));
        const std::string t = lanes.size() == 1 ? std::to_string(lanes.front()) : std::to_string(lanes.size()) + "x";
        const ImVec2 ts = ImGui::CalcTextSize(t.c_str());
        if (numbers && ts.x <= z.x - a.x)
          dl->AddText(ImVec2(a.x + (z.x - a.x - ts.x) * 0.5f, a.y + (z.y - a.y - ts.y) * 0.5f), IM_COL32(15, 15, 20, 255), t.c_str());
        ++level;
      }
      if (mouse.x >= x && mouse.x < x + bw && mouse.y >= p0.y && mouse.y < base + label_h) hover_bank = b;
    }
    // Bank numbers under the columns, as many as fit side by side.
    const float num_w = ImGui::CalcTextSize("31").x + ui::px(4);
    int every = 1;
    while (every < wa::kBanks && float(every) * bw < num_w) every *= 2;
    for (int b = 0; b < wa::kBanks; b += every) {
      const std::string t = std::to_string(b);
      const float tw = ImGui::CalcTextSize(t.c_str()).x;
      dl->AddText(ImVec2(p0.x + (float(b) + 0.5f) * bw - tw * 0.5f, base + 1), ImGui::GetColorU32(ImGuiCol_TextDisabled), t.c_str());
    }
    ImGui::Dummy(ImVec2(bw * wa::kBanks, chart_h + label_h + 2));
    viz::audit::last_item(q.store ? "banks of the tile's store" : "banks of the tile's load");
    const bool hovered = ImGui::IsItemHovered();
    ImGui::TextDisabled("bank");
    if (hovered && hover_bank >= 0) {
      ImGui::BeginTooltip();
      ImGui::Text("bank %d: %zu word%s", hover_bank, words[hover_bank].size(), words[hover_bank].size() == 1 ? "" : "s");
      for (const auto& [word, lanes] : words[hover_bank]) {
        std::string ls;
        for (int l : lanes) ls += (ls.empty() ? "" : ", ") + std::to_string(l);
        ImGui::Text("word %" PRId64 " (byte %" PRId64 "): lane%s %s", word, word * 4, lanes.size() == 1 ? "" : "s", ls.c_str());
      }
      ImGui::EndTooltip();
    }
  }

  ParamValues params_;
  std::string control_error_, run_error_, computed_key_;
  ts::TransposeResult result_;
  bool valid_ = false;
};

}  // namespace

std::unique_ptr<Panel> make_transpose_panel() { return std::make_unique<TransposePanel>(); }

}  // namespace kl::app
