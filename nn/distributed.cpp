// DistributedDataParallel: hook-driven buckets, non-blocking allgathers, sums in rank order.
#include "nn/distributed.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace tg::nn {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
std::size_t elem_bytes(DType d) { return d == DType::f64 ? 8 : 4; }

/// dst = a (+ b if given), elementwise (the same adds the tape's accumulation does).
template <class T> void add_to(T* dst, const T* a, const T* b, std::size_t n) {
  if (!b) {
    std::memcpy(dst, a, n * sizeof(T));
    return;
  }
  for (std::size_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
}
}  // namespace

struct DistributedDataParallel::Param {
  std::string name;
  Tensor tensor;
  std::size_t bucket = 0;
  std::size_t offset = 0;           // elements into the bucket
  std::size_t numel = 0;
  int arrivals = 0;                 // gradients received in the current backward
  bool written = false;             // this step's contribution is in the bucket
  bool reached = false;             // some shard of this rank reached it this step
  std::vector<Tensor> saved;        // earlier shards' gradients this step (undefined: not reached)
};

// A bucket travels in two phases, each on its own channel (so each phase's collectives start in
// bucket order on every rank, while the phases interleave as each rank's data allows):
//   1. all-to-all: rank r receives every rank's chunk r (chunk = ceil(numel / N) elements);
//   2. rank r adds its N chunks in rank order (dist::tree_sum) and allgathers the sum.
struct DistributedDataParallel::Bucket {
  DType dtype = DType::f32;
  std::vector<std::size_t> params;
  std::size_t numel = 0;
  std::size_t chunk = 0;            // elements per rank's chunk; the buffers hold N chunks
  std::vector<unsigned char> send, gathered, mine, recv;
  dist::Request scatter, gather;
  std::size_t pending = 0;          // parameters not yet written this step
  std::size_t bytes() const { return numel * elem_bytes(dtype); }
  std::size_t chunk_bytes() const { return chunk * elem_bytes(dtype); }
};

DistributedDataParallel::DistributedDataParallel(NamedTensors params, const DDPOptions& options)
    : options_(options) {
  if (options.bucket_bytes() < 1)
    throw std::invalid_argument("DistributedDataParallel: bucket_bytes must be >= 1");
  for (auto& [name, t] : params) {
    if (!t.defined() || !t.requires_grad()) continue;
    if (t.dtype() != DType::f32 && t.dtype() != DType::f64)
      throw std::invalid_argument("DistributedDataParallel: parameter '" + name + "' has dtype " +
                                  std::string(dtype_name(t.dtype())) + " (f32 or f64 only)");
    Param p;
    p.name = name;
    p.tensor = t;
    p.numel = static_cast<std::size_t>(t.numel());
    params_.push_back(std::move(p));
  }
  if (options.broadcast_parameters())
    for (auto& p : params_) dist::broadcast(p.tensor, 0);
  // Buckets in reverse registration order (backward reaches the last layers first), one dtype each.
  for (std::size_t k = params_.size(); k-- > 0;) {
    Param& p = params_[k];
    const bool fits = !buckets_.empty() && buckets_.back().dtype == p.tensor.dtype() &&
                      static_cast<std::int64_t>((buckets_.back().numel + p.numel) * elem_bytes(p.tensor.dtype())) <=
                          options.bucket_bytes();
    if (!fits) {
      buckets_.emplace_back();
      buckets_.back().dtype = p.tensor.dtype();
    }
    Bucket& b = buckets_.back();
    p.bucket = buckets_.size() - 1;
    p.offset = b.numel;
    b.numel += p.numel;
    b.params.push_back(k);
  }
  const auto world = static_cast<std::size_t>(dist::world_size());
  for (auto& b : buckets_) {
    b.chunk = (b.numel + world - 1) / world;
    b.send.assign(b.chunk_bytes() * world, 0);  // the padding past numel stays zero
    b.gathered.resize(b.chunk_bytes() * world);
    b.mine.resize(b.chunk_bytes());
    b.recv.resize(b.chunk_bytes() * world);
  }
  for (std::size_t i = 0; i < params_.size(); ++i)
    hooks_.push_back(params_[i].tensor.register_hook([this, i](const Tensor& g) {
      on_gradient(i, g);
      return Tensor();
    }));
}

DistributedDataParallel::~DistributedDataParallel() {
  for (auto& h : hooks_) h.remove();
  // Requests still in flight (an exception mid-step) are waited for by their destructors.
}

int DistributedDataParallel::num_buckets() const { return static_cast<int>(buckets_.size()); }

