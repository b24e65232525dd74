// Animated GIF files from RGBA8 frames (Debian's giflib), for `animate` and `tour --animate`.
//
// Colours: every frame has its own palette (a local colour map), no dithering. A frame (or the part of
// it that changed) with at most 256 distinct colours is stored exactly. One with more: the 192 colours
// that cover the most pixels are kept exactly (ties: the smaller 0xRRGGBB first), the other colours are
// median-cut (weighted by pixels, the widest channel of the box with the most pixels x range split at
// its weighted median) into 64 boxes, each represented by its most frequent colour, and every colour
// not in the palette becomes the nearest entry in RGB (ties: the earlier entry). Heatmap cells and flat
// UI fills cover many pixels each and stay exact; what is approximated is mostly anti-aliased text
// edges and heatmaps with more shades than a palette holds. Deterministic: same frames, same bytes.
//
// Size: after the first frame only the rectangle that differs from the previous frame is written (the
// rest is kept: disposal "do not dispose"), a frame with no change as one unchanged pixel. The file
// loops forever (the NETSCAPE2.0 extension).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

struct GifFileType;

namespace kl::app {

// A frame's pixels as palette indices: `palette` holds 0xRRGGBB, at most 256 entries.
struct Quantised {
  std::vector<uint32_t> palette;
  std::vector<uint8_t> index;
  uint64_t approximated = 0;  // pixels whose colour is not exactly their palette entry's
  bool exact() const { return approximated == 0; }
};
// `rgb` holds `pixels` colours as 0xRRGGBB (alpha dropped).
Quantised quantise(const std::vector<uint32_t>& rgb);

class GifWriter {
 public:
  struct Stats {
    int frames = 0;
    int exact_frames = 0;        // frames stored without any colour approximated
    uint64_t pixels = 0;         // pixels written (the changed rectangles)
    uint64_t approximated = 0;   // of them, approximated by the nearest palette colour
  };

  // Opens `path` for frames of width x height; `delay_cs`: hundredths of a second per frame.
  // Throws InputError "PATH: cannot write (...)" when the file cannot be created (as .npy outputs do).
  GifWriter(const std::string& path, int width, int height, int delay_cs);
  ~GifWriter();
  GifWriter(const GifWriter&) = delete;
  GifWriter& operator=(const GifWriter&) = delete;

  // RGBA8, top row first, width*height*4 bytes.
  void add_frame(const std::vector<uint8_t>& rgba);
  // Finishes the file; throws RuntimeError when giflib reports a failure. Called by the destructor
  // (which swallows the error) when not called before.
  void close();
  const Stats& stats() const { return stats_; }

 private:
  void put_image(int left, int top, int w, int h, const std::vector<uint32_t>& rgb);
  [[noreturn]] void fail(const char* what, int code);

  std::string path_;
  int width_, height_, delay_cs_;
  GifFileType* gif_ = nullptr;
  std::vector<uint32_t> previous_;  // the last frame's 0xRRGGBB, for the changed rectangle
  Stats stats_;
};

}  // namespace kl::app
