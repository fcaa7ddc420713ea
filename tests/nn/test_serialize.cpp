// .npz checkpoints: round trips, NumPy interoperability both ways, strict loading, corrupt files,
// and saves that never destroy the previous file.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "../autograd/error_of.h"
#include "deadline.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/random.h"
#include "nn/module.h"
#include "nn/file_io.h"
#include "nn/serialize.h"
#include "test_modules.h"

namespace {

namespace fs = std::filesystem;
using tg::DType;
using tg::Generator;
using tg::Tensor;
using tg::nn::load_npz;
using tg::nn::save_npz;
using tg::nn::testing::Mlp;
using tg::testing::error_of;

/// A fresh directory per test, removed afterwards.
class Serialize : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tg_nn_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::vector<std::string> listing() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  static bool have_numpy() {
    static const bool ok = std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
    return ok;
  }
  /// Runs a Python script; returns its exit code.
  int python(const std::string& script) const {
    const std::string file = path("script.py");
    std::ofstream(file) << script;
    return WEXITSTATUS(std::system(("/usr/bin/python3 " + file).c_str()));
  }
  static std::string read_bytes(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  static void write_bytes(const std::string& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
  }
  fs::path dir_;
};

std::vector<std::pair<std::string, Tensor>> sample_entries(Generator& gen) {
  return {{"encoder.embedding.weight", Tensor::normal({10, 4}, 0, 1, gen)},
          {"b", Tensor::from_vector(std::vector<float>{1.5f, -2.25f, 3e-8f}, {3})},
          {"scalar", Tensor::scalar(0.1f)},
          {"optimizer.step", Tensor::scalar(12345678901234LL, DType::i64)},
          {"ids", Tensor::from_vector(std::vector<std::int64_t>{-1, 0, 1LL << 40}, {3, 1})},
          {"empty", Tensor::zeros({0, 3})},
          {"deep", Tensor::uniform({2, 1, 3, 1, 2}, -1, 1, gen)}};
}

TEST_F(Serialize, RoundTripIsBitwiseForFloat32AndInt64) {
  Generator gen(11);
  const auto entries = sample_entries(gen);
  save_npz(path("a.npz"), entries);
  const auto loaded = load_npz(path("a.npz"));
  ASSERT_EQ(loaded.size(), entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& [name, t] = entries[i];
    EXPECT_EQ(loaded[i].first, name);
    const Tensor& u = loaded[i].second;
    EXPECT_EQ(u.shape(), t.shape()) << name;
    ASSERT_EQ(u.dtype(), t.dtype()) << name;
    const std::size_t bytes = static_cast<std::size_t>(t.numel()) * tg::dtype_size(t.dtype());
    if (bytes == 0) continue;
    if (t.dtype() == DType::f32) {
      EXPECT_EQ(std::memcmp(u.data<float>(), t.data<float>(), bytes), 0) << name;
    } else {
      EXPECT_EQ(std::memcmp(u.data<std::int64_t>(), t.data<std::int64_t>(), bytes), 0) << name;
    }
  }
  EXPECT_EQ(loaded[3].second.to_vector<std::int64_t>()[0], 12345678901234LL);
}

TEST_F(Serialize, Float64IsWrittenAsFloat32) {
  // 3e38 is in float32's range; just above FLT_MAX still rounds to FLT_MAX, not to inf.
  const double above_max = std::nextafter(static_cast<double>(std::numeric_limits<float>::max()), INFINITY);
  const std::vector<double> values{0.1, -1.0 / 3.0, 3e38, 2.5, above_max, INFINITY, -INFINITY, NAN};
  save_npz(path("d.npz"), {{"x", Tensor::from_vector(values, {2, 4})}});
  const auto loaded = load_npz(path("d.npz"));
  ASSERT_EQ(loaded[0].second.dtype(), DType::f32);
  const auto got = loaded[0].second.to_vector<float>();
  ASSERT_EQ(got.size(), values.size());
  for (std::size_t i = 0; i + 1 < values.size(); ++i) EXPECT_EQ(got[i], static_cast<float>(values[i])) << i;
  EXPECT_EQ(got[4], std::numeric_limits<float>::max());
  EXPECT_EQ(got[5], INFINITY);  // inf and NaN are float32 values: saved as they are
  EXPECT_EQ(got[6], -INFINITY);
  EXPECT_TRUE(std::isnan(got[7]));
}

// A finite float64 beyond float32's range would load back as inf: refused, naming the file and the
// entry, before anything is written (no new file, an existing one untouched, no temporary left).
TEST_F(Serialize, Float64BeyondFloat32IsRefusedBeforeWriting) {
  const Tensor ok = Tensor::from_vector(std::vector<double>{1, 2}, {2});
  const Tensor big = Tensor::from_vector(std::vector<double>{0.1, -1.0 / 3.0, 1e300, 2.5}, {2, 2});
  EXPECT_EQ(error_of<std::runtime_error>([&] { save_npz(path("d.npz"), {{"ok", ok}, {"x", big}}); }),
            "save_npz " + path("d.npz") + ": entry 'x' value 1e+300 (element 2) overflows float32");
  EXPECT_FALSE(fs::exists(path("d.npz")));
  EXPECT_TRUE(listing().empty());

  save_npz(path("d.npz"), {{"ok", ok}});
  const std::string before = read_bytes(path("d.npz"));
  const Tensor negative = Tensor::from_vector(std::vector<double>{-1e300}, {1});
  EXPECT_EQ(error_of<std::runtime_error>([&] { save_npz(path("d.npz"), {{"ok", ok}, {"y", negative}}); }),
            "save_npz " + path("d.npz") + ": entry 'y' value -1e+300 (element 0) overflows float32");
  EXPECT_EQ(read_bytes(path("d.npz")), before);
  EXPECT_EQ(listing(), std::vector<std::string>{"d.npz"});
}

TEST_F(Serialize, NpyEncodeRefusesFloat64BeyondFloat32) {
  // npy_encode is public (the CLI writes attention matrices with it): the range check is its own,
  // not only save_npz's.
  const Tensor big = Tensor::from_vector(std::vector<double>{0.5, 1e39}, {1, 2});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::nn::npy_encode(big); }),
            "npy_encode: [1, 2] float64 tensor: value 1e+39 (element 1) overflows float32");
  const Tensor special = Tensor::from_vector(
      std::vector<double>{std::numeric_limits<double>::infinity(), std::nan(""), 3.4e38}, {3});
  const Tensor back = tg::nn::npy_decode(tg::nn::npy_encode(special), "t");
  EXPECT_TRUE(std::isinf(back.to_vector<float>()[0]));
  EXPECT_TRUE(std::isnan(back.to_vector<float>()[1]));
  EXPECT_EQ(back.to_vector<float>()[2], 3.4e38f);
}

