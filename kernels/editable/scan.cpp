#include "kernels/editable/scan.h"

#include <regex>

namespace kl::editable::scan {
namespace {

// Comments, string and character literals blanked (newlines kept), so positions still match the text.
std::string code_only(const std::string& s) {
  std::string o = s;
  enum { Code, Line, Block, Str, Chr } st = Code;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i], n = i + 1 < s.size() ? s[i + 1] : '\0';
    switch (st) {
      case Code:
        if (c == '/' && n == '/') st = Line, o[i] = ' ';
        else if (c == '/' && n == '*') st = Block, o[i] = ' ', o[++i] = ' ';
        else if (c == '"') st = Str;
        else if (c == '\'') st = Chr;
        break;
      case Line:
        if (c == '\n') st = Code;
        else o[i] = ' ';
        break;
      case Block:
        if (c == '*' && n == '/') st = Code, o[i] = ' ', o[++i] = ' ';
        else if (c != '\n') o[i] = ' ';
        break;
      case Str:
      case Chr:
        if (c == '\\') o[i] = ' ', o[++i] = ' ';
        else if (c == (st == Str ? '"' : '\'')) st = Code;
        else if (c != '\n') o[i] = ' ';
        break;
    }
  }
  return o;
}

void line_col(const std::string& s, size_t pos, int* line, int* col) {
  int l = 1;
  size_t start = 0;
  for (size_t i = 0; i < pos && i < s.size(); ++i)
    if (s[i] == '\n') ++l, start = i + 1;
  *line = l;
  *col = int(pos - start) + 1;
}

bool ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whole-word occurrences of `word` in `code`.
std::vector<size_t> find_word(const std::string& code, const std::string& word) {
  std::vector<size_t> at;
  for (size_t p = code.find(word); p != std::string::npos; p = code.find(word, p + 1)) {
    const bool left = p == 0 || !ident(code[p - 1]);
    const bool right = p + word.size() >= code.size() || !ident(code[p + word.size()]) || !ident(word.back());
    if (left && right) at.push_back(p);
  }
  return at;
}

void kernels(const std::string& code, Result& r) {
  for (size_t p : find_word(code, "__global__")) {
    size_t i = p + 10;
    std::string last;
    while (i < code.size() && code[i] != '(' && code[i] != ';' && code[i] != '{') {
      if (ident(code[i])) {
        size_t j = i;
        while (j < code.size() && ident(code[j])) ++j;
        last = code.substr(i, j - i);
        i = j;
        if (last == "__launch_bounds__") {  // skip its parenthesised arguments
          while (i < code.size() && code[i] != '(') ++i;
          int depth = 0;
          for (; i < code.size(); ++i) {
            if (code[i] == '(') ++depth;
            if (code[i] == ')' && --depth == 0) { ++i; break; }
          }
          last.clear();
        }
        continue;
      }
      ++i;
    }
    if (i >= code.size() || code[i] != '(' || last.empty()) continue;
    Kernel k;
    k.name = last;
    int col = 0;
    line_col(code, p, &k.line, &col);
    bool dup = false;
    for (const Kernel& o : r.kernels) dup = dup || o.name == k.name;
    if (!dup) r.kernels.push_back(k);
  }
}

void extern_shared(const std::string& code, Result& r) {
  static const std::regex re(
      R"(extern\s+(__shared__\s+)?(alignas\s*\(\s*\d+\s*\)\s+|__align__\s*\(\s*\d+\s*\)\s+)?(__shared__\s+)?([A-Za-z_][\w:<>\s]*?)\s+([A-Za-z_]\w*)\s*\[\s*\])");
  for (std::sregex_iterator it(code.begin(), code.end(), re), end; it != end; ++it) {
    const std::smatch& m = *it;
    if (!m[1].matched && !m[3].matched) continue;
    ExternShared e;
    std::string align = m[2].str();
    std::smatch a;
    static const std::regex num(R"(\d+)");
    if (std::regex_search(align, a, num)) e.align = "alignas(" + a.str() + ") ";
    e.type = m[4].str();
    e.name = m[5].str();
    bool dup = false;
    for (const ExternShared& o : r.extern_shared) dup = dup || o.name == e.name;
    if (!dup) r.extern_shared.push_back(e);
  }
}

void unsupported(const std::string& code, Result& r) {
  static const std::pair<const char*, const char*> kWords[] = {
      {"asm", "inline asm is not supported by the CPU prelude (kl_cpu.h)"},
      {"__asm__", "inline asm is not supported by the CPU prelude (kl_cpu.h)"},
      {"wmma", "wmma (tensor-core fragments) is not supported by the CPU prelude (kl_cpu.h)"},
      {"cooperative_groups", "cooperative groups are not supported by the CPU prelude (kl_cpu.h)"},
      {"__nanosleep", "__nanosleep is not supported by the CPU prelude (kl_cpu.h)"},
      {"__syncthreads_count", "__syncthreads_count is not supported by the CPU prelude (kl_cpu.h)"},
      {"__syncthreads_and", "__syncthreads_and is not supported by the CPU prelude (kl_cpu.h)"},
      {"__syncthreads_or", "__syncthreads_or is not supported by the CPU prelude (kl_cpu.h)"},
      {"cuda::", "the cuda:: library (libcu++) is not supported by the CPU prelude (kl_cpu.h)"},
      {"__constant__", "__constant__ memory is not supported by the CPU prelude (kl_cpu.h); pass a tensor"},
  };
  for (const auto& [word, message] : kWords)
    for (size_t p : find_word(code, word)) {
      Unsupported u;
      line_col(code, p, &u.line, &u.col);
      u.message = message;
      r.unsupported.push_back(u);
    }
}

}  // namespace

