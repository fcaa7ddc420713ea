// DistributedDataParallel: buckets driven by post-accumulate-grad hooks, non-blocking exchanges,
// sums in rank order; row-sparse gradients sent as rows.
#include "nn/distributed.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "autograd/compact_grad.h"
#include "autograd/ops_shape.h"
#include "autograd/tape.h"

namespace tg::nn {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
std::size_t elem_bytes(DType d) { return d == DType::f64 ? 8 : 4; }

/// Bytes one rank sends in a rows exchange: its ids, then its rows, for max_rows rows, rounded up
/// to 8 so that every rank's part of the gathered buffer starts aligned for its int64 ids and its
/// values (an odd number of float columns would otherwise misalign the next rank's part).
std::size_t rows_payload(std::size_t max_rows, std::size_t cols, DType d) {
  const std::size_t bytes = max_rows * (sizeof(std::int64_t) + cols * elem_bytes(d));
  return (bytes + 7) / 8 * 8;
}

/// Calls f(T*) with T the element type of `d` (f32 or f64).
template <class F> void with_type(DType d, F&& f) {
  if (d == DType::f64) f(static_cast<double*>(nullptr));
  else f(static_cast<float*>(nullptr));
}

/// One local shard's gradient of a parameter: row-sparse, dense, or none (not reached).
struct ShardGrad {
  Tensor dense;
  std::shared_ptr<CompactGrad> compact;
  bool defined() const { return dense.defined() || compact; }
};

ShardGrad take_grad(const Tensor& t) {
  ShardGrad s;
  if (auto c = t.compact_grad(); c && !c->row_ids().empty()) s.compact = std::move(c);
  else s.dense = t.grad();  // converts any other compact form once
  return s;
}
}  // namespace

struct DistributedDataParallel::Param {
  std::string name;
  Tensor tensor;
  std::size_t bucket = 0;
  std::size_t offset = 0;           // elements into the bucket
  std::size_t numel = 0;
  bool compact_capable = false;     // allows compact gradients and is 2-D: a bucket of its own
  bool written = false;             // this step's contribution is in the bucket
  bool reached = false;             // some shard of this rank reached it this step
  std::int64_t rows_sent = -1;      // this step's rows (sparse form), -1 when dense
  std::vector<ShardGrad> saved;     // earlier shards' gradients this step
  std::weak_ptr<TensorImpl> synced; // the gradient the last synchronize() set
};

// A bucket travels in two phases, each on its own channel (so each phase's collectives start in
// bucket order on every rank, while the phases interleave as each rank's data allows):
//   dense: 1. all-to-all: rank r receives every rank's chunk r (chunk = ceil(numel / N) elements);
//          2. rank r adds its N chunks in rank order (dist::tree_sum) and allgathers the sum.
//   rows:  1. allgather of each rank's row count;
//          2. allgather of [row ids | rows], padded to the largest count; every rank adds them.
struct DistributedDataParallel::Bucket {
  DType dtype = DType::f32;
  std::vector<std::size_t> params;
  std::size_t numel = 0;
  std::size_t chunk = 0;            // elements per rank's chunk; the buffers hold N chunks
  std::vector<unsigned char> send, gathered, mine;
  // The allgathered sum, a new tensor every step: the parameters' gradients are views of it, so
  // synchronize() copies nothing and a gradient kept from an earlier step is never overwritten.
  Tensor recv;
  dist::Request scatter, gather;
  std::size_t pending = 0;          // parameters not yet written this step
  // Rows (one compact-capable parameter, `sparse` decided for the step from the last one).
  bool sparse = false;
  std::int64_t rows = 0;                    // this rank's row count
  std::vector<std::int64_t> row_ids;        // this rank's rows (sorted)
  std::vector<unsigned char> row_values;    // rows x cols elements
  std::vector<std::int64_t> counts;         // every rank's row count
  std::vector<unsigned char> rows_send, rows_recv;  // [ids | rows], padded to the largest count, per rank
  std::size_t max_rows = 0;
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
    if (!t.is_leaf())
      throw std::invalid_argument("DistributedDataParallel: parameter '" + name + "' is not a leaf tensor");
    Param p;
    p.name = name;
    p.tensor = t;
    p.numel = static_cast<std::size_t>(t.numel());
    p.compact_capable = t.allows_compact_grad() && t.dim() == 2;
    params_.push_back(std::move(p));
  }
  if (options.broadcast_parameters())
    for (auto& p : params_) {
      dist::broadcast(p.tensor, 0);
      autograd::increment_version(p.tensor);  // written in place (autocast's weight cache reads the version)
    }
  // Buckets in reverse registration order (backward reaches the last layers first), one dtype each.
  for (std::size_t k = params_.size(); k-- > 0;) {
    Param& p = params_[k];
    const bool fits = !buckets_.empty() && !p.compact_capable &&
                      !params_[buckets_.back().params.back()].compact_capable &&
                      buckets_.back().dtype == p.tensor.dtype() &&
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
    b.counts.resize(world);
  }
  for (std::size_t i = 0; i < params_.size(); ++i)
    hooks_.push_back(params_[i].tensor.register_post_accumulate_grad_hook([this, i](Tensor&) { on_final(i); }));
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

