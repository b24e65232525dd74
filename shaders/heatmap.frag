#version 330 core
// Turns one DataTexture (channel 0: value, channel 1: cell state) into colour, one output pixel at a
// time, so patterns and grid lines are drawn at screen resolution whatever the cell size.
// CELL_NORMAL, CELL_MASKED, CELL_UNWRITTEN, CELL_HIGHLIGHT and CELL_OUTSIDE are #defines the program
// puts after the #version line when it compiles this shader, generated from kernels/runtime/cell_state.h.
// The output texture's row 0 is the top row on screen (ImGui draws uv (0,0) at the top left), and so
// is the data texture's row 0: output pixel y counts down from the top, like data rows.
uniform sampler2D u_data;     // R32F / RG32F / RGBA32F, fetched texel by texel
uniform sampler2D u_lut;      // 256 x 2 RGBA8: row 0 sequential (viridis), row 1 diverging
uniform int u_kind;           // 0 sequential, 1 diverging, 2 categorical
uniform int u_channels;
uniform vec2 u_range;         // value range mapped onto [0, 1] of the colour map
uniform vec4 u_view;          // the visible part of the data, in cells: x0, y0, x1, y1
uniform vec2 u_out_size;      // output size in pixels
uniform ivec2 u_grid;         // a line every u_grid.x columns / u_grid.y rows; 0: none
uniform vec3 u_palette[12];   // categorical colours (program ids)
uniform int u_nan_unwritten;  // 1: a NaN with no state channel is a cell never written (a poisoned output)
layout(location = 0) out vec4 frag;
// What this pixel's footprint holds besides values, for the widget's column markers and key:
// r never written, g NaN, b masked (1 where any cell under the pixel is).
layout(location = 1) out vec4 flags;

const vec3 kMaskDark = vec3(0.17, 0.17, 0.18);
const vec3 kMaskLight = vec3(0.36, 0.36, 0.38);
const vec3 kUnwrittenRed = vec3(0.86, 0.14, 0.14);
const vec3 kUnwrittenBlack = vec3(0.06, 0.06, 0.06);
const vec3 kNanMagenta = vec3(0.87, 0.25, 0.87);
const vec3 kNanLight = vec3(0.98, 0.86, 0.98);
const int kStateNan = 100;  // not a stored state: a value the kernel wrote that is NaN

vec3 value_colour(float v) {
  if (u_kind == 2) {
    float c = clamp(floor(v), -16777216.0, 16777216.0);  // floats hold every integer up to 2^24
    int i = int(c) % 12;
    if (i < 0) i += 12;
    return u_palette[i];
  }
  float span = u_range.y - u_range.x;
  float t = clamp((v - u_range.x) / (abs(span) > 1.0e-30 ? span : 1.0), 0.0, 1.0);
  float row = u_kind == 1 ? 0.75 : 0.25;
  return texture(u_lut, vec2((t * 255.0 + 0.5) / 256.0, row)).rgb;
}

// True when a multiple of `every` cells lies inside this pixel's footprint [d - w/2, d + w/2).
bool on_line(float d, float w, int every) {
  if (every <= 0 || w > 0.25) return false;  // cells under 4 pixels: lines would swamp the data
  float n = float(every);
  return floor((d - 0.5 * w) / n) != floor((d + 0.5 * w) / n);
}

// A cell's state as drawn: the stored one, with a NaN value read as never written (where NaN is the
// poison of an output without a state channel) or as a NaN the kernel wrote.
int state_of(vec4 texel) {
  int state = u_channels >= 2 ? int(texel.g + 0.5) : CELL_NORMAL;
  if (state == CELL_NORMAL && isnan(texel.r)) state = (u_channels < 2 && u_nan_unwritten == 1) ? CELL_UNWRITTEN : kStateNan;
  return state;
}

