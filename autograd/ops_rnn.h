#pragma once
// The fused GRU cell: one pass over memory and one tape node instead of a dozen; it equals the
// composite of elementwise ops (the tests gradcheck both and compare them). Implemented beside its
// backward in autograd/ops_rnn.cpp.
#include <cstdint>

#include "autograd/tensor.h"

namespace tg {

/// PyTorch's GRU cell after its two GEMMs: gi = x W_ihᵀ + b_ih and gh = h W_hhᵀ + b_hh, both
/// (B, 3H) in gate order r, z, n; h (B, H). Returns h' = (1 - z) n + z h with
/// r = σ(gi_r + gh_r), z = σ(gi_z + gh_z), n = tanh(gi_n + r gh_n).
Tensor gru_cell_fused(const Tensor& gi, const Tensor& gh, const Tensor& h);

}  // namespace tg