void DistributedDataParallel::on_final(std::size_t i) {
  // Plain backward() calls outside DDP's last shard only accumulate (see the header).
  if (!in_last_) return;
  if (params_[i].written)
    throw std::logic_error("DistributedDataParallel: parameter '" + params_[i].name +
                           "' received a gradient after its bucket was sent");
  write_contribution(i);
  launch_ready();
  advance(false);
}

void DistributedDataParallel::reduce_chunk(std::size_t k) {
  Bucket& b = buckets_[k];
  const auto world = static_cast<std::size_t>(dist::world_size());
  if (b.sparse) {
    // Phase 2 of rows: every rank's ids and rows, padded to the largest count.
    b.max_rows = static_cast<std::size_t>(*std::max_element(b.counts.begin(), b.counts.end()));
    const Param& p = params_[b.params[0]];
    const std::size_t payload = rows_payload(b.max_rows, static_cast<std::size_t>(p.tensor.size(1)), b.dtype);
    b.rows_send.assign(payload, 0);
    std::memcpy(b.rows_send.data(), b.row_ids.data(), b.row_ids.size() * sizeof(std::int64_t));
    std::memcpy(b.rows_send.data() + b.max_rows * sizeof(std::int64_t), b.row_values.data(), b.row_values.size());
    b.rows_recv.resize(payload * world);
    stats_.wire_bytes += static_cast<std::int64_t>((world - 1) * payload);
    b.gather = dist::iallgather(b.rows_send.data(), payload, b.rows_recv.data(), "DDP bucket " + std::to_string(k) + " rows", 2);
    return;
  }
  const auto t0 = Clock::now();
  with_type(b.dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    std::vector<const T*> parts(world);
    for (std::size_t r = 0; r < world; ++r) parts[r] = reinterpret_cast<const T*>(b.gathered.data()) + r * b.chunk;
    dist::tree_sum(parts.data(), world, b.chunk, reinterpret_cast<T*>(b.mine.data()));
  });
  stats_.sum_seconds += since(t0);
  stats_.wire_bytes += static_cast<std::int64_t>((world - 1) * b.chunk_bytes());
  b.recv = Tensor::empty({static_cast<std::int64_t>(b.chunk * world)}, b.dtype);
  b.gather = dist::iallgather(b.mine.data(), b.chunk_bytes(), b.recv.data_ptr(), "DDP bucket " + std::to_string(k) + " gather", 2);
}