std::int64_t DistributedDataParallel::bytes_per_step() const {
  std::int64_t n = 0;
  for (const auto& b : buckets_) n += static_cast<std::int64_t>(b.bytes());
  return n;
}

void DistributedDataParallel::on_gradient(std::size_t i, const Tensor& g) {
  Param& p = params_[i];
  ++p.arrivals;
  p.reached = true;
  if (!in_last_) return;
  if (p.written) {
    miscounted_ = true;  // its bucket may already be on its way without this gradient
  } else if (expect_ && p.arrivals == (*expect_)[i]) {
    write_contribution(i, &g);
    launch_ready();
  }
  advance(false);
}

void DistributedDataParallel::reduce_chunk(std::size_t k) {
  Bucket& b = buckets_[k];
  const auto t0 = Clock::now();
  const auto world = static_cast<std::size_t>(dist::world_size());
  auto sum = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    std::vector<const T*> parts(world);
    for (std::size_t r = 0; r < world; ++r) parts[r] = reinterpret_cast<const T*>(b.gathered.data()) + r * b.chunk;
    dist::tree_sum(parts.data(), world, b.chunk, reinterpret_cast<T*>(b.mine.data()));
  };
  if (b.dtype == DType::f64) sum(static_cast<double*>(nullptr));
  else sum(static_cast<float*>(nullptr));
  stats_.sum_seconds += since(t0);
  b.gather = dist::iallgather(b.mine.data(), b.chunk_bytes(), b.recv.data(), "DDP bucket " + std::to_string(k) + " gather", 2);
}

void DistributedDataParallel::advance(bool block) {
  // Phase 2 of each bucket whose all-to-all is done, in bucket order. Testing also lets MPI make
  // progress (Open MPI progresses transfers only inside MPI calls).
  while (next_reduce_ < next_launch_) {
    Bucket& b = buckets_[next_reduce_];
    if (block) {
      const auto t0 = Clock::now();
      b.scatter.wait();
      stats_.wait_seconds += since(t0);
    } else if (!b.scatter.test()) {
      break;
    }
    reduce_chunk(next_reduce_++);
  }
  if (!block && next_reduce_ > 0) buckets_[next_reduce_ - 1].gather.test();
}

void DistributedDataParallel::write_contribution(std::size_t i, const Tensor* pending) {
  Param& p = params_[i];
  Bucket& b = buckets_[p.bucket];
  const Tensor grad = p.tensor.grad();  // converts a compact gradient (none under hooks) once
  auto write = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    T* dst = reinterpret_cast<T*>(b.send.data()) + p.offset;
    // This shard's gradient: what has accumulated plus the gradient still being delivered.
    const T* a = grad.defined() ? grad.template data<T>() : nullptr;
    const T* c = pending ? pending->template data<T>() : nullptr;
    if (pending && !(pending->shape() == p.tensor.shape()))
      throw std::logic_error("DistributedDataParallel: gradient of '" + p.name + "' has shape " +
                             pending->shape().str() + ", expected " + p.tensor.shape().str());
    std::vector<T> last_storage;
    T* last = dst;
    if (!p.saved.empty()) {
      last_storage.resize(p.numel);
      last = last_storage.data();
    }
    if (a && c) add_to(last, a, c, p.numel);
    else if (a || c) add_to<T>(last, a ? a : c, nullptr, p.numel);
    else std::fill(last, last + p.numel, T(0));
    if (!p.saved.empty()) {
      std::vector<std::vector<T>> zeros;
      std::vector<const T*> parts;
      for (const Tensor& s : p.saved) {
        if (s.defined()) {
          parts.push_back(s.template data<T>());
        } else {
          zeros.emplace_back(p.numel, T(0));
          parts.push_back(zeros.back().data());
        }
      }
      parts.push_back(last);
      dist::tree_sum(parts.data(), parts.size(), p.numel, dst);
    }
  };
  if (p.tensor.dtype() == DType::f64) write(static_cast<double*>(nullptr));
  else write(static_cast<float*>(nullptr));
  p.reached = p.reached || grad.defined() || pending != nullptr;
  if (!p.written) {
    p.written = true;
    --b.pending;
  }
}

void DistributedDataParallel::launch(std::size_t k) {
  Bucket& b = buckets_[k];
  b.scatter = dist::ialltoall(b.send.data(), b.chunk_bytes(), b.gathered.data(), "DDP bucket " + std::to_string(k) + " scatter", 1);
  stats_.bytes_sent += static_cast<std::int64_t>(b.bytes());
  if (in_last_) ++stats_.early_buckets;
  else ++stats_.late_buckets;
}

void DistributedDataParallel::launch_ready() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) launch(next_launch_++);
}

