// "Inside the fast kernel" (issue 30): a timeline recorded by the real Hopper kernels. The instrumented
// build of rung 5's and rung 6's wgmma kernels stamps, for a few chosen CTAs, the moment each warp role
// (every consumer warpgroup, the producer warp) enters a phase: waiting for a bulk copy or for its turn,
// issuing and waiting for a tensor-core product, the softmax, the rescale, the epilogue
// (kernels/measure/timeline_trace.h). This file is the data model of one or more such recordings (no GL):
// the events per CTA and lane, the launch's shape, path, device and date, the plain and the instrumented
// kernel's times of the same launch (the cost of recording), what the timeline adds up to (summarize), and
// the JSON file (docs/perf/timeline-h200.json) with its reader, which refuses a bad file with one line
// naming the field. record() (CUDA builds) makes a recording on the GPU.
//
// Times are in ns from the recording's first stamp. Each CTA's events come from its SM's clock64, converted
// with the cycles per ns the lanes measured against %globaltimer and placed on the common timer by the CTA's
// first %globaltimer reading (decode): phases inside a CTA are as exact as the clock, CTAs on different SMs
// line up to the timer's resolution.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/measure/timeline_trace.h"
#include "kernels/runtime/params.h"

namespace kl::timeline {

// ---- [SECTION] phases and products --------------------------------------------------------------------
// How the view colours a phase and how the summaries count it.
enum class PhaseKind {
  Setup,    // the CTA's start, taking a work tile
  Wait,     // waiting: a copy, a turn, a product, a barrier
  Issue,    // issuing a product to the tensor cores (asynchronous)
  Compute,  // work on the CUDA cores: softmax, rescale, packing, dS, the epilogue, the dQ adds
  Load      // issuing copies (the producer's bulk tensor copies, the backward's cp.async)
};
struct PhaseInfo {
  Phase phase;
  const char* name;   // in the JSON file: "wait-k", "issue-s", "softmax"
  const char* label;  // for people: "wait for K (TMA)"
  PhaseKind kind;
};
const PhaseInfo& phase_info(Phase p);  // every phase but Done and Count
// The phase a JSON name stands for; false for an unknown name.
bool phase_from_name(const std::string& name, Phase* out);
// "setup, schedule, wait-q, ...": every name the file may hold.
std::string phase_names();
const char* kind_name(PhaseKind k);  // "setup", "wait", "issue", "compute", "load"

// A tensor-core product: in flight from the start of its issue phase to the end of the lane's first later
// phase among `retired_by` (the wgmma.wait_group that guarantees it completed). An upper bound on its time on
// the tensor cores: it may have completed earlier, or waited behind the other warpgroup's products.
struct Product {
  const char* name;  // "S = Q K^T"
  Phase issue;
  Phase retired_by[2];  // Phase::Count: unused
};
const std::vector<Product>& products();

// ---- [SECTION] the recording ----------------------------------------------------------------------------
struct Event {
  Phase phase = Phase::Setup;
  int step = kNoStep;  // forward: the K/V tile the phase works on; backward: the query tile; -1: none
  int tile = -1;       // the work tile: persistent_tile()'s index (forward), the CTA's linear index (backward)
  double start_ns = 0, end_ns = 0;
};
struct Lane {
  std::string role;  // "warpgroup 0", ..., "producer"
  std::vector<Event> events;
};
struct Cta {
  int index = 0;  // linear CTA index in the launch
  int sm = 0;     // the SM it ran on
  std::vector<Lane> lanes;
};

constexpr const char* kForward = "flash-attention";
constexpr const char* kBackward = "flash-attention-backward";

struct Recording {
  std::string kernel;     // kForward or kBackward
  std::string path;       // the kernel that ran: "wgmma-persistent-q2-late", ...; backward "wgmma" | "wgmma-tma"
  std::string requested;  // what was asked for: "auto" (the by-shape default) or a path's name
  std::string launch;     // the instrumented launch's name
  int B = 0, H = 0, Lq = 0, Lk = 0, d = 0;
  int Hkv = 0;            // heads of K and V, dividing H (grouped-query attention, the forward); 0 or H: H
  bool causal = false;
  std::string dtype = "bf16";
  std::string dq;         // backward: "atomic" or "deterministic"; forward: empty
  int grid_ctas = 0, block_m = 0, block_n = 0;
  std::string device, date, cuda;  // "NVIDIA H200", "2026-12-03", "13.0"
  double clock_ghz = 0;   // clock64 cycles per ns, as the lanes measured it
  double plain_ms = 0, traced_ms = 0;  // median of `iterations` timed launches each, same inputs
  int iterations = 0;
  double recorded_ms = 0;  // the recorded launch itself (CUDA events)
  double flops = 0;        // of one launch
  bool same_output = false;  // the instrumented kernel's output equalled the plain one's, bit for bit
  std::vector<Cta> ctas;