void DistributedDataParallel::advance(bool block) {
  // Phase 2 of each bucket whose phase 1 is done, in bucket order. Testing also lets MPI make
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

void DistributedDataParallel::write_rows(std::size_t i) {
  // This rank's rows of a row-sparse bucket: the union of its shards' rows (for a dense shard, its
  // rows that are not all +0.0: leaving those out changes no bit of the sum), each the tree sum over
  // shards with zeros where a shard has no such row, as the dense path adds them.
  Param& p = params_[i];
  Bucket& b = buckets_[p.bucket];
  std::vector<ShardGrad> shards = p.saved;
  shards.push_back(take_grad(p.tensor));
  const std::int64_t rows = p.tensor.size(0), cols = p.tensor.size(1);
  std::vector<char> present(static_cast<std::size_t>(rows), 0);
  bool any = false;
  for (const ShardGrad& s : shards) {
    if (s.compact) {
      for (std::int64_t r : s.compact->row_ids()) present[static_cast<std::size_t>(r)] = 1;
    } else if (s.dense.defined()) {
      const std::size_t row_bytes = static_cast<std::size_t>(cols) * elem_bytes(b.dtype);
      const std::vector<unsigned char> zero(row_bytes, 0);
      const auto* data = static_cast<const unsigned char*>(s.dense.data_ptr());
      for (std::int64_t r = 0; r < rows; ++r)
        if (std::memcmp(data + static_cast<std::size_t>(r) * row_bytes, zero.data(), row_bytes) != 0)
          present[static_cast<std::size_t>(r)] = 1;
    }
    any = any || s.defined();
  }
  b.row_ids.clear();
  for (std::int64_t r = 0; r < rows; ++r)
    if (present[static_cast<std::size_t>(r)]) b.row_ids.push_back(r);
  b.rows = static_cast<std::int64_t>(b.row_ids.size());
  const std::size_t row_bytes = static_cast<std::size_t>(cols) * elem_bytes(b.dtype);
  b.row_values.resize(b.row_ids.size() * row_bytes);
  with_type(b.dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const std::size_t S = shards.size(), D = static_cast<std::size_t>(cols);
    std::vector<T> zeros(D, T(0)), scratch(S * D);
    std::vector<const T*> parts(S);
    T* out = reinterpret_cast<T*>(b.row_values.data());
    for (std::size_t u = 0; u < b.row_ids.size(); ++u) {
      const std::int64_t r = b.row_ids[u];
      for (std::size_t s = 0; s < S; ++s) {
        const ShardGrad& g = shards[s];
        if (g.compact) {
          g.compact->read_rows(r, r + 1, scratch.data() + s * D);
          parts[s] = scratch.data() + s * D;
        } else if (g.dense.defined()) {
          parts[s] = g.dense.template data<T>() + static_cast<std::size_t>(r) * D;
        } else {
          parts[s] = zeros.data();
        }
      }
      if (S == 1) std::memcpy(out + u * D, parts[0], D * sizeof(T));
      else dist::tree_sum(parts.data(), S, D, out + u * D);
    }
  });
  p.rows_sent = b.rows;
  p.reached = p.reached || any;
}

void DistributedDataParallel::write_contribution(std::size_t i) {
  Param& p = params_[i];
  Bucket& b = buckets_[p.bucket];
  if (b.sparse) {
    write_rows(i);
  } else {
    const ShardGrad cur = take_grad(p.tensor);
    // The rows this rank would send (at most: the shards' counts added), -1 if a shard is dense.
    p.rows_sent = 0;
    for (std::size_t s = 0; s <= p.saved.size(); ++s) {
      const ShardGrad& g = s < p.saved.size() ? p.saved[s] : cur;
      if (g.dense.defined() || p.rows_sent < 0) p.rows_sent = -1;
      else if (g.compact) p.rows_sent += static_cast<std::int64_t>(g.compact->row_ids().size());
    }
    with_type(b.dtype, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      T* dst = reinterpret_cast<T*>(b.send.data()) + p.offset;
      // This shard's gradient (everything accumulated since the last shard), dense.
      std::vector<Tensor> keep;  // dense forms of compact shards while they are summed
      auto dense_of = [&](const ShardGrad& s) -> const T* {
        if (s.compact) keep.push_back(s.compact->dense());
        else if (s.dense.defined()) keep.push_back(s.dense);
        else return nullptr;
        return keep.back().template data<T>();
      };
      if (p.saved.empty()) {
        if (const T* a = dense_of(cur)) std::memcpy(dst, a, p.numel * sizeof(T));
        else std::fill(dst, dst + p.numel, T(0));
        return;
      }
      std::vector<T> zeros;
      std::vector<const T*> parts;
      for (std::size_t s = 0; s <= p.saved.size(); ++s) {
        const T* a = dense_of(s < p.saved.size() ? p.saved[s] : cur);
        if (!a) {
          if (zeros.empty()) zeros.assign(p.numel, T(0));
          a = zeros.data();
        }
        parts.push_back(a);
      }
      dist::tree_sum(parts.data(), parts.size(), p.numel, dst);
    });
    p.reached = p.reached || cur.defined();
  }
  p.written = true;
  --b.pending;
}

