// The studies in ladder order. Each rung's study file provides its entry; add one line here per study.
#include "kernels/studies/study.h"
#include "kernels/studies/attention_study.h"
#include "kernels/studies/flash_attention_backward_study.h"
#include "kernels/studies/flash_attention_study.h"
#include "kernels/studies/relu_dropout_study.h"
#include "kernels/studies/softmax_study.h"
#include "kernels/studies/transpose_study.h"
#include "kernels/studies/vector_add_study.h"

namespace kl::study {

const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = {
      vector_add_entry(),
      transpose_study::entry(),  // rung 1½
      relu_dropout_entry(),
      softmax_entry(),
      attention_study::entry(),
      flash_attention_study::entry(),
      flash_attention_backward_study::entry(),
  };
  return entries;
}

const Entry* find(const std::string& panel) {
  for (const Entry& e : registry())
    if (e.panel == panel) return &e;
  return nullptr;
}

}  // namespace kl::study