  double tflops() const { return plain_ms > 0 ? flops / (plain_ms * 1e-3) / 1e12 : 0; }
  double overhead() const { return plain_ms > 0 ? traced_ms / plain_ms - 1 : 0; }  // 0.03: 3% slower
};

struct File {
  std::vector<Recording> recordings;
};
constexpr int kSchema = 1;

// ---- [SECTION] the JSON file ----------------------------------------------------------------------------
// {"schema": 1, "recordings": [{"kernel", "path", "requested", "launch", "shape": {"B", "H", "Hkv"?, "Lq", "Lk",
//  "d", "causal", "dtype"} ("Hkv" only where it is not H), "dq"?, "tiles": {"block_m", "block_n", "ctas"},
//  "device", "date", "cuda", "clock_ghz", "time": {"plain_ms", "traced_ms", "iterations", "recorded_ms",
//  "flops"}, "same_output", "ctas": [{"index", "sm", "lanes": [{"role", "events": [[phase, step, tile,
//  start_ns, end_ns], ...]}]}]}]}
// One event a line, times rounded to 0.1 ns.
std::string to_json(const File& f);
// Every fault is an InputError naming `origin`, the field's path and what was expected:
// "FILE: recordings[0].ctas[1].lanes[0].events[7][0]: unknown phase \"wait-x\" (allowed: setup, ...)".
File parse(const std::string& text, const std::string& origin);
File load(const std::string& path);                 // InputError when unreadable or bad (parse)
void save(const File& f, const std::string& path);  // InputError when it cannot be written

// ---- [SECTION] reading the kernels' buffer back ------------------------------------------------------------
// The buffer of a recorded launch (timeline_trace.h) as 32-bit words, its layout, and which CTA each slot
// holds. RuntimeError where it does not hold what the kernels write (a lane without its header, an
// overflow, an unknown phase, no Done at the end): a bug in the instrumented build or in the capacity.
struct BufferLayout {
  std::vector<int> cta_of_slot;
  std::vector<std::string> roles;  // one per lane
  int capacity = 0;
};
// The CTAs, in ns from the first stamp; *clock_ghz: the cycles per ns measured (pooled over the lanes).
std::vector<Cta> decode(const std::vector<uint32_t>& words, const BufferLayout& layout, double* clock_ghz);

// ---- [SECTION] what the timeline adds up to -----------------------------------------------------------------
struct Interval {
  double start = 0, end = 0;
};
// The product intervals of one lane, in order (see Product).
std::vector<Interval> in_flight(const Lane& lane);
// Sorted, merged; the total length of a merged set.
std::vector<Interval> merged(std::vector<Interval> v);
double length(const std::vector<Interval>& merged_set);

struct LaneSummary {
  std::string role;
  double span_ns = 0;
  double share[5] = {0, 0, 0, 0, 0};  // of span_ns, by PhaseKind
  double in_flight_share = 0;          // products in flight, of span_ns (0 for the producer)
};
struct CtaSummary {
  int index = 0;
  double start_ns = 0, span_ns = 0;
  double tensor_share = 0;  // some consumer's product in flight, of the CTA's span
  double overlap = 0;       // of the consumers' Compute time, the part with a product in flight (any warpgroup)
  std::vector<LaneSummary> lanes;
};
struct Summary {
  std::vector<CtaSummary> ctas;
  double tensor_share = 0, overlap = 0;  // means over the CTAs
  double span_ns = 0;                    // first stamp to last, over every recorded CTA
};
Summary summarize(const Recording& r);
// Consumer lanes: every role but "producer".
bool consumer_role(const std::string& role);
// " Hkv=2" where K and V have fewer heads than Q (grouped-query attention), else "": after "H=16" in a shape.
std::string kv_heads_text(const Recording& r);
// The recording in a few lines, every number from the recording or summarize(): the launch, the two times
// and the cost of recording, the output check, then one line per CTA.
std::vector<std::string> summary_lines(const Recording& r);

// ---- [SECTION] recording on the GPU -------------------------------------------------------------------------
// What `kernel-ladder timeline` asks for. ctas: the CTAs to record (linear indices, at most kMaxTracedCtas);
// empty: the first, the middle and the last; all_ctas: every CTA of the launch.
struct RecordRequest {
  std::string kernel = kForward;
  int B = 1, H = 16, L = 4096, d = 128;
  int Hkv = 0;  // forward: heads of K and V (grouped-query attention), dividing H; 0: H
  bool causal = false;
  std::string path = "auto";   // forward: "auto" or a bulk-copy path's name; backward: "wgmma" | "wgmma-tma"
  bool deterministic = false;  // backward: the dQ mode
  std::vector<int> ctas;
  bool all_ctas = false;
  int iterations = 20;
};
// InputError naming the parameter, its value and the allowed range (everything checkable without a device;
// record() checks the CTA indices against the launch).
void validate(const RecordRequest& r);
// "auto, wgmma, wgmma-late, wgmma-persistent, ..." for the forward, "wgmma, wgmma-tma" for the backward.
std::string path_names(const std::string& kernel);
// Parses "--ctas": "all", or indices separated by commas ("0,66,131"); InputError otherwise.
void parse_ctas(const std::string& text, RecordRequest* r);

// The shape settings of a recording, as `kernel-ladder timeline --set` and the view's "Record now" take them:
// L, d, causal, B, H, Hkv (the forward's K/V heads), deterministic (the backward's dQ mode).
std::vector<ParamSpec> record_params();
// The request for `kernel` at the settings `v` (record_params()) and `path` ("auto": the by-shape default;
// the backward's "auto" is its default kernel, wgmma), validated (InputError naming the parameter).
RecordRequest request_of(const std::string& kernel, const ParamValues& v, const std::string& path, int iterations);
// Whether this process can record (a CUDA build, an H100/H200 with the sm_90a code loaded); else false with
// *why saying what is missing, in one line.
bool can_record(std::string* why);

// The plain and the instrumented kernel's outputs on the same inputs (bf16 bits): the forward's O; the
// backward's dK then dV (dQ goes through fp32 atomics whose order varies from run to run).
struct OutputPair {
  std::vector<uint16_t> plain, traced;
};

// Records one launch: inputs uniform in [-1, 1] (bf16), the plain and the instrumented kernel timed
// (`iterations` each, after warm-up), then one instrumented launch recorded and its output compared with the
// plain kernel's. InputError for a bad request, no device, a path or shape the instrumented build lacks, or a
// CTA outside the launch; RuntimeError for a CUDA failure or a malformed buffer.
Recording record(const RecordRequest& r);
OutputPair outputs_plain_and_traced(const RecordRequest& r);

}  // namespace kl::timeline
