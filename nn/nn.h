#pragma once
// Everything of the nn layer in one include.
#include "nn/activation.h"
#include "nn/attention.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "nn/rnn.h"
#include "nn/serialize.h"
#include "nn/utils.h"
