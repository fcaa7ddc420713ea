#pragma once
// A small data pipeline in the shape of torch.utils.data: a map-style Dataset (size() and get(i)),
// TensorDataset, and a DataLoader that batches it with a collate function, shuffles by seed (a new
// permutation each epoch, from the seed and the epoch number only) and can load the next batches
// in the background on TBB:
//
//   auto ds = tg::nn::data::TensorDataset(images, labels);   // (N, ...) and (N, ...)
//   tg::nn::data::DataLoader loader(ds, tg::nn::data::DataLoaderOptions().batch_size(32).shuffle(true).seed(1));
//   for (auto& batch : loader) train_step(batch.data, batch.target);   // one epoch per loop
//
// Background loading (num_workers > 0) gives the same batches in the same order as num_workers = 0,
// as long as get() and the collate function depend only on their arguments; they then run on TBB
// worker threads, several at once, so they must be safe to call concurrently (TensorDataset is).
// Loading never records on the tape (it runs under NoGradGuard).
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/tape.h"
#include "autograd/tensor.h"

namespace tg::nn::data {

/// One example, or a batch of them: torch's (data, target) pair. `target` may be undefined.
struct Example {
  Tensor data;
  Tensor target;
};

/// A map-style dataset (torch.utils.data.Dataset): `size()` examples, `get(i)` for i < size().
/// ExampleT is what get() returns (Example by default; any copyable or movable type).
template <class ExampleT = Example>
class Dataset {
 public:
  using ExampleType = ExampleT;
  virtual ~Dataset() = default;
  /// Number of examples (torch's __len__).
  virtual std::size_t size() const = 0;
  /// Example `index` (torch's __getitem__). Called concurrently when a DataLoader has workers.
  virtual ExampleT get(std::size_t index) const = 0;
};

/// Examples are the rows (axis 0) of `data` and of `target` (torch.utils.data.TensorDataset with two
/// tensors); `target` may be undefined. Rows are copies: changing a batch does not change the dataset.
class TensorDataset : public Dataset<Example> {
 public:
  /// Throws std::invalid_argument if data is undefined or 0-dim, or target's rows differ in number.
  TensorDataset(Tensor data, Tensor target = Tensor());
  std::size_t size() const override;
  Example get(std::size_t index) const override;
  const Tensor& data() const { return data_; }
  const Tensor& target() const { return target_; }

 private:
  Tensor data_, target_;
};

/// torch's default_collate for these types: the examples' tensors stacked along a new axis 0
/// (data with data, target with target; every example must have a target or none). Throws
/// std::invalid_argument for an empty list or tensors that do not stack.
Example default_collate(std::vector<Example> examples);
Tensor default_collate(std::vector<Tensor> examples);

/// Options of DataLoader (torch.utils.data.DataLoader's arguments). Chainable setters; validated
/// when the loader is built.
class DataLoaderOptions {
 public:
  /// Examples per batch, >= 1 (torch's default 1).
  DataLoaderOptions& batch_size(std::int64_t v) { batch_size_ = v; return *this; }
  /// A new permutation every epoch (torch: shuffle=True); off: dataset order.
  DataLoaderOptions& shuffle(bool v) { shuffle_ = v; return *this; }
  /// Drop the last batch when it is smaller than batch_size.
  DataLoaderOptions& drop_last(bool v) { drop_last_ = v; return *this; }
  /// The shuffle seed: epoch e's order is randperm(size, Generator(SplitMix64::at(seed, e)))
  /// (torch draws it from a generator; here the epoch alone picks it, so a resumed run gets the
  /// same order without replaying earlier epochs).
  DataLoaderOptions& seed(std::uint64_t v) { seed_ = v; return *this; }
  /// Background threads loading batches ahead (0: load each batch when it is reached), >= 0.
  DataLoaderOptions& num_workers(int v) { num_workers_ = v; return *this; }
  /// Batches loaded ahead per worker (torch's prefetch_factor, default 2), >= 1.
  DataLoaderOptions& prefetch_factor(int v) { prefetch_factor_ = v; return *this; }
  std::int64_t batch_size() const { return batch_size_; }
  bool shuffle() const { return shuffle_; }
  bool drop_last() const { return drop_last_; }
  std::uint64_t seed() const { return seed_; }
  int num_workers() const { return num_workers_; }
  int prefetch_factor() const { return prefetch_factor_; }