Result scan(const std::string& text) {
  const std::string code = code_only(text);
  Result r;
  kernels(code, r);
  extern_shared(code, r);
  for (const char* w : {"__syncthreads", "__syncwarp", "__shfl_sync", "__shfl_xor_sync", "__shfl_down_sync",
                        "__shfl_up_sync", "__ballot_sync", "__any_sync", "__all_sync"})
    r.fibers = r.fibers || !find_word(code, w).empty();
  for (const char* w : {"atomicAdd", "atomicSub", "atomicExch", "atomicMin", "atomicMax", "atomicInc", "atomicDec",
                        "atomicCAS", "atomicAnd", "atomicOr", "atomicXor", "atomic_add"})
    r.atomics = r.atomics || !find_word(code, w).empty();
  unsupported(code, r);
  return r;
}

std::string cpu_wrapper(const Result& r, const std::string& include, const std::string& ns,
                        const std::string& table_name) {
  std::string o = "// Generated (kernels/editable/scan.cpp): the CPU build of an editable source.\n";
  o += "#include \"kl.cuh\"\n";
  if (!ns.empty()) o += "#include \"kernels/editable/shipped_table.h\"\nnamespace " + ns + " {\n";
  o += "#include \"" + include + "\"\n";
  for (const ExternShared& e : r.extern_shared)
    o += e.align + "thread_local " + e.type + " " + e.name + "[::kl_cpu::kDynamicShared / sizeof(" + e.type + ")];\n";
  const std::string fibers = r.fibers ? "true" : "false";
  if (ns.empty()) {
    for (const Kernel& k : r.kernels) {
      o += "extern \"C\" int kl_entry_" + k.name + "(::kl_cpu::Launch* l, void** a) { return ::kl_cpu::entry<&" +
           k.name + ", " + fibers + ">(l, a); }\n";
      o += "extern \"C\" const char* kl_params_" + k.name + "() { return ::kl::detail::SignatureOf<decltype(" +
           k.name + ")>::value.text; }\n";
    }
    return o;
  }
  o += "}  // namespace " + ns + "\n\nnamespace kl::editable::shipped {\nextern const CpuKernel " + table_name +
       "[];\nconst CpuKernel " + table_name + "[] = {\n";
  for (const Kernel& k : r.kernels)
    o += "    {\"" + k.name + "\", &::kl_cpu::entry<&::" + ns + "::" + k.name + ", " + fibers +
         (r.atomics ? ", false" : ", true") + ">, ::kl::detail::SignatureOf<decltype(::" + ns + "::" + k.name + ")>::value.text},\n";
  o += "    {nullptr, nullptr, nullptr}};\n}  // namespace kl::editable::shipped\n";
  return o;
}

std::string cuda_wrapper(const Result& r, const std::string& include, const std::string& ns,
                         const std::string& table_name) {
  std::string o = "// Generated (kernels/editable/scan.cpp): the CUDA build of an editable source.\n";
  o += "#include \"kl.cuh\"\n#include \"kernels/editable/shipped_table.h\"\n#include \"kernels/runtime/cuda_launch.cuh\"\n";
  o += "namespace " + ns + " {\n#include \"" + include + "\"\n}  // namespace " + ns + "\n\n";
  o += "namespace kl::editable::shipped {\nnamespace {\nconst CudaKernel kKernels[] = {\n";
  for (const Kernel& k : r.kernels)
    o += "    {\"" + k.name + "\", reinterpret_cast<const void*>(&::" + ns + "::" + k.name +
         "), ::kl::detail::SignatureOf<decltype(::" + ns + "::" + k.name + ")>::value.text},\n";
  o += "    {nullptr, nullptr, nullptr}};\n";
  o += "void reset_fault() {\n  const ::kl::detail::FaultRecord zero{};\n"
       "  KL_CUDA_CHECK(cudaMemcpyToSymbol(KL_FAULT_RECORD, &zero, sizeof zero));\n}\n";
  o += "void read_fault(void* out) {\n"
       "  KL_CUDA_CHECK(cudaMemcpyFromSymbol(out, KL_FAULT_RECORD, sizeof(::kl::detail::FaultRecord)));\n}\n";
  o += "}  // namespace\nextern const CudaModule " + table_name + ";\nconst CudaModule " + table_name +
       " = {kKernels, reset_fault, read_fault};\n}  // namespace kl::editable::shipped\n";
  return o;
}

std::string nvrtc_suffix(const Result& r) {
  std::string o = "\n";
  for (const Kernel& k : r.kernels)
    o += "extern \"C\" __device__ ::kl::detail::Signature kl_params_" + k.name +
         " = ::kl::detail::SignatureOf<decltype(" + k.name + ")>::value;\n";
  return o;
}

}  // namespace kl::editable::scan
