#pragma once
// Every differentiable op, in one include. Each family is declared in autograd/ops_<family>.h and
// implemented beside its backward in autograd/ops_<family>.cpp; code inside the library includes only
// the families it uses, so adding an op recompiles that family's users only.
#include "autograd/ops_attention.h"
#include "autograd/ops_compare.h"
#include "autograd/ops_conv.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_indexing.h"  // torch::indexing: index, index_put, masked_select, select
#include "autograd/ops_matmul.h"
#include "autograd/ops_norm.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_rnn.h"
#include "autograd/ops_sampling.h"  // not differentiable: multinomial, randint, randperm, bernoulli, normal
#include "autograd/ops_shape.h"
#include "autograd/ops_softmax.h"
