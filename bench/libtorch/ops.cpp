// LibTorch op microbenchmarks (issue 20), named as bench/bench_ops.cpp's and bench/bench_generic_ops.cpp's
// Google Benchmark cases (name/args.../threads) so the two can be read side by side. One JSON line
// per case: mean wall-clock nanoseconds per iteration over at least --min-time seconds.
//
//   OMP_WAIT_POLICY=passive build/bin/libtorch_ops [--min-time 0.5] [--filter SUBSTRING]
//
// BM_*FwdBwd cases time forward + backward (gradients dropped each iteration). LibTorch 1.13 has no
// public scaled_dot_product_attention: BM_SDPA composes it (softmax(q kᵀ / sqrt(E)) v) as a
// 1.13 user would.
#include <array>
#include <cmath>
#include <functional>
#include <iostream>

#include "common.h"

namespace {

double g_min_time = 0.5;
std::string g_filter;

void run(const std::string& name, int threads, const std::function<void()>& body, double flops = 0) {
  if (!g_filter.empty() && name.find(g_filter) == std::string::npos) return;
  ltbench::set_threads(threads);
  for (int i = 0; i < 3; ++i) body();  // warm-up
  int64_t n = 0;
  const auto t0 = ltbench::Clock::now();
  const double c0 = ltbench::cpu_seconds();
  do {
    body();
    ++n;
  } while (ltbench::since(t0) < g_min_time);
  const double s = ltbench::since(t0), cpu = ltbench::cpu_seconds() - c0;
  std::cout << "{" << ltbench::json_head() << ",\"bench\":\"" << name << "\",\"iterations\":" << n
            << ",\"ns_per_iter\":" << ltbench::num(1e9 * s / static_cast<double>(n))
            << ",\"cpu_ns_per_iter\":" << ltbench::num(1e9 * cpu / static_cast<double>(n));
  if (flops > 0) std::cout << ",\"GFLOPS\":" << ltbench::num(flops * static_cast<double>(n) / s * 1e-9);
  std::cout << "}" << std::endl;
}

torch::Tensor rnd(torch::IntArrayRef s) { return torch::rand(s) * 2 - 1; }

std::string name(const std::string& base, std::initializer_list<int64_t> args) {
  std::string s = base;
  for (auto a : args) s += "/" + std::to_string(a);
  return s;
}

void backward_and_drop(const torch::Tensor& out, std::initializer_list<torch::Tensor> leaves) {
  out.sum().backward();
  for (auto l : leaves) l.mutable_grad() = torch::Tensor();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const ltbench::Args args(argc, argv, {"--min-time", "--filter"}, {});
    g_min_time = std::stod(args.str("--min-time", "0.5"));
    g_filter = args.str("--filter", "");
    torch::manual_seed(1);
    for (int th : {1, 2}) {
      // ---- bench_ops.cpp's cases
      for (int64_t n : {2048, 1 << 16, 1 << 22}) {
        auto x = rnd({n});
        run(name("BM_Tanh", {n, th}), th, [&] { torch::tanh(x); });
      }
      for (int64_t r : {2, 64, 2048}) {
        auto x = rnd({r, 1024}), b = rnd({1024});
        run(name("BM_AddBroadcastBias", {r, th}), th, [&] { x + b; });
      }
      for (int64_t n : {2048, 1 << 22}) {
        auto a = rnd({n}), b = rnd({n});
        run(name("BM_Mul", {n, th}), th, [&] { a * b; });
      }
      for (int64_t r : {64, 4096})
        for (int64_t c : {32, 1024})
          for (int64_t axis : {0, 1}) {
            auto x = rnd({r, c});
            run(name("BM_Sum", {r, c, axis, th}), th, [&] { x.sum(axis); });
          }
      for (int64_t r : {64, 4096}) {
        auto x = rnd({r, 1024});
        run(name("BM_Max", {r, 1024, th}), th, [&] { std::get<0>(x.max(1)); });
      }
      for (auto [M, K, N] : std::vector<std::array<int64_t, 3>>{{64, 32, 96}, {64, 288, 768}, {80, 1620, 3000}, {512, 512, 512}}) {
        auto a = rnd({M, K}), b = rnd({K, N});
        run(name("BM_Matmul", {M, K, N, th}), th, [&] { torch::matmul(a, b); }, 2.0 * M * K * N);
      }
      // ---- workload G's shapes (bench_generic_ops.cpp): B 32, T 64, d_model 256, 4 heads of 64
      {
        auto x = rnd({32, 64, 256}), w = torch::ones({256}), b = torch::zeros({256});
        run(name("BM_LayerNorm", {2048, 256, th}), th, [&] { torch::layer_norm(x, {256}, w, b); });
        auto xg = x.clone().requires_grad_(), wg = w.clone().requires_grad_(), bg = b.clone().requires_grad_();
        run(name("BM_LayerNormFwdBwd", {2048, 256, th}), th,
            [&] { backward_and_drop(torch::layer_norm(xg, {256}, wg, bg), {xg, wg, bg}); });
      }
      {
        auto s = rnd({32, 4, 64, 64});
        run(name("BM_Softmax", {512 * 64, 64, th}), th, [&] { torch::softmax(s, -1); });
        auto sg = s.clone().requires_grad_();
        run(name("BM_SoftmaxFwdBwd", {512 * 64, 64, th}), th, [&] { backward_and_drop(torch::softmax(sg, -1), {sg}); });
      }
      {
        auto a = rnd({128, 64, 64}), b = rnd({128, 64, 64});
        const double flops = 2.0 * 128 * 64 * 64 * 64;
        run(name("BM_BatchedMatmul", {128, 64, 64, 64, th}), th, [&] { torch::matmul(a, b); }, flops);
        run(name("BM_BatchedMatmulTransB", {128, 64, 64, 64, th}), th, [&] { torch::matmul(a, b.transpose(1, 2)); }, flops);
      }
      {
        auto q = rnd({32, 4, 64, 64}), k = rnd({32, 4, 64, 64}), v = rnd({32, 4, 64, 64});
        auto sdpa = [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
          return torch::matmul(torch::softmax(torch::matmul(q, k.transpose(-2, -1)) * 0.125, -1), v);
        };
        run(name("BM_SDPA", {32, 4, 64, 64, th}), th, [&] { sdpa(q, k, v); });
        auto qg = q.clone().requires_grad_(), kg = k.clone().requires_grad_(), vg = v.clone().requires_grad_();
        run(name("BM_SDPAFwdBwd", {32, 4, 64, 64, th}), th, [&] { backward_and_drop(sdpa(qg, kg, vg), {qg, kg, vg}); });
      }
      for (int64_t n : {1 << 16, 1 << 22}) {
        auto a = rnd({n}), b = rnd({n});
        run(name("BM_ElementwiseChain", {n, th}), th, [&] { torch::tanh(a) * b + 1; });
      }
      {
        auto x = rnd({32, 64, 1024});
        run(name("BM_Gelu", {32 * 64 * 1024, th}), th, [&] { torch::gelu(x); });
      }
    }
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
