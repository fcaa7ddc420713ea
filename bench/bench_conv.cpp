// Issue 42's convolution block, one training step as PyTorch runs it (bench/conv_reference.py is the
// same step in PyTorch): Conv2d(3 -> 32, 3x3, padding 1) + BatchNorm2d(32) + ReLU + MaxPool2d(2) on a
// 32x3x32x32 batch, loss = mean of the output, backward, and an SGD update (lr 0.01) of the four
// trainable tensors; 1 and 2 threads. Also the conv alone (forward + backward of weight and bias),
// the part im2col + GEMM does.
//   build/bin/bench_conv --benchmark_min_time=2
#include <benchmark/benchmark.h>

#include <cstdint>

#include "autograd/ops_conv.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "nn/batchnorm.h"
#include "nn/conv.h"

using namespace tg;

namespace {

// 2 * N * OH * OW * O * C * k * k per product; forward and the weight gradient (the input needs none).
double conv_flops() { return 2.0 * 32 * 32 * 32 * 32 * 3 * 9 * 2; }

// args: threads
void BM_ConvBlockTrainingStep(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(0)));
  Generator gen(0);
  nn::Conv2d conv(nn::Conv2dOptions(3, 32, 3).padding(1), gen);
  nn::BatchNorm2d bn(32);
  nn::MaxPool2d pool(2);
  const Tensor x = Tensor::uniform({32, 3, 32, 32}, -1, 1, gen);
  const std::vector<Tensor> params{conv->weight, conv->bias, bn->weight, bn->bias};
  for (auto _ : state) {
    for (Tensor p : params) p.zero_grad();
    const Tensor loss = mean(pool(relu(bn(conv(x)))));
    loss.backward();
    NoGradGuard no_grad;
    for (Tensor p : params) p.copy_(p - p.grad() * 0.01);
  }
  state.SetItemsProcessed(state.iterations() * 32);  // images
  state.counters["conv GFLOP/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * conv_flops() * 1e-9, benchmark::Counter::kIsRate);
  set_num_threads(0);
}
BENCHMARK(BM_ConvBlockTrainingStep)->ArgNames({"threads"})->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// args: threads
void BM_Conv2dForwardBackward(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(0)));
  Generator gen(0);
  nn::Conv2d conv(nn::Conv2dOptions(3, 32, 3).padding(1), gen);
  const Tensor x = Tensor::uniform({32, 3, 32, 32}, -1, 1, gen);
  for (auto _ : state) {
    conv->zero_grad();
    sum(conv(x)).backward();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * conv_flops() * 1e-9, benchmark::Counter::kIsRate);
  set_num_threads(0);
}
BENCHMARK(BM_Conv2dForwardBackward)->ArgNames({"threads"})->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
