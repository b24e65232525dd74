// The window's event log (`--ui-log FILE`): one line per thing a user did or saw, flushed at once, so a
// test driving the window with real input events can check the app's state from outside:
//   panel softmax
//   param softmax n_cols 2000 -> 1500
//   refused softmax n_cols: n_cols=99999999 is out of range: allowed [1, 65536]
//   hover heatmap softmax_bug col 12 row 3
//   screenshot /abs/path.png
//   size 1280x720
//   scale 1.5
//   status screenshot saved to /abs/path.png
//   place control softmax n_cols 262 34 512 60     (where a thing a test clicks is, on change)
//   audit clean | audit PANEL: text '...' cut by ...  (the layout audit of the frame, on change)
// Off (every call a no-op) until open() succeeds.
#pragma once
#include <string>

namespace kl::viz::ui_log {

bool open(const std::string& path);  // appends; false when the file cannot be opened
void close();
bool is_open();
void event(const std::string& line);
// "place KIND NAME x0 y0 x1 y1" in window pixels, logged when it differs from the last one logged for
// KIND NAME (so a test can find the widgets it drives).
void place(const std::string& kind, const std::string& name, float x0, float y0, float x1, float y1);

}  // namespace kl::viz::ui_log
