// The recorded peers: the ladder's figures beside its peers' (PyTorch SDPA's flash and cuDNN backends,
// Triton, torch) from one GPU session, stamped with the date, the versions and the harness. The file is
// docs/perf/h200.json, written on the GPU machine by bench/record_peers.py and embedded at build time as
// perf/h200.json; the build checks it (kl_peers_table --check-file), so a malformed file fails the build,
// not the app. Both the README's peers table (markdown(), between kReadmeBegin and kReadmeEnd) and the
// Measure view's "Peers (recorded)" section are drawn from it, so they cannot differ.
//
// The file: {"schema": 1, "date", "device", "driver", "cuda", "torch", "cudnn", "triton", "harness",
//   "source", "quick", "sections": [{"id", "title", "unit", "value_digits", "ratio_digits", "note", "run",
//   "columns": [{"id", "name", "short", "ours"}], "rows": [{"name"?, "shape", "values": [...], "gbs"?: [...]}]}]}
// Each row holds one value per column (null: not measured, or refused by that peer). The first column
// is the ladder's headline figure; each column that is not "ours" is a peer, and the ratio is the first
// column's value over the peer's: at least 1 (as shown, rounded to ratio_digits) reads "ahead".
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "kernels/measure/measure.h"

namespace kl::peers {

struct Column {
  std::string id;     // "ladder", "det", "flash", "cudnn", "triton", "torch"
  std::string name;   // "PyTorch flash"
  std::string short_name;  // "flash": the ratio's header reads "/flash"
  bool ours = false;  // the ladder's own figure (no ratio is taken against it)
};

// What a shape text says: "B=32 H=32 Hkv=2 L=512 d=64 causal bf16" (0 where a field is absent).
struct ShapeKey {
  int B = 0, H = 0, Hkv = 0, L = 0, d = 0;
  bool causal = false;
};
ShapeKey shape_key(const std::string& shape);

struct Row {
  std::string name;   // "vector add fast"; empty in the attention sections
  std::string shape;  // "B=32 H=32 L=512 d=64 non-causal bf16", "n=2^26"
  std::vector<std::optional<double>> values;  // one per column, in the section's unit
  std::vector<std::optional<double>> gbs;     // memory-bound sections: the same figures in GB/s (else empty)
  ShapeKey key;
};

struct Section {
  std::string id;     // "flash-forward", "flash-backward", "memory"
  std::string title, unit, note, run;
  int value_digits = 1, ratio_digits = 2;
  std::vector<Column> columns;
  std::vector<Row> rows;
  std::vector<size_t> peer_columns() const;  // indices of the columns that are not ours
};

struct Recorded {
  int schema = 1;
  std::string date, device, driver, cuda, torch, cudnn, triton;  // driver etc. empty where not recorded
  std::string harness, source;
  bool quick = false;
  std::vector<Section> sections;
  const Section* find(const std::string& id) const;
};

// Parses the file's text. Every fault is an InputError naming `origin`, the field's path and what was
// expected: "docs/perf/h200.json: sections[0].rows[3].values[1]: expected a number or null, got \"abc\"".
Recorded parse(const std::string& text, const std::string& origin);
// The embedded file (perf/h200.json), parsed once. RuntimeError if it is missing or does not parse (the
// build and a test see to it that it does).
const Recorded& embedded();
extern const char* const kEmbeddedName;  // "perf/h200.json"
extern const char* const kSourcePath;    // "docs/perf/h200.json", relative to the repository root

// "NVIDIA H200, 2026-12-01, torch 2.11.0+cu130, cuDNN 9.19.0, Triton 3.6.0, CUDA 13.0" (what is recorded,
// in that order; the driver where recorded; ", quick sizes" for a quick run).
std::string caption(const Recorded& r);

// values[0] / values[col] where both are present and positive.
std::optional<double> ratio(const Row& row, size_t col);
// Ahead of the peer: the ratio as shown (rounded to `digits`) is at least 1.
bool ahead(double ratio, int digits);
std::string format_value(const Section& s, std::optional<double> v);  // "290.9", "1.024", "-"
std::string format_ratio(const Section& s, std::optional<double> r);  // "0.74", "-"
// The attention shapes, short for the view's narrow table: "d=64 L=512 causal", "d=128 L=1024 Hkv=2";
// other rows: "vector add fast n=2^26".
std::string short_shape(const Row& row);

// The README's block: kReadmeBegin, the caption, the harness, then each section's title, note and table
// (every row, each value, the ratio against each peer), then kReadmeEnd; ends with a newline.
extern const char* const kReadmeBegin;
extern const char* const kReadmeEnd;
std::string markdown(const Recorded& r);
// The README's block as it stands (from kReadmeBegin to the end of kReadmeEnd's line); empty when absent.
std::string readme_block(const std::string& readme);
// The README with its block replaced by `block`; InputError when the markers are missing.
std::string replace_readme_block(const std::string& readme, const std::string& block);

// The smallest and largest of `values` (nullopt where empty): for the README's sentences on a section.
struct Span {
  double lo = 0, hi = 0;
  bool any = false;
};
Span value_span(const Section& s, size_t col, bool (*keep)(const Row&) = nullptr);
Span ratio_span(const Section& s, size_t col, bool (*keep)(const Row&) = nullptr);

// What to notice in the record, for the Peers tab's notice line: per section, at how many rows the ladder is
// ahead of its strongest peer and the span of the ratios ("Recorded on NVIDIA H200, 2026-12-05: the ladder
// ahead of cuDNN at 18 of 42 forward shapes (0.77x to 1.15x); ...").
std::string notice(const Recorded& r);

// The live figures of this machine's Measure run where a recorded row has the same shape: for the
// flash-forward section, the TFLOP/s of the `fast` point with the same B, H, L, d and causal flag
// (multi-head rows only: the Measure view times no grouped-query shape); nullopt elsewhere, and all
// nullopt for CPU figures. One entry per row of `s`.
std::vector<std::optional<double>> live_ladder(const Section& s, const measure::Results& live);

}  // namespace kl::peers
