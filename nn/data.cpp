#include "nn/data.h"

#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include <atomic>
#include <mutex>

#include "autograd/ops_shape.h"
#include "autograd/ops_sampling.h"
#include "autograd/random.h"

namespace tg::nn::data {

// ---- TensorDataset ----------------------------------------------------------------------------

TensorDataset::TensorDataset(Tensor data, Tensor target) : data_(std::move(data)), target_(std::move(target)) {
  if (!data_.defined() || data_.dim() < 1)
    throw std::invalid_argument("TensorDataset: data must be a tensor with at least one dimension" +
                                (data_.defined() ? ", got shape " + data_.shape().str() : std::string()));
  if (target_.defined() && (target_.dim() < 1 || target_.size(0) != data_.size(0)))
    throw std::invalid_argument("TensorDataset: size mismatch between tensors: data " + data_.shape().str() +
                                ", target " + target_.shape().str());
  // Detached: examples are data, never part of a graph.
  data_ = data_.detach();
  if (target_.defined()) target_ = target_.detach();
}

std::size_t TensorDataset::size() const { return static_cast<std::size_t>(data_.size(0)); }

namespace {
/// Row i of t (axis 0 removed), as a tensor of its own.
Tensor row(const Tensor& t, std::size_t i) {
  Shape shape(t.shape().begin() + 1, t.shape().end());
  return reshape(narrow(t, 0, static_cast<std::int64_t>(i), 1), shape).clone();
}
}  // namespace

Example TensorDataset::get(std::size_t index) const {
  if (index >= size())
    throw std::out_of_range("TensorDataset: index " + std::to_string(index) + " out of range for size " +
                            std::to_string(size()));
  NoGradGuard no_grad;
  return Example{row(data_, index), target_.defined() ? row(target_, index) : Tensor()};
}

// ---- collate ----------------------------------------------------------------------------------

Tensor default_collate(std::vector<Tensor> examples) {
  if (examples.empty()) throw std::invalid_argument("default_collate: no examples");
  NoGradGuard no_grad;
  return stack(examples, 0);
}

Example default_collate(std::vector<Example> examples) {
  if (examples.empty()) throw std::invalid_argument("default_collate: no examples");
  const bool targets = examples.front().target.defined();
  std::vector<Tensor> data, target;
  for (Example& e : examples) {
    if (e.target.defined() != targets)
      throw std::invalid_argument("default_collate: some examples have a target and some do not");
    data.push_back(std::move(e.data));
    if (targets) target.push_back(std::move(e.target));
  }
  return Example{default_collate(std::move(data)), targets ? default_collate(std::move(target)) : Tensor()};
}

std::vector<std::size_t> epoch_order(std::size_t n, bool shuffle, std::uint64_t seed, std::int64_t epoch) {
  std::vector<std::size_t> order(n);
  if (!shuffle) {
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    return order;
  }
  Generator gen(SplitMix64::at(seed, static_cast<std::uint64_t>(epoch)));
  const std::vector<std::int64_t> perm = randperm(static_cast<std::int64_t>(n), gen).to_vector<std::int64_t>();
  for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<std::size_t>(perm[i]);
  return order;
}

// ---- BackgroundJobs ---------------------------------------------------------------------------

struct BackgroundJobs::Impl {
  // One slot for the waiting caller, `workers` for TBB's worker threads.
  explicit Impl(int workers) : arena(workers + 1, 1) {}
  tbb::task_arena arena;
  std::vector<std::unique_ptr<tbb::task_group>> groups;  // one per job: wait() waits for that one
  std::vector<bool> waited;
  std::atomic<bool> cancelled{false};
};

BackgroundJobs::BackgroundJobs(int workers) : impl_(std::make_unique<Impl>(workers)) {}

BackgroundJobs::~BackgroundJobs() {
  impl_->cancelled = true;
  for (std::size_t id = 0; id < impl_->groups.size(); ++id) {
    if (impl_->waited[id]) continue;
    try {
      impl_->arena.execute([&] { impl_->groups[id]->wait(); });
    } catch (...) {  // an abandoned batch's error has no one to go to
    }
  }
}

std::size_t BackgroundJobs::submit(std::function<void()> job) {
  const std::size_t id = impl_->groups.size();
  impl_->groups.push_back(std::make_unique<tbb::task_group>());
  impl_->waited.push_back(false);
  tbb::task_group& group = *impl_->groups.back();
  std::atomic<bool>& cancelled = impl_->cancelled;
  impl_->arena.execute([&] {
    group.run([job = std::move(job), &cancelled] {
      if (!cancelled) job();
    });
  });
  return id;
}

void BackgroundJobs::wait(std::size_t id) {
  impl_->waited.at(id) = true;
  tbb::task_group& group = *impl_->groups[id];
  impl_->arena.execute([&] { group.wait(); });  // runs queued jobs here if no worker has
  impl_->groups[id].reset();
}


}  // namespace tg::nn::data