TEST_F(Serialize, NpyHeaderIsNumpyLayout) {
  const std::string npy = tg::nn::npy_encode(Tensor::zeros({2, 3}));
  ASSERT_GE(npy.size(), 10u);
  EXPECT_EQ(npy.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  std::uint16_t header_len;
  std::memcpy(&header_len, npy.data() + 8, 2);
  EXPECT_EQ((10 + header_len) % 64, 0);  // data 64-byte aligned, as numpy writes
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(npy.substr(10, dict.size()), dict);
  EXPECT_EQ(npy.substr(10 + dict.size(), header_len - dict.size() - 1), std::string(header_len - dict.size() - 1, ' '));
  EXPECT_EQ(npy[10 + header_len - 1], '\n');
  EXPECT_EQ(npy.size(), 10u + header_len + 24u);
  EXPECT_NE(tg::nn::npy_encode(Tensor::zeros({7})).find("'shape': (7,)"), std::string::npos);
  EXPECT_NE(tg::nn::npy_encode(Tensor::scalar(1)).find("'shape': ()"), std::string::npos);
}

TEST_F(Serialize, NpyDecodeRejectsBadInput) {
  const std::string good = tg::nn::npy_encode(Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(tg::nn::npy_decode(good, "t").to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));

  std::string bad_magic = good;
  bad_magic[1] = 'X';
  EXPECT_EQ(error_of([&] { tg::nn::npy_decode(bad_magic, "f.npz: entry 'w'"); }),
            "f.npz: entry 'w': not a .npy array (bad magic)");
  std::string bad_version = good;
  bad_version[6] = 9;
  EXPECT_NE(error_of([&] { tg::nn::npy_decode(bad_version, "w"); }).find("unsupported .npy format version 9.0"),
            std::string::npos);
  const std::string short_data = good.substr(0, good.size() - 3);
  EXPECT_NE(error_of([&] { tg::nn::npy_decode(short_data, "w"); }).find("data is 13 bytes but the header"),
            std::string::npos);
  EXPECT_NE(error_of([&] { tg::nn::npy_decode(good + "xx", "w"); }).find("data is 18 bytes"), std::string::npos);
  EXPECT_NE(error_of([&] { tg::nn::npy_decode(good.substr(0, 40), "w"); }).find("header truncated"),
            std::string::npos);
  std::string big_endian = good;
  big_endian.replace(big_endian.find("<f4"), 3, ">f4");
  EXPECT_NE(error_of([&] { tg::nn::npy_decode(big_endian, "w"); }).find("unsupported dtype '>f4'"),
            std::string::npos);
  std::string fortran = good;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_NE(error_of([&] { tg::nn::npy_decode(fortran, "w"); }).find("fortran_order=True is not supported"),
            std::string::npos);
  std::string garbage = good;
  garbage.replace(garbage.find("'shape'"), 7, "'shope'");
  EXPECT_NE(error_of([&] { tg::nn::npy_decode(garbage, "w"); }).find("bad .npy header"), std::string::npos);
}

TEST_F(Serialize, NumpyReadsOurFiles) {
  if (!have_numpy()) GTEST_SKIP() << "/usr/bin/python3 with numpy not available";
  save_npz(path("ours.npz"),
           {{"encoder.rnn.weight_ih_l0", Tensor::arange(0, 6).to(DType::f32)},
            {"w64", Tensor::from_vector(std::vector<double>{0.1, 0.2}, {2, 1})},
            {"optimizer.step", Tensor::scalar(7, DType::i64)},
            {"s", Tensor::scalar(2.5)}});
  const int rc = python(R"(
import numpy as np, sys
z = np.load(")" + path("ours.npz") + R"(")
assert z.files == ['encoder.rnn.weight_ih_l0', 'w64', 'optimizer.step', 's'], z.files
a = z['encoder.rnn.weight_ih_l0']
assert a.dtype == np.float32 and a.shape == (6,) and (a == np.arange(6, dtype=np.float32)).all(), a
b = z['w64']
assert b.dtype == np.float32 and b.shape == (2, 1) and (b[:, 0] == np.array([0.1, 0.2], np.float32)).all(), b
c = z['optimizer.step']
assert c.dtype == np.int64 and c.shape == () and c == 7, c
assert z['s'].shape == () and z['s'] == np.float32(2.5)
)");
  EXPECT_EQ(rc, 0);
}

TEST_F(Serialize, LoadsFilesWrittenByNumpy) {
  if (!have_numpy()) GTEST_SKIP() << "/usr/bin/python3 with numpy not available";
  // As a converted PyTorch state_dict would be: np.savez(path, **{k: v.numpy()}); plus a version 2.0
  // entry, a compressed archive, and a Fortran-order array that must be refused.
  const int rc = python(R"(
import numpy as np, zipfile, io
d = ")" + dir_.string() + R"("
sd = {'encoder.embedding.weight': np.arange(12, dtype=np.float32).reshape(3, 4) / 8,
      'decoder.dense.bias': np.array([1.0, -2.0, 1e-300], dtype=np.float64),
      'optimizer.step': np.array(42, dtype=np.int64)}
np.savez(d + '/np.npz', **sd)
np.savez_compressed(d + '/npc.npz', **sd)
with zipfile.ZipFile(d + '/v2.npz', 'w') as zf:
    buf = io.BytesIO(); np.lib.format.write_array(buf, np.array([[1.5, 2.5]], np.float32), version=(2, 0))
    zf.writestr('w.npy', buf.getvalue())
with zipfile.ZipFile(d + '/fortran.npz', 'w') as zf:
    buf = io.BytesIO(); np.lib.format.write_array(buf, np.asfortranarray(np.ones((2, 3), np.float32)))
    zf.writestr('w.npy', buf.getvalue())
with zipfile.ZipFile(d + '/short.npz', 'w') as zf:
    buf = io.BytesIO(); np.lib.format.write_array(buf, np.ones((4, 4), np.float32))
    zf.writestr('w.npy', buf.getvalue()[:-10])
with zipfile.ZipFile(d + '/notnpy.npz', 'w') as zf:
    zf.writestr('w.npy', b'hello, this is not an array')
)");
  ASSERT_EQ(rc, 0);
  for (const char* file : {"np.npz", "npc.npz"}) {
    const auto loaded = load_npz(path(file));
    ASSERT_EQ(loaded.size(), 3u) << file;
    EXPECT_EQ(loaded[0].first, "encoder.embedding.weight");
    EXPECT_EQ(loaded[0].second.dtype(), DType::f32);
    EXPECT_EQ(loaded[0].second.shape(), (tg::Shape{3, 4}));
    EXPECT_EQ(loaded[0].second.at({2, 3}), 11.0 / 8);
    EXPECT_EQ(loaded[1].first, "decoder.dense.bias");
    EXPECT_EQ(loaded[1].second.dtype(), DType::f64);
    EXPECT_EQ(loaded[1].second.to_vector<double>(), (std::vector<double>{1.0, -2.0, 1e-300}));
    EXPECT_EQ(loaded[2].second.dtype(), DType::i64);
    EXPECT_EQ(loaded[2].second.shape(), tg::Shape{});
    EXPECT_EQ(loaded[2].second.to_vector<std::int64_t>()[0], 42);
  }
  const auto v2 = load_npz(path("v2.npz"));
  EXPECT_EQ(v2[0].second.to_vector<float>(), (std::vector<float>{1.5f, 2.5f}));
  EXPECT_EQ(v2[0].second.shape(), (tg::Shape{1, 2}));

  const std::string fortran = error_of([&] { load_npz(path("fortran.npz")); });
  EXPECT_NE(fortran.find(path("fortran.npz")), std::string::npos) << fortran;
  EXPECT_NE(fortran.find("entry 'w.npy'"), std::string::npos) << fortran;
  EXPECT_NE(fortran.find("fortran_order=True is not supported"), std::string::npos) << fortran;
  const std::string shortened = error_of([&] { load_npz(path("short.npz")); });
  EXPECT_NE(shortened.find("entry 'w.npy'"), std::string::npos) << shortened;
  EXPECT_NE(shortened.find("(truncated)"), std::string::npos) << shortened;
  const std::string notnpy = error_of([&] { load_npz(path("notnpy.npz")); });
  EXPECT_NE(notnpy.find("entry 'w.npy': not a .npy array (bad magic)"), std::string::npos) << notnpy;

  // A float64 module with the same hierarchy loads the PyTorch-style entries, converting dtypes.
  struct Leaf : tg::nn::Module {
    Leaf(const char* name, tg::Shape shape) { register_parameter(name, Tensor::zeros(shape, DType::f64)); }
  };
  struct Side : tg::nn::Module {
    Side(const char* child, const char* name, tg::Shape shape) {
      register_module(child, std::make_shared<Leaf>(name, shape));
    }
  };
  tg::nn::Module model;
  model.register_module("encoder", std::make_shared<Side>("embedding", "weight", tg::Shape{3, 4}));
  model.register_module("decoder", std::make_shared<Side>("dense", "bias", tg::Shape{3}));
  auto loaded = load_npz(path("np.npz"));
  loaded.pop_back();  // optimizer.step belongs to the optimizer
  model.load_state_dict(loaded, "np.npz");
  EXPECT_EQ(model.parameter("encoder.embedding.weight").dtype(), DType::f64);
  EXPECT_EQ(model.parameter("encoder.embedding.weight").at({1, 2}), 6.0 / 8);
  EXPECT_EQ(model.parameter("decoder.dense.bias").to_vector<double>(), (std::vector<double>{1.0, -2.0, 1e-300}));
}

TEST_F(Serialize, ModuleSaveLoadRoundTripAndDtypeConversion) {
  Generator gen(12);
  Mlp a(3, 4, 2, gen), b(3, 4, 2, gen);
  a.save(path("m.npz"));
  b.load(path("m.npz"));
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  for (std::size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(pa[i].second.to_vector<float>(), pb[i].second.to_vector<float>()) << pa[i].first;
  EXPECT_TRUE(pb[0].second.requires_grad());

  // A float64 model saves float32 and loads it back converted.
  Mlp c(3, 4, 2, gen);
  c.to(DType::f64);
  c.load(path("m.npz"));
  EXPECT_EQ(c.fc1->weight.dtype(), DType::f64);
  EXPECT_EQ(c.fc1->weight.to_vector<float>(), a.fc1->weight.to_vector<float>());
  c.save(path("c.npz"));
  EXPECT_EQ(load_npz(path("c.npz"))[0].second.dtype(), DType::f32);
}

TEST_F(Serialize, ModuleLoadListsEveryProblemAndChangesNothing) {
  Generator gen(13);
  Mlp model(4, 3, 2, gen);
  auto entries = model.named_parameters();
  // Drop fc2.bias, add "foo", give fc1.weight a wrong shape.
  entries.pop_back();
  entries.emplace_back("foo", Tensor::zeros({1}));
  entries[0].second = Tensor::zeros({5, 4});
  save_npz(path("model.npz"), entries);

  std::vector<std::vector<float>> before;
  for (const auto& p : model.parameters()) before.push_back(p.to_vector<float>());
  const std::string msg = error_of([&] { model.load(path("model.npz")); });
  EXPECT_EQ(msg, "load " + path("model.npz") +
                     ": missing: [fc2.bias]; unexpected: [foo]; shape mismatch: [fc1.weight: file [5, 4] vs model [3, 4]]");
  // fc1.bias and fc2.weight were loadable, but nothing may be half-loaded.
  const auto params = model.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) EXPECT_EQ(params[i].to_vector<float>(), before[i]);
  EXPECT_THROW(model.load(path("model.npz")), std::runtime_error);
}

TEST_F(Serialize, TruncatedOrCorruptFilesAreRefused) {
  Generator gen(14);
  const auto entries = sample_entries(gen);
  save_npz(path("good.npz"), entries);
  const std::string bytes = read_bytes(path("good.npz"));

  write_bytes(path("half.npz"), bytes.substr(0, bytes.size() / 2));
  const std::string half = error_of([&] { load_npz(path("half.npz")); });
  EXPECT_NE(half.find("load_npz " + path("half.npz") + ": cannot open as a zip archive"), std::string::npos) << half;

  write_bytes(path("empty.npz"), "");
  EXPECT_THROW(load_npz(path("empty.npz")), std::runtime_error);
  EXPECT_NE(error_of([&] { load_npz(path("missing.npz")); }).find(path("missing.npz")), std::string::npos);

  // Flip one byte inside the first array's data: the zip CRC check names the entry.
  const auto magic = bytes.find("\x93NUMPY");
  ASSERT_NE(magic, std::string::npos);
  std::uint16_t header_len;
  std::memcpy(&header_len, bytes.data() + magic + 8, 2);
  std::string flipped = bytes;
  flipped[magic + 10 + header_len + 5] ^= 0x40;
  write_bytes(path("flipped.npz"), flipped);
  const std::string crc = error_of([&] { load_npz(path("flipped.npz")); });
  EXPECT_NE(crc.find(path("flipped.npz") + ": entry 'encoder.embedding.weight.npy'"), std::string::npos) << crc;

  // Module::load reports the same and leaves the model untouched.
  Mlp model(2, 2, 1, gen);
  const auto w = model.fc1->weight.to_vector<float>();
  EXPECT_THROW(model.load(path("half.npz")), std::runtime_error);
  EXPECT_EQ(model.fc1->weight.to_vector<float>(), w);
}

/// Peak resident memory of this process so far, in MiB.
double peak_rss_mib() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

/// Sets a 4-byte little-endian field at `offset` of every zip header with `signature`.
void patch_zip_headers(std::string& bytes, const std::string& signature, std::size_t offset, std::uint32_t value) {
  for (std::size_t at = bytes.find(signature); at != std::string::npos; at = bytes.find(signature, at + 4))
    std::memcpy(bytes.data() + at + offset, &value, 4);
}

TEST_F(Serialize, SizeClaimsAreCheckedBeforeAnyMemoryIsCommitted) {
  save_npz(path("small.npz"), {{"x", Tensor::full({4}, 1.0)}});
  const std::string bytes = read_bytes(path("small.npz"));
  const std::string local("PK\x03\x04", 4), central("PK\x01\x02", 4);
  constexpr std::uint32_t kClaim = 0xF0000000u;  // 3.75 GiB from a file of a few hundred bytes

  std::string stored = bytes;  // uncompressed size fields of the local and central headers
  patch_zip_headers(stored, local, 22, kClaim);
  patch_zip_headers(stored, central, 24, kClaim);
  write_bytes(path("stored.npz"), stored);

  std::string deflated = stored;  // the same claim for a "deflated" entry: beyond 1032:1
  patch_zip_headers(deflated, local, 8, 8);
  patch_zip_headers(deflated, central, 10, 8);
  write_bytes(path("deflated.npz"), deflated);

  const double before = peak_rss_mib();
  for (const char* name : {"stored.npz", "deflated.npz"}) {
    const std::string msg = error_of([&] { load_npz(path(name)); });
    EXPECT_NE(msg.find(path(name) + ": entry 'x.npy'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("claims 4026531840 bytes"), std::string::npos) << msg;
    EXPECT_LE(msg.substr(0, msg.find('\n')).size(), 200u) << msg;
  }
  EXPECT_LT(peak_rss_mib() - before, 64.0) << "memory was committed from the size claim";
}

TEST_F(Serialize, SaveReplacesAtomicallyAndLeavesNoTemporaries) {
  save_npz(path("ckpt.npz"), {{"x", Tensor::full({3}, 1.0)}});
  save_npz(path("ckpt.npz"), {{"x", Tensor::full({3}, 2.0)}, {"y", Tensor::zeros({1})}});
  EXPECT_EQ(listing(), (std::vector<std::string>{"ckpt.npz"}));
  const auto loaded = load_npz(path("ckpt.npz"));
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded[0].second.to_vector<float>(), (std::vector<float>{2, 2, 2}));
  // An empty archive is still a valid (and loadable) file.
  save_npz(path("none.npz"), {});
  EXPECT_TRUE(load_npz(path("none.npz")).empty());
}

TEST_F(Serialize, FailedSaveThrowsAndKeepsThePreviousFile) {
  const std::string nowhere = path("no/such/dir/x.npz");
  const std::string msg = error_of([&] { save_npz(nowhere, {{"x", Tensor::zeros({2})}}); });
  EXPECT_NE(msg.find("save_npz " + nowhere), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;

  // The target is a directory: refused before a temporary is made; the directory survives untouched.
  fs::create_directories(path("busy.npz"));
  std::ofstream(path("busy.npz/keep")) << "old";
  const std::string rename = error_of([&] { save_npz(path("busy.npz"), {{"x", Tensor::zeros({2})}}); });
  EXPECT_EQ(rename, "save_npz " + path("busy.npz") + ": " + path("busy.npz") + ": is a directory, cannot write a file there");
  EXPECT_EQ(listing(), (std::vector<std::string>{"busy.npz"}));
  EXPECT_EQ(read_bytes(path("busy.npz/keep")), "old");

  // Bad entries are refused before anything is written.
  save_npz(path("prev.npz"), {{"x", Tensor::full({2}, 3.0)}});
  EXPECT_THROW(save_npz(path("prev.npz"), {{"x", Tensor::zeros({2})}, {"x", Tensor::zeros({2})}}),
               std::runtime_error);
  EXPECT_THROW(save_npz(path("prev.npz"), {{"u", Tensor()}}), std::runtime_error);
  EXPECT_EQ(load_npz(path("prev.npz"))[0].second.to_vector<float>(), (std::vector<float>{3, 3}));
  EXPECT_EQ(listing(), (std::vector<std::string>{"busy.npz", "prev.npz"}));
}

TEST_F(Serialize, ReadOnlyDirectoryKeepsThePreviousFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: permissions do not stop writes";
  save_npz(path("ro.npz"), {{"x", Tensor::full({2}, 5.0)}});
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
  EXPECT_THROW(save_npz(path("ro.npz"), {{"x", Tensor::zeros({2})}}), std::runtime_error);
  fs::permissions(dir_, fs::perms::owner_all);
  EXPECT_EQ(load_npz(path("ro.npz"))[0].second.to_vector<float>(), (std::vector<float>{5, 5}));
  EXPECT_EQ(listing(), (std::vector<std::string>{"ro.npz"}));
}

TEST_F(Serialize, LoadRefusesAFifoADirectoryAndAnArchiveAboveTheLimitBeforeOpeningIt) {
  const std::string fifo = path("fifo.npz");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(tg::testing::error_within(
                10, "load_npz of a FIFO", [&] { load_npz(fifo); }, [&] { tg::testing::unblock_fifo_reader(fifo); }),
            "load_npz " + fifo + ": is a FIFO, not a regular file");
  EXPECT_EQ(error_of([&] { load_npz(dir_.string()); }), "load_npz " + dir_.string() + ": is a directory, not a regular file");
  // A sparse file one byte above io::limits::kArchive (64 GiB): refused by its size, nothing read.
  const std::string big = path("big.npz");
  std::ofstream(big) << "PK";
  fs::resize_file(big, tg::nn::io::limits::kArchive + 1);
  EXPECT_EQ(error_of([&] { load_npz(big); }),
            "load_npz " + big + ": is 68719476737 bytes, above the limit of 64 GiB for this kind of file (refused "
            "before reading it)");
}

}  // namespace
