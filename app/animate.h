// `kernel-ladder animate PANEL --vary KEY=FROM..TO[:STEP] [--set k=v ...] [--size WxH] [--fps N]
// --out FILE.gif`: one frame per value of KEY, rendered headlessly like `shot` (each frame is what
// `shot PANEL --set k=v ... --set KEY=value` draws: a fresh panel at those settings, three frames
// rendered, the last captured), written as an animated GIF (app/gif.h: a palette per frame, no
// dithering).
//
// --vary: FROM and TO are values of KEY, both inside its range; the walk goes from FROM towards TO and
// stops at the last value that does not pass TO.
//   integer (and 0/1) parameters: STEP is an integer >= 1, default 1;
//   power-of-two parameters:      STEP is a factor (a power of two >= 2), default 2;
//   number parameters:            STEP is required, > 0.
// Refused before any frame is drawn, exit 2: a malformed --vary (the text and the expected form), an
// unknown or choice parameter, FROM or TO outside the range (the wording of kernels/runtime/params.h),
// more than kMaxAnimationFrames frames, --fps outside [1, 50], --set of the varied key.
// Runs of kProgressFrames frames or more print a progress line every tenth of the way.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "app/gif.h"
#include "kernels/runtime/params.h"

namespace kl::viz {
class RenderHost;
}

namespace kl::app {

struct Shell;

constexpr int64_t kMaxAnimationFrames = 2000;
constexpr size_t kProgressFrames = 20;

struct AnimateOptions {
  std::string panel;
  std::string vary;               // KEY=FROM..TO[:STEP]
  std::vector<std::string> sets;  // key=value on top of the panel's defaults
  int width = 1000, height = 700;
  int fps = 4;
  bool chrome = false;  // the window's sidebar, source pane and status bar around the panel (as shot --chrome)
  std::string backend = "auto";
  std::string out;
};

int animate_command(const AnimateOptions& o);

// The values --vary walks, as the text each is set with; checked against `params` as above.
struct VaryValues {
  std::string key;
  std::vector<std::string> values;
};
VaryValues parse_vary(const std::string& text, const ParamValues& params);

// GIF frame time for `fps` frames per second, in hundredths of a second (the GIF's unit).
int gif_delay_cs(int fps);

// One animation drawn by a headless host: panel `panel` of `s` (re-created per frame) at `sets`, one
// frame per value of `vary`. Shared by `animate` and `tour --animate`.
struct AnimationJob {
  size_t panel = 0;
  std::vector<std::string> sets;
  VaryValues vary;
  int fps = 4;
  bool chrome = false;  // the window's sidebar, source pane and status bar around the panel (as shot --chrome)
  std::string out;
};
GifWriter::Stats render_animation(Shell& s, viz::RenderHost& host, const AnimationJob& job);

// "17 frames, 12 with every colour exact; 0.4% of pixels approximated" for the line after writing.
std::string colour_summary(const GifWriter::Stats& st);

}  // namespace kl::app
