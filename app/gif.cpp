#include "app/gif.h"

#include <fcntl.h>
#include <gif_lib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "kernels/runtime/errors.h"

namespace kl::app {
namespace {

constexpr size_t kKeptExactly = 192;

int squared_distance(uint32_t a, uint32_t b) {
  const int dr = int(a >> 16 & 255) - int(b >> 16 & 255);
  const int dg = int(a >> 8 & 255) - int(b >> 8 & 255);
  const int db = int(a & 255) - int(b & 255);
  return dr * dr + dg * dg + db * db;
}

uint8_t nearest(const std::vector<uint32_t>& palette, uint32_t c) {
  int best = 0, best_d = squared_distance(palette[0], c);
  for (int i = 1; i < int(palette.size()) && best_d > 0; ++i) {
    const int d = squared_distance(palette[size_t(i)], c);
    if (d < best_d) best = i, best_d = d;
  }
  return uint8_t(best);
}

using Entry = std::pair<uint32_t, uint32_t>;  // (colour, pixels)

int channel(uint32_t c, int k) { return int(c >> (16 - 8 * k) & 255); }

// Median cut of `e` (colours past the exactly kept ones) into at most `boxes` boxes; each box is
// represented by its most frequent colour, so the representative is itself exact.
std::vector<uint32_t> median_cut(std::vector<Entry> e, size_t boxes) {
  struct Box {
    size_t begin, end;
    uint64_t pixels;
    int range, axis;
  };
  auto make_box = [&](size_t b, size_t en) {
    Box box{b, en, 0, -1, 0};
    for (int k = 0; k < 3; ++k) {
      int lo = 255, hi = 0;
      for (size_t i = b; i < en; ++i) lo = std::min(lo, channel(e[i].first, k)), hi = std::max(hi, channel(e[i].first, k));
      if (hi - lo > box.range) box.range = hi - lo, box.axis = k;
    }
    for (size_t i = b; i < en; ++i) box.pixels += e[i].second;
    return box;
  };
  std::vector<Box> list{make_box(0, e.size())};
  while (list.size() < boxes) {
    // The box to split: the most pixels times the widest channel range (ties: the first).
    size_t pick = list.size();
    uint64_t best = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      const uint64_t score = list[i].end - list[i].begin > 1 ? list[i].pixels * uint64_t(list[i].range) : 0;
      if (score > best) best = score, pick = i;
    }
    if (pick == list.size()) break;
    const Box b = list[pick];
    std::sort(e.begin() + long(b.begin), e.begin() + long(b.end), [&](const Entry& x, const Entry& y) {
      const int cx = channel(x.first, b.axis), cy = channel(y.first, b.axis);
      return cx != cy ? cx < cy : x.first < y.first;
    });
    size_t m = b.begin;
    for (uint64_t acc = 0; m + 1 < b.end && (acc += e[m].second) * 2 < b.pixels;) ++m;
    m = std::max(m, b.begin + 1);
    list[pick] = make_box(b.begin, m);
    list.push_back(make_box(m, b.end));
  }
  std::vector<uint32_t> reps;
  for (const Box& b : list) {
    size_t r = b.begin;
    for (size_t i = b.begin + 1; i < b.end; ++i)
      if (e[i].second > e[r].second || (e[i].second == e[r].second && e[i].first < e[r].first)) r = i;
    reps.push_back(e[r].first);
  }
  return reps;
}

// The palette: every colour when there are at most 256. Else the kKeptExactly colours that cover the
// most pixels, and the median cut of the rest into the remaining entries.
std::vector<uint32_t> choose_palette(const std::unordered_map<uint32_t, uint32_t>& counts) {
  std::vector<Entry> e(counts.begin(), counts.end());
  std::sort(e.begin(), e.end(), [](const Entry& a, const Entry& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::vector<uint32_t> palette;
  const size_t kept = e.size() <= 256 ? e.size() : kKeptExactly;
  for (size_t i = 0; i < kept; ++i) palette.push_back(e[i].first);
  if (kept < e.size()) {
    const std::vector<uint32_t> reps = median_cut({e.begin() + long(kept), e.end()}, 256 - kept);
    palette.insert(palette.end(), reps.begin(), reps.end());
  }
  return palette;
}

}  // namespace

Quantised quantise(const std::vector<uint32_t>& rgb) {
  Quantised q;
  if (rgb.empty()) return q;
  std::unordered_map<uint32_t, uint32_t> counts;
  counts.reserve(4096);
  for (uint32_t c : rgb) ++counts[c];
  q.palette = choose_palette(counts);
  std::unordered_map<uint32_t, uint8_t> slot;
  slot.reserve(counts.size() * 2);
  for (size_t i = 0; i < q.palette.size(); ++i) slot[q.palette[i]] = uint8_t(i);
  q.index.resize(rgb.size());
  for (size_t i = 0; i < rgb.size(); ++i) {
    auto it = slot.find(rgb[i]);
    if (it == slot.end()) it = slot.emplace(rgb[i], nearest(q.palette, rgb[i])).first;
    q.index[i] = it->second;
    q.approximated += q.palette[it->second] != rgb[i];
  }
  return q;
}

GifWriter::GifWriter(const std::string& path, int width, int height, int delay_cs)
    : path_(path), width_(width), height_(height), delay_cs_(delay_cs) {
  // Opened here rather than by giflib, which creates files readable by their owner only.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
  if (fd < 0) throw InputError(path + ": cannot write (" + std::string(std::strerror(errno)) + ")");
  int err = 0;
  gif_ = EGifOpenFileHandle(fd, &err);
  if (!gif_) {
    ::close(fd);
    throw RuntimeError(path + ": cannot write the GIF (" + GifErrorString(err) + ")");
  }
  EGifSetGifVersion(gif_, true);
  if (EGifPutScreenDesc(gif_, width, height, 8, 0, nullptr) == GIF_ERROR) fail("screen descriptor", gif_->Error);
  // Loop forever: the NETSCAPE2.0 application extension, repeat count 0.
  const GifByteType app_id[] = {'N', 'E', 'T', 'S', 'C', 'A', 'P', 'E', '2', '.', '0'};
  const GifByteType loop[] = {1, 0, 0};
  if (EGifPutExtensionLeader(gif_, APPLICATION_EXT_FUNC_CODE) == GIF_ERROR ||
      EGifPutExtensionBlock(gif_, sizeof app_id, app_id) == GIF_ERROR ||
      EGifPutExtensionBlock(gif_, sizeof loop, loop) == GIF_ERROR || EGifPutExtensionTrailer(gif_) == GIF_ERROR)
    fail("loop extension", gif_->Error);
}

GifWriter::~GifWriter() {
  try {
    close();
  } catch (const std::exception&) {
  }
}

void GifWriter::fail(const char* what, int code) {
  const std::string msg = path_ + ": writing the GIF failed at the " + what + " (" + GifErrorString(code) + ")";
  int err = 0;
  EGifCloseFile(gif_, &err);
  gif_ = nullptr;
  throw RuntimeError(msg);
}

void GifWriter::add_frame(const std::vector<uint8_t>& rgba) {
  if (!gif_) throw RuntimeError(path_ + ": the GIF is already closed");
  if (rgba.size() != size_t(width_) * size_t(height_) * 4)
    throw RuntimeError("internal: a GIF frame of " + std::to_string(rgba.size()) + " bytes, expected " +
                       std::to_string(size_t(width_) * size_t(height_) * 4));
  std::vector<uint32_t> cur(size_t(width_) * size_t(height_));
  for (size_t i = 0; i < cur.size(); ++i)
    cur[i] = uint32_t(rgba[4 * i]) << 16 | uint32_t(rgba[4 * i + 1]) << 8 | rgba[4 * i + 2];
  // The rectangle that changed since the last frame (all of the first frame).
  int x0 = 0, y0 = 0, x1 = width_ - 1, y1 = height_ - 1;
  if (!previous_.empty()) {
    x0 = width_, y0 = height_, x1 = -1, y1 = -1;
    for (int y = 0; y < height_; ++y)
      for (int x = 0; x < width_; ++x) {
        const size_t i = size_t(y) * size_t(width_) + size_t(x);
        if (cur[i] == previous_[i]) continue;
        x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
      }
    if (x1 < 0) x0 = x1 = y0 = y1 = 0;  // nothing changed: one unchanged pixel keeps the frame's time
  }
  const int w = x1 - x0 + 1, h = y1 - y0 + 1;
  std::vector<uint32_t> rect(size_t(w) * size_t(h));
  for (int y = 0; y < h; ++y)
    std::copy_n(&cur[size_t(y0 + y) * size_t(width_) + size_t(x0)], w, &rect[size_t(y) * size_t(w)]);
  put_image(x0, y0, w, h, rect);
  previous_ = std::move(cur);
}

void GifWriter::put_image(int left, int top, int w, int h, const std::vector<uint32_t>& rgb) {
  const Quantised q = quantise(rgb);
  int bits = 1;
  while ((1 << bits) < int(q.palette.size())) ++bits;
  std::vector<GifColorType> colours(size_t(1) << bits, GifColorType{0, 0, 0});
  for (size_t i = 0; i < q.palette.size(); ++i)
    colours[i] = {GifByteType(q.palette[i] >> 16), GifByteType(q.palette[i] >> 8 & 255),
                  GifByteType(q.palette[i] & 255)};
  ColorMapObject* map = GifMakeMapObject(1 << bits, colours.data());
  if (!map) throw RuntimeError(path_ + ": out of memory for a GIF colour map");
  GraphicsControlBlock gcb{};
  gcb.DisposalMode = DISPOSE_DO_NOT;
  gcb.UserInputFlag = false;
  gcb.DelayTime = delay_cs_;
  gcb.TransparentColor = NO_TRANSPARENT_COLOR;
  GifByteType ext[4];
  const size_t n = EGifGCBToExtension(&gcb, ext);
  bool ok = EGifPutExtension(gif_, GRAPHICS_EXT_FUNC_CODE, int(n), ext) != GIF_ERROR &&
            EGifPutImageDesc(gif_, left, top, w, h, false, map) != GIF_ERROR;
  GifFreeMapObject(map);
  std::vector<GifPixelType> line(q.index.begin(), q.index.end());
  for (int y = 0; ok && y < h; ++y) ok = EGifPutLine(gif_, &line[size_t(y) * size_t(w)], w) != GIF_ERROR;
  if (!ok) fail("image data", gif_->Error);
  stats_.frames++;
  stats_.exact_frames += q.exact();
  stats_.pixels += rgb.size();
  stats_.approximated += q.approximated;
}

void GifWriter::close() {
  if (!gif_) return;
  int err = 0;
  const int rc = EGifCloseFile(gif_, &err);
  gif_ = nullptr;
  if (rc == GIF_ERROR) throw RuntimeError(path_ + ": finishing the GIF failed (" + GifErrorString(err) + ")");
}

}  // namespace kl::app