 private:
  std::int64_t batch_size_ = 1;
  bool shuffle_ = false;
  bool drop_last_ = false;
  std::uint64_t seed_ = 0;
  int num_workers_ = 0;
  int prefetch_factor_ = 2;
};

/// Runs jobs on a TBB arena with `workers` threads besides the caller's. wait(id) returns once job
/// `id` has run, rethrowing its exception; while waiting the caller runs queued jobs itself, so
/// progress never depends on a worker being free (tg::set_num_threads(1) leaves TBB no workers).
class BackgroundJobs {
 public:
  explicit BackgroundJobs(int workers);
  /// Jobs not started are skipped; running ones are waited for.
  ~BackgroundJobs();
  BackgroundJobs(const BackgroundJobs&) = delete;
  BackgroundJobs& operator=(const BackgroundJobs&) = delete;
  /// Queues `job`; ids are 0, 1, ... in submission order.
  std::size_t submit(std::function<void()> job);
  void wait(std::size_t id);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The order of one epoch's indices: 0 .. n-1, or a seeded permutation.
std::vector<std::size_t> epoch_order(std::size_t n, bool shuffle, std::uint64_t seed, std::int64_t epoch);


/// Batches of a dataset (torch.utils.data.DataLoader with a map-style dataset). Each begin() starts
/// an epoch: the first is epoch 0, then 1, 2, ... (set_epoch changes the next one). A batch is
/// collate(examples) of up to batch_size examples in the epoch's order; the default collate is
/// default_collate (for Example or Tensor examples), else one must be given.
template <class DatasetT, class BatchT = typename DatasetT::ExampleType>
class DataLoader {
 public:
  using ExampleType = typename DatasetT::ExampleType;
  using Collate = std::function<BatchT(std::vector<ExampleType>)>;

  /// Holds the dataset (shared: the loader can outlive the caller's handle). Throws
  /// std::invalid_argument for invalid options or a missing collate.
  DataLoader(std::shared_ptr<const DatasetT> dataset, DataLoaderOptions options = DataLoaderOptions(),
             Collate collate = Collate())
      : dataset_(std::move(dataset)), options_(options), collate_(std::move(collate)) {
    if (!dataset_) throw std::invalid_argument("DataLoader: the dataset is null");
    if (options_.batch_size() < 1)
      throw std::invalid_argument("DataLoader: batch_size must be >= 1, got " + std::to_string(options_.batch_size()));
    if (options_.num_workers() < 0)
      throw std::invalid_argument("DataLoader: num_workers must be >= 0, got " + std::to_string(options_.num_workers()));
    if (options_.prefetch_factor() < 1)
      throw std::invalid_argument("DataLoader: prefetch_factor must be >= 1, got " + std::to_string(options_.prefetch_factor()));
    if (!collate_) {
      if constexpr (requires(std::vector<ExampleType> v) {
                      { default_collate(std::move(v)) } -> std::convertible_to<BatchT>;
                    })
        collate_ = [](std::vector<ExampleType> v) -> BatchT { return default_collate(std::move(v)); };
      else
        throw std::invalid_argument("DataLoader: no default collate for this example type: give a collate function");
    }
  }
  /// A copy of `dataset`.
  DataLoader(const DatasetT& dataset, DataLoaderOptions options = DataLoaderOptions(), Collate collate = Collate())
      : DataLoader(std::make_shared<const DatasetT>(dataset), options, std::move(collate)) {}

  /// Batches per epoch (torch's len(loader)).
  std::size_t size() const {
    const std::size_t n = dataset_->size(), b = static_cast<std::size_t>(options_.batch_size());
    return options_.drop_last() ? n / b : (n + b - 1) / b;
  }
  /// The epoch the next begin() iterates (0 at first).
  std::int64_t epoch() const { return epoch_; }
  /// Makes the next begin() iterate epoch `e` (e.g. to resume; torch's sampler.set_epoch).
  void set_epoch(std::int64_t e) { epoch_ = e; }
  const DataLoaderOptions& options() const { return options_; }
  const DatasetT& dataset() const { return *dataset_; }