void DistributedDataParallel::launch(std::size_t k) {
  Bucket& b = buckets_[k];
  const auto world = static_cast<std::int64_t>(dist::world_size());
  if (b.sparse) {
    b.scatter = dist::iallgather(&b.rows, sizeof(std::int64_t), b.counts.data(), "DDP bucket " + std::to_string(k) + " row count", 1);
    stats_.bytes_sent += static_cast<std::int64_t>(b.row_values.size());
    stats_.wire_bytes += (world - 1) * static_cast<std::int64_t>(sizeof(std::int64_t));
    ++stats_.sparse_buckets;
  } else {
    b.scatter = dist::ialltoall(b.send.data(), b.chunk_bytes(), b.gathered.data(), "DDP bucket " + std::to_string(k) + " scatter", 1);
    stats_.bytes_sent += static_cast<std::int64_t>(b.bytes());
    stats_.wire_bytes += (world - 1) * static_cast<std::int64_t>(b.chunk_bytes());
  }
  if (in_last_) ++stats_.early_buckets;
  else ++stats_.late_buckets;
}

void DistributedDataParallel::launch_ready() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) launch(next_launch_++);
}

void DistributedDataParallel::start_step() {
  for (auto& p : params_) {
    auto s = p.synced.lock();
    if (s && !p.tensor.compact_grad() && p.tensor.grad().impl() == s.get())
      throw std::logic_error("DistributedDataParallel::backward: parameter '" + p.name +
                             "' still holds the gradient of the last synchronize(); call zero_grad() (e.g. "
                             "optimizer.zero_grad()) before the next step's backward");
  }
  for (auto& b : buckets_) b.pending = b.params.size();
  next_launch_ = 0;
  next_reduce_ = 0;
  for (auto& p : params_) {
    p.written = false;
    p.reached = false;
    p.rows_sent = -1;
    p.saved.clear();
  }
}

void DistributedDataParallel::backward(const Tensor& loss, bool last) {
  if (in_last_) throw std::logic_error("DistributedDataParallel::backward: called again inside a backward");
  if (last_done_)
    throw std::logic_error("DistributedDataParallel::backward: this step's last shard already ran; call synchronize() first");
  if (local_shards_ == 0) start_step();
  in_last_ = last;
  if (last && (options_.find_unused_parameters() || !loss.defined())) {
    // Parameters the loss cannot reach are final now: they do not hold their buckets back.
    std::vector<Tensor> tensors;
    for (auto& p : params_) tensors.push_back(p.tensor);
    const std::vector<bool> reach = loss.defined() ? tape::reachable(loss, tensors) : std::vector<bool>(params_.size(), false);
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (!reach[i]) {
        write_contribution(i);
        ++stats_.unused_parameters;
      }
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
  if (!last) {
    for (auto& p : params_) {
      ShardGrad g = take_grad(p.tensor);
      p.reached = p.reached || g.defined();
      p.saved.push_back(std::move(g));
      p.tensor.zero_grad();
    }
    return;
  }
  last_done_ = true;
  // Reachable parameters that received no gradient (their hook did not fire).
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (!params_[i].written) write_contribution(i);
  launch_ready();
  advance(false);
}

void DistributedDataParallel::finish_sparse(std::size_t k, double divisor) {
  Bucket& b = buckets_[k];
  Param& p = params_[b.params[0]];
  const auto world = static_cast<std::size_t>(dist::world_size());
  const std::size_t cols = static_cast<std::size_t>(p.tensor.size(1));
  const std::size_t payload = rows_payload(b.max_rows, cols, b.dtype);
  // (row, rank, slot) of every rank's rows, by row then rank.
  struct Entry { std::int64_t row; std::size_t rank, slot; };
  std::vector<Entry> entries;
  for (std::size_t r = 0; r < world; ++r) {
    const auto* ids = reinterpret_cast<const std::int64_t*>(b.rows_recv.data() + r * payload);
    for (std::size_t s = 0; s < static_cast<std::size_t>(b.counts[r]); ++s) entries.push_back({ids[s], r, s});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& c) {
    return a.row != c.row ? a.row < c.row : a.rank < c.rank;
  });
  Tensor out = Tensor::zeros(p.tensor.shape(), p.tensor.dtype());
  with_type(b.dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    T* o = out.template data<T>();
    const std::vector<T> zeros(cols, T(0));
    std::vector<const T*> parts(world);
    for (std::size_t e = 0; e < entries.size();) {
      const std::int64_t row = entries[e].row;
      std::fill(parts.begin(), parts.end(), zeros.data());
      for (; e < entries.size() && entries[e].row == row; ++e) {
        const unsigned char* base = b.rows_recv.data() + entries[e].rank * payload + b.max_rows * sizeof(std::int64_t);
        parts[entries[e].rank] = reinterpret_cast<const T*>(base) + entries[e].slot * cols;
      }
      dist::tree_sum(parts.data(), world, cols, o + static_cast<std::size_t>(row) * cols);
    }
    if (divisor != 1.0)
      for (std::size_t j = 0; j < p.numel; ++j) o[j] = static_cast<T>(o[j] / static_cast<T>(divisor));
  });
  p.tensor.set_grad(out);
  p.synced = out.impl_ptr();
}