void DistributedDataParallel::backward(const Tensor& loss, bool last, std::uint64_t graph_key) {
  if (in_last_) throw std::logic_error("DistributedDataParallel::backward: called again inside a backward");
  if (local_shards_ == 0) {  // the step's first shard
    for (auto& b : buckets_) b.pending = b.params.size();
    next_launch_ = 0;
    next_reduce_ = 0;
    miscounted_ = false;
    for (auto& p : params_) {
      p.written = false;
      p.reached = false;
      p.saved.clear();
    }
  }
  for (auto& p : params_) p.arrivals = 0;
  const auto it = expected_.find(graph_key);
  expect_ = it != expected_.end() ? &it->second : nullptr;
  in_last_ = last;
  if (last && expect_) {
    // Parameters the last graph of this key did not reach are final now (their earlier shards'
    // gradients, or zeros), so they do not hold their buckets back.
    for (std::size_t i = 0; i < params_.size(); ++i)
      if ((*expect_)[i] == 0 && !params_[i].written) write_contribution(i, nullptr);
    launch_ready();
  }
  try {
    if (loss.defined()) loss.backward();
  } catch (...) {
    in_last_ = false;
    throw;
  }
  in_last_ = false;
  ++local_shards_;
  std::vector<int> counts(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i) counts[i] = params_[i].arrivals;
  expected_[graph_key] = std::move(counts);
  expect_ = nullptr;
  if (!last) {
    for (auto& p : params_) {
      Tensor g = p.tensor.grad();
      p.reached = p.reached || g.defined();
      p.saved.push_back(g);
      p.tensor.zero_grad();
    }
    return;
  }
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (!params_[i].written) write_contribution(i, nullptr);
  launch_ready();
}

void DistributedDataParallel::exchange_all_again() {
  advance(true);
  for (auto& b : buckets_) b.gather.wait();
  for (auto& p : params_) p.written = false;
  for (auto& b : buckets_) b.pending = b.params.size();
  for (std::size_t i = 0; i < params_.size(); ++i) write_contribution(i, nullptr);
  next_launch_ = 0;
  next_reduce_ = 0;
  launch_ready();
  ++stats_.redone_steps;
}

void DistributedDataParallel::synchronize() {
  if (local_shards_ == 0 || next_launch_ != buckets_.size())
    throw std::logic_error("DistributedDataParallel::synchronize: no backward(loss, last = true) before it");
  const auto world = static_cast<std::size_t>(dist::world_size());
  const std::size_t P = params_.size();
  // Control message: [miscounted, reached per parameter] from every rank.
  std::vector<unsigned char> ctl(1 + P), all_ctl(world * (1 + P));
  ctl[0] = miscounted_ ? 1 : 0;
  for (std::size_t i = 0; i < P; ++i) ctl[1 + i] = params_[i].reached ? 1 : 0;
  dist::iallgather(ctl.data(), ctl.size(), all_ctl.data(), "DDP control").wait();
  bool redo = false;
  for (std::size_t r = 0; r < world; ++r) redo = redo || all_ctl[r * (1 + P)] != 0;
  if (redo) exchange_all_again();

  const double divisor = options_.average() ? static_cast<double>(world) * local_shards_ : 1.0;
  advance(true);
  for (std::size_t k = 0; k < buckets_.size(); ++k) {
    Bucket& b = buckets_[k];
    const auto t0 = Clock::now();
    b.gather.wait();
    stats_.wait_seconds += since(t0);
    const auto t1 = Clock::now();
    for (std::size_t i : b.params) {
      Param& p = params_[i];
      bool any = false;
      for (std::size_t r = 0; r < world; ++r) any = any || all_ctl[r * (1 + P) + 1 + i] != 0;
      if (!any) {
        p.tensor.zero_grad();
        continue;
      }
      Tensor out = Tensor::empty(p.tensor.shape(), p.tensor.dtype());
      auto reduce = [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        T* o = out.template data<T>();
        std::memcpy(o, reinterpret_cast<const T*>(b.recv.data()) + p.offset, p.numel * sizeof(T));
        if (divisor != 1.0)
          for (std::size_t j = 0; j < p.numel; ++j) o[j] = static_cast<T>(o[j] / static_cast<T>(divisor));
      };
      if (p.tensor.dtype() == DType::f64) reduce(static_cast<double*>(nullptr));
      else reduce(static_cast<float*>(nullptr));
      p.tensor.set_grad(out);
    }
    stats_.sum_seconds += since(t1);
  }
  for (auto& p : params_) p.saved.clear();
  local_shards_ = 0;
  ++stats_.steps;
}

}  // namespace tg::nn
