// Heatmaps of DataTextures, always with their colour bar (the ImPlot/triton-viz habit).
// Channel 0 holds the value; channel 1 (when present) holds the cell's state, a kl::CellState
// (kernels/runtime/cell_state.h: normal, masked, unwritten, highlight, outside).
// The colouring runs in GLSL (shaders/heatmap.frag) into an RGBA texture drawn with ImGui::Image.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/runtime/cell_state.h"
#include "viz/data_texture.h"

struct ImDrawList;

struct ImVec2;

namespace kl::viz {

// The cell states, as viz::kCellMasked etc. (one definition: kernels/runtime/cell_state.h).
using ::kl::CellState;
#define KL_CELL_USING(name, value, what) using ::kl::kCell##name;
KL_CELL_STATES(KL_CELL_USING)
#undef KL_CELL_USING

struct ColorScale {
  enum class Kind { Sequential, Diverging, Categorical } kind = Kind::Sequential;
  float lo = 0.0f, hi = 1.0f;  // value range mapped onto the colour map (Categorical: ignored)
  std::string label;           // shown beside the colour bar
};

struct HeatmapHover {
  bool active = false;
  int col = -1, row = -1;  // data cell under the mouse
};

class Heatmap {
 public:
  Heatmap();
  ~Heatmap();
  Heatmap(const Heatmap&) = delete;
  Heatmap& operator=(const Heatmap&) = delete;

  void set_scale(const ColorScale& s) { scale_ = s; }
  // Thin lines every `cols` columns / `rows` rows (0: none), e.g. program boundaries.
  void set_grid(int cols, int rows) { grid_cols_ = cols, grid_rows_ = rows; }
  // Highlight a row and/or column (-1: none), e.g. the query and key a hovered weight came from.
  void set_highlight(int row, int col) { hl_row_ = row, hl_col_ = col; }
  // Leave the colour bar out (a strip that shares another heatmap's scale and bar): draw() then adds
  // nothing to the right of the image and colorbar_width() is 0.
  void set_colorbar(bool shown) { colorbar_ = shown; }
  // A one-channel texture whose output was poisoned with NaN before the launch: a NaN in it is a cell
  // never written (drawn as such), not a NaN the kernel wrote. Two-channel data says which in its state.
  void set_nan_means_unwritten(bool on) { nan_unwritten_ = on; }

  // What the image drawn last holds besides values (any cell under any pixel): never-written cells,
  // NaN values, masked cells. When either of the first two is there, draw() marks the columns that hold
  // them on the column axis (above the image) and puts a key under the image.
  struct Found {
    bool unwritten = false, nan = false, masked = false;
  };
  const Found& found() const { return found_; }

  // Colours `data` (only when it or the scale changed, or `dirty`) and draws it at `size` pixels,
  // with its colour bar to the right unless the scale is categorical. Returns the hovered cell.
  // Ctrl + the mouse wheel over the image zooms around the cursor (the wheel alone scrolls the window),
  // dragging a zoomed image (any button) pans it, a double click resets; reset_view() does the same from
  // code.
  HeatmapHover draw(const char* id, DataTexture& data, const ImVec2& size, bool dirty = true);
  void reset_view();

  // Width draw() adds to the right of the image for the colour bar (0 for categorical scales).
  float colorbar_width() const;

 private:
  struct State;  // GL objects, the zoom/pan view and what was coloured last (heatmap.cpp)
  void colorize(DataTexture& data, int out_w, int out_h);
  void read_flags(int out_w, int out_h);
  std::unique_ptr<State> st_;
  ColorScale scale_;
  int grid_cols_ = 0, grid_rows_ = 0, hl_row_ = -1, hl_col_ = -1;
  bool colorbar_ = true, nan_unwritten_ = false;
  unsigned rgba_ = 0, fbo_ = 0, flags_ = 0;
  int rgba_w_ = 0, rgba_h_ = 0;
  std::vector<unsigned char> column_flags_;  // per output pixel column: bit 1 never written, 2 NaN
  Found found_;
  void draw_column_marks(const ImVec2& pos, const ImVec2& size) const;
  void draw_key(float width) const;
  // draw()'s parts, on the image at pos of `size` pixels showing a w x h cells texture: the pointer's zoom,
  // pan and reset; the highlight bands; the hovered cell (its outline, and the log line); the corner text; the
  // log line of the marks a test reads.
  void interact(const ImVec2& pos, const ImVec2& size, float w, float h, bool hovered);
  void draw_bands(ImDrawList* dl, const ImVec2& pos, const ImVec2& size, int w, int h) const;
  HeatmapHover hover_cell(const char* id, ImDrawList* dl, const ImVec2& pos, const ImVec2& size, int w, int h) const;
  void draw_corner(ImDrawList* dl, const ImVec2& pos, const ImVec2& size, float w, float h, bool hovered) const;
  void log_marks(const char* id) const;
};

// The perceptual colour map used everywhere (viridis-like), for legends drawn outside heatmaps.
void colormap_rgb(float t, float rgb[3]);
// The categorical palette used for program ids (same as the shader's).
void categorical_rgb(int index, float rgb[3]);
// The diverging map (blue, white at the midpoint, red), as the shader's.
void diverging_rgb(float t, float rgb[3]);
// A vertical colour bar with ticks, for any widget that colours with ColorScale.
// Its ticks, labels and caption stay inside `size`; colorbar_width_for() is the width they need.
void colorbar(const ColorScale& s, const ImVec2& size);
float colorbar_width_for(const ColorScale& s);

}  // namespace kl::viz
