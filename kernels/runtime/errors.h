// The two kinds of failure the whole program distinguishes.
//   InputError: the user asked for something out of range (a parameter, a file, a shape). The command
//               line prints its one line and exits 2; the UI shows it beside the control.
//   RuntimeError: something below us failed (a CUDA call, a launch, GL, memory). Exit 1 / shown in UI.
#pragma once
#include <stdexcept>
#include <string>

namespace kl {

struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RuntimeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "name=value is out of range: allowed [lo, hi]" in one consistent wording.
std::string out_of_range_message(const std::string& name, const std::string& value,
                                 const std::string& allowed);

}  // namespace kl