void main() {
  vec2 p = gl_FragCoord.xy;  // pixel centre; y = 0.5 is the top row on screen
  vec2 per_px = (u_view.zw - u_view.xy) / u_out_size;  // cells per output pixel
  vec2 d = u_view.xy + p * per_px;                      // data coordinates in cells
  ivec2 size = textureSize(u_data, 0);
  ivec2 cell = clamp(ivec2(floor(d)), ivec2(0), size - 1);
  vec4 texel = texelFetch(u_data, cell, 0);
  float v = texel.r;
  int state = state_of(texel);

  // Where a pixel stands for several cells, every cell under it (up to 16 a side, spread evenly) is
  // looked at: a never-written or NaN cell wins the pixel, so that a single such column or row is never
  // lost between pixels, and the flags say what the pixel holds.
  ivec2 c0 = cell, c1 = cell;
  if (per_px.x > 1.0) {
    c0.x = clamp(int(floor(d.x - 0.5 * per_px.x)), 0, size.x - 1);
    c1.x = clamp(int(ceil(d.x + 0.5 * per_px.x)) - 1, 0, size.x - 1);
  }
  if (per_px.y > 1.0) {
    c0.y = clamp(int(floor(d.y - 0.5 * per_px.y)), 0, size.y - 1);
    c1.y = clamp(int(ceil(d.y + 0.5 * per_px.y)) - 1, 0, size.y - 1);
  }
  ivec2 n = c1 - c0 + 1;
  ivec2 steps = min(n, ivec2(16));
  bool any_unwritten = state == CELL_UNWRITTEN, any_nan = state == kStateNan, any_masked = state == CELL_MASKED;
  for (int j = 0; j < steps.y; ++j)
    for (int i = 0; i < steps.x; ++i) {
      ivec2 c = c0 + ivec2((n.x - 1) * i / max(steps.x - 1, 1), (n.y - 1) * j / max(steps.y - 1, 1));
      int s = state_of(texelFetch(u_data, c, 0));
      any_unwritten = any_unwritten || s == CELL_UNWRITTEN;
      any_nan = any_nan || s == kStateNan;
      any_masked = any_masked || s == CELL_MASKED;
    }
  if (state != CELL_OUTSIDE) {
    if (any_unwritten) state = CELL_UNWRITTEN;
    else if (any_nan) state = kStateNan;
  }
  flags = vec4(any_unwritten ? 1.0 : 0.0, any_nan ? 1.0 : 0.0, any_masked ? 1.0 : 0.0, 1.0);

  vec3 c;
  if (state == CELL_OUTSIDE) {
    // Outside the data (a raster's padding past the last cell): the window background.
    frag = vec4(0.11, 0.11, 0.12, 1.0);
    flags = vec4(0.0, 0.0, 0.0, 1.0);
    return;
  }
  if (state == CELL_MASKED) {
    // Masked lane: dark grey with diagonal hatching, 8-pixel period.
    c = mod(p.x + p.y, 8.0) < 3.0 ? kMaskLight : kMaskDark;
  } else if (state == CELL_UNWRITTEN) {
    // Never written: a red/black checker of 6-pixel squares.
    ivec2 q = ivec2(floor(p / 6.0));
    c = ((q.x + q.y) & 1) == 0 ? kUnwrittenRed : kUnwrittenBlack;
  } else if (state == kStateNan) {
    // A NaN the kernel wrote: magenta with light stripes the other way from the mask's, 6-pixel period.
    c = mod(p.x - p.y, 6.0) < 2.0 ? kNanLight : kNanMagenta;
  } else {
    c = isnan(v) ? kNanMagenta : value_colour(v);
    if (state == CELL_HIGHLIGHT) c = mix(c, vec3(1.0), 0.45);
  }
  if (on_line(d.x, per_px.x, u_grid.x) || on_line(d.y, per_px.y, u_grid.y)) c = mix(c, vec3(0.04), 0.6);
  frag = vec4(c, 1.0);
}