void DistributedDataParallel::synchronize() {
  if (!last_done_ || next_launch_ != buckets_.size())
    throw std::logic_error("DistributedDataParallel::synchronize: no backward(loss, last = true) before it");
  const auto world = static_cast<std::size_t>(dist::world_size());
  const std::size_t P = params_.size();
  // Control message: per parameter [reached, rows sent (-1: dense)] from every rank.
  std::vector<std::int64_t> ctl(2 * P), all_ctl(world * 2 * P);
  for (std::size_t i = 0; i < P; ++i) {
    ctl[2 * i] = params_[i].reached ? 1 : 0;
    ctl[2 * i + 1] = params_[i].rows_sent;
  }
  stats_.wire_bytes += static_cast<std::int64_t>((world - 1) * ctl.size() * sizeof(std::int64_t));
  dist::iallgather(ctl.data(), ctl.size() * sizeof(std::int64_t), all_ctl.data(), "DDP control").wait();

  const double divisor = options_.average() ? static_cast<double>(world) * local_shards_ : 1.0;
  advance(true);
  for (std::size_t k = 0; k < buckets_.size(); ++k) {
    Bucket& b = buckets_[k];
    const auto t0 = Clock::now();
    b.gather.wait();
    stats_.wait_seconds += since(t0);
    const auto t1 = Clock::now();
    PooledVector<Tensor> views;  // one per parameter of a dense bucket, in offset order
    if (!b.sparse) {
      PooledVector<std::int64_t> sizes;  // from the caching allocator: a step allocates nothing
      for (std::size_t i : b.params) sizes.push_back(static_cast<std::int64_t>(params_[i].numel));
      if (const std::size_t padding = b.chunk * world - b.numel) sizes.push_back(static_cast<std::int64_t>(padding));
      views = split_with_sizes(b.recv, sizes);
    }
    for (std::size_t j = 0; j < b.params.size(); ++j) {
      Param& p = params_[b.params[j]];
      bool any = false;
      for (std::size_t r = 0; r < world; ++r) any = any || all_ctl[r * 2 * P + 2 * b.params[j]] != 0;
      if (!any) {
        p.tensor.zero_grad();
        continue;
      }
      if (b.sparse) {
        finish_sparse(k, divisor);
        continue;
      }
      Tensor out = reshape(views[j], p.tensor.shape());
      if (divisor != 1.0)
        with_type(p.tensor.dtype(), [&](auto* tag) {
          using T = std::remove_pointer_t<decltype(tag)>;
          T* o = out.template data<T>();
          for (std::size_t e = 0; e < p.numel; ++e) o[e] = static_cast<T>(o[e] / static_cast<T>(divisor));
        });
      p.tensor.set_grad(out);
      p.synced = out.impl_ptr();
    }
    b.recv = Tensor();  // the gradients hold it now
    stats_.sum_seconds += since(t1);
  }
  // Next step's form of each compact-capable bucket: rows when every rank sent rows this step and
  // (N-1) x the largest rank's rows cost less than the dense exchange's 2 (N-1)/N x the table.
  for (auto& b : buckets_) {
    const Param& p = params_[b.params[0]];
    b.sparse = false;
    if (!options_.sparse_transfer() || !p.compact_capable) continue;
    std::int64_t most = 0;
    bool all_rows = true;
    for (std::size_t r = 0; r < world; ++r) {
      const std::int64_t rows = all_ctl[r * 2 * P + 2 * b.params[0] + 1];
      all_rows = all_rows && rows >= 0;
      most = std::max(most, rows);
    }
    const double row_bytes = static_cast<double>(p.tensor.size(1) * static_cast<std::int64_t>(elem_bytes(b.dtype)) + 8);
    b.sparse = all_rows && static_cast<double>(most) * row_bytes * static_cast<double>(world) < 2.0 * static_cast<double>(b.bytes());
  }
  for (auto& p : params_) p.saved.clear();
  local_shards_ = 0;
  last_done_ = false;
  ++stats_.steps;
}

}  // namespace tg::nn
