#include "nn/dropout.h"

#include <sstream>
#include <stdexcept>

#include "autograd/ops_index.h"
#include "autograd/random.h"

namespace tg::nn {

DropoutImpl::DropoutImpl(double p, std::shared_ptr<Generator> gen) : p_(p), gen_(std::move(gen)) {
  if (!(p >= 0.0 && p < 1.0)) throw std::invalid_argument("Dropout: p must be in [0, 1), got " + std::to_string(p));
  if (!gen_) gen_ = std::make_shared<Generator>(0);
}

Tensor DropoutImpl::forward(const Tensor& x) { return tg::dropout(x, p_, *gen_, is_training()); }

std::string DropoutImpl::extra_repr() const {
  std::ostringstream os;
  os << "p=" << p_;  // "p=0.5", as PyTorch prints it
  return os.str();
}

}  // namespace tg::nn
