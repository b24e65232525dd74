// Test helper: decodes an animated GIF with giflib into whole RGBA8 frames (each image composited over
// the previous frame, as a viewer shows it with disposal "do not dispose"), with each frame's delay.
#pragma once
#include <gif_lib.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kl::test {

struct GifFrames {
  int width = 0, height = 0;
  std::vector<std::vector<uint8_t>> rgba;  // one per frame, width*height*4
  std::vector<int> delay_cs;
  std::vector<int> disposal;
  bool loops = false;  // a NETSCAPE2.0 extension is present
  std::string error;   // empty when decoded
};

inline GifFrames read_gif(const std::string& path) {
  GifFrames out;
  int err = 0;
  GifFileType* g = DGifOpenFileName(path.c_str(), &err);
  if (!g) return out.error = std::string("open: ") + GifErrorString(err), out;
  if (DGifSlurp(g) == GIF_ERROR) {
    out.error = std::string("slurp: ") + GifErrorString(g->Error);
    DGifCloseFile(g, &err);
    return out;
  }
  out.width = g->SWidth;
  out.height = g->SHeight;
  std::vector<uint8_t> canvas(size_t(out.width) * size_t(out.height) * 4, 0);
  for (int f = 0; f < g->ImageCount; ++f) {
    const SavedImage& im = g->SavedImages[f];
    for (int e = 0; e < im.ExtensionBlockCount; ++e) {
      const ExtensionBlock& b = im.ExtensionBlocks[e];
      if (b.Function == APPLICATION_EXT_FUNC_CODE && b.ByteCount == 11 &&
          std::string(reinterpret_cast<const char*>(b.Bytes), 11) == "NETSCAPE2.0")
        out.loops = true;
    }
    GraphicsControlBlock gcb{};
    gcb.DelayTime = -1;
    gcb.DisposalMode = -1;
    DGifSavedExtensionToGCB(g, f, &gcb);
    out.delay_cs.push_back(gcb.DelayTime);
    out.disposal.push_back(gcb.DisposalMode);
    const ColorMapObject* map = im.ImageDesc.ColorMap ? im.ImageDesc.ColorMap : g->SColorMap;
    const GifImageDesc& d = im.ImageDesc;
    for (int y = 0; map && y < d.Height; ++y)
      for (int x = 0; x < d.Width; ++x) {
        const int cx = d.Left + x, cy = d.Top + y;
        if (cx < 0 || cy < 0 || cx >= out.width || cy >= out.height) continue;
        const int idx = im.RasterBits[size_t(y) * size_t(d.Width) + size_t(x)];
        if (idx >= map->ColorCount) continue;
        const GifColorType c = map->Colors[idx];
        uint8_t* p = &canvas[(size_t(cy) * size_t(out.width) + size_t(cx)) * 4];
        p[0] = c.Red, p[1] = c.Green, p[2] = c.Blue, p[3] = 255;
      }
    out.rgba.push_back(canvas);
  }
  DGifCloseFile(g, &err);
  return out;
}

}  // namespace kl::test