  class Iterator;
  struct Sentinel {};

 private:
  struct EpochState;

 public:
  /// Starts the next epoch (and prefetching, with workers).
  Iterator begin() { return Iterator(std::make_shared<EpochState>(*this, epoch_++)); }
  Sentinel end() const { return {}; }

  /// An input iterator over one epoch's batches; *it is the current batch.
  class Iterator {
   public:
    using value_type = BatchT;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    BatchT& operator*() const { return *state_->current; }
    BatchT* operator->() const { return &*state_->current; }
    Iterator& operator++() {
      state_->advance();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const Iterator& it, Sentinel) { return !it.state_ || it.state_->done(); }

   private:
    friend class DataLoader;
    explicit Iterator(std::shared_ptr<EpochState> state) : state_(std::move(state)) {
      state_->advance();
    }
    std::shared_ptr<EpochState> state_;
  };

 private:
  /// One epoch: its order, the batch reached, and the batches loading ahead.
  struct EpochState {
    EpochState(const EpochState&) = delete;
    EpochState& operator=(const EpochState&) = delete;
    EpochState(const DataLoader& loader, std::int64_t epoch)
        : dataset(loader.dataset_), collate(loader.collate_), batch_size(static_cast<std::size_t>(loader.options_.batch_size())),
          batches(loader.size()),
          order(epoch_order(loader.dataset_->size(), loader.options_.shuffle(), loader.options_.seed(), epoch)),
          ahead(static_cast<std::size_t>(loader.options_.num_workers()) *
                static_cast<std::size_t>(loader.options_.prefetch_factor())) {
      if (loader.options_.num_workers() > 0) {
        jobs = std::make_unique<BackgroundJobs>(loader.options_.num_workers());
        slots.resize(batches);
      }
    }
    ~EpochState() { jobs.reset(); }  // waits for running loads before the slots go

    bool done() const { return next > batches; }

    BatchT load(std::size_t b) const {
      NoGradGuard no_grad;  // thread-local: set on the loading thread itself
      std::vector<ExampleType> examples;
      const std::size_t first = b * batch_size, last = std::min(order.size(), first + batch_size);
      examples.reserve(last - first);
      for (std::size_t i = first; i < last; ++i) examples.push_back(dataset->get(order[i]));
      return collate(std::move(examples));
    }

    void submit_up_to(std::size_t last) {
      for (; submitted < std::min(last, batches); ++submitted) {
        const std::size_t b = submitted;
        jobs->submit([this, b] { slots[b].emplace(load(b)); });
      }
    }

    /// Moves to batch `next` (or past the end).
    void advance() {
      current.reset();
      if (next < batches) {
        if (jobs) {
          submit_up_to(next + 1 + ahead);
          jobs->wait(next);
          current = std::move(slots[next]);
          slots[next].reset();
        } else {
          current.emplace(load(next));
        }
      }
      ++next;
    }

    std::shared_ptr<const DatasetT> dataset;
    Collate collate;
    std::size_t batch_size, batches;
    std::vector<std::size_t> order;
    std::size_t ahead;
    std::size_t next = 0, submitted = 0;
    std::optional<BatchT> current;
    std::vector<std::optional<BatchT>> slots;  // written by one job each, read after wait()
    std::unique_ptr<BackgroundJobs> jobs;
  };

  std::shared_ptr<const DatasetT> dataset_;
  DataLoaderOptions options_;
  Collate collate_;
  std::int64_t epoch_ = 0;
};

template <class DatasetT>
DataLoader(const DatasetT&, DataLoaderOptions = DataLoaderOptions()) -> DataLoader<DatasetT>;
template <class DatasetT>
DataLoader(std::shared_ptr<const DatasetT>, DataLoaderOptions = DataLoaderOptions()) -> DataLoader<DatasetT>;

}  // namespace tg::nn::data
