#pragma once
// Checkpoints as NumPy .npz files: a zip archive with one "<name>.npy" entry per tensor, in order.
// They cross between C++ and Python both ways:
//
//   z = numpy.load("model.npz"); z["encoder.embedding.weight"]            # read in Python
//   numpy.savez("m.npz", **{k: v.numpy() for k, v in model.state_dict().items()})  # PyTorch -> us
//
// Floating tensors are written as float32 ('<f4') even when they are float64 in memory (the
// checkpoint format does not depend on whether a model was being gradchecked); i64 tensors (step
// counters) as '<i8'; bool tensors (masks) as '|b1'. Reading accepts '<f4', '<f8', '<i8' and
// '|b1', C order only, .npy versions 1.0 and 2.0, stored or deflated entries.
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace tg::nn {

/// Writes `entries` to `path` as .npz. The archive is written to `path + ".tmp-XXXXXX"`, flushed
/// to disk and renamed over `path`, so an interrupted or failed save never destroys an existing
/// checkpoint. Throws std::runtime_error naming the file on any failure (nothing is left behind),
/// among them a finite float64 value beyond float32's range, which would read back as inf (checked
/// before anything is written).
void save_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& entries);

/// Reads every entry of the .npz at `path`, in archive order, with the dtype stored in the file
/// (f32, f64, i64 or b8). A file that is not a readable zip, an entry that is not a valid C-order .npy,
/// or data shorter/longer than its header says is refused with a std::runtime_error naming the
/// file and the entry.
std::vector<std::pair<std::string, Tensor>> load_npz(const std::string& path);

/// The .npy bytes of one tensor (header version 1.0, or 2.0 if the header needs it; floating
/// tensors as '<f4'). Throws std::invalid_argument for a float64 tensor holding a finite value
/// beyond float32's range (it would read back as inf).
std::string npy_encode(const Tensor& tensor);

/// Parses .npy bytes; `what` names the source in error messages (e.g. "model.npz: entry 'w'").
Tensor npy_decode(std::string_view bytes, const std::string& what);

/// Problems found while checking entries against what a loader expects, reported all at once:
/// throw_if_any() raises one std::runtime_error "HEADER: missing: [a, b]; shape mismatch: [c: ...]"
/// listing every non-empty section, so a failed load says everything that is wrong. When that list
/// is long, the first line holds the counts ("HEADER: 3 missing, 1000 unexpected") and each section
/// follows on its own line with its first 8 items.
struct LoadReport {
  std::deque<std::pair<std::string, std::vector<std::string>>> sections;  ///< (title, items); a deque so
                                                                         ///< section() references stay valid
  std::vector<std::string>& section(const std::string& title);
  void throw_if_any(const std::string& header) const;
};

}  // namespace tg::nn
