#pragma once
// Everything of the autograd layer in one include.
#include "autograd/creation.h"
#include "autograd/dtype.h"
#include "autograd/error_text.h"
#include "autograd/function.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
