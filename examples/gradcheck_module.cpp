// Gradient-check your own module with tg::nn::gradcheck: every parameter and every floating input
// in float64, one report line per tensor. Copy it, put your module in place of GatedResidual.
//
//   build/bin/gradcheck_module
//
// Exits 1 if any tensor fails.
#include <cstdio>
#include <memory>

#include "autograd/tapegrad.h"
#include "nn/file_io.h"
#include "nn/nn.h"

using namespace tg;

// y = x + sigmoid(gate(x)) * tanh(proj(x)): a small gated residual block.
class GatedResidualImpl : public nn::Module {
 public:
  GatedResidualImpl(std::int64_t dim, Generator& gen) {
    gate = register_module("gate", nn::Linear(dim, dim, gen));
    proj = register_module("proj", nn::Linear(dim, dim, gen));
    norm = register_module("norm", nn::LayerNorm(Shape{dim}));
  }
  Tensor forward(const Tensor& x) const { return norm(x + sigmoid(gate(x)) * tanh(proj(x))); }
  nn::Linear gate{nullptr}, proj{nullptr};
  nn::LayerNorm norm{nullptr};
};
TG_MODULE(GatedResidual);

int main() {
  Generator gen(0);
  GatedResidual block(6, gen);
  // 1. float64: central differences need it (float32 rounding swamps the differences).
  block->to(DType::f64);
  // 2. Deterministic inputs; keep them small: each checked entry costs two forward passes.
  const Tensor x = Tensor::uniform({3, 6}, -1, 1, gen, DType::f64);
  // 3. Check. For a forward with other arguments, pass a function instead:
  //    nn::gradcheck(block, [&](const std::vector<Tensor>& in) { return block(in[0]); }, {x});
  nn::ModuleGradcheckOptions options;
  options.max_entries = 0;  // every entry; set e.g. 32 to sample large parameters (seeded by options.seed)
  const nn::ModuleGradcheckReport report = nn::gradcheck(block, {x}, options);
  std::fputs(report.str().c_str(), stdout);
  // Status 0 only if what was printed reached stdout (not a full disk or a closed pipe).
  try {
    nn::io::flush_stdout_or_throw();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gradcheck_module: %s\n", e.what());
    return 1;
  }
  return report ? 0 : 1;
}
