#include <gtest/gtest.h>

#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <filesystem>
#include <csignal>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../test_dirs.h"
#include "../../autograd/error_of.h"
#include "../../nn/deadline.h"
#include "nn/file_io.h"
#include "autograd/ops_elementwise.h"
#include "models/text/text.h"

using namespace tg::models;
namespace fs = std::filesystem;

namespace {

using Tokens = std::vector<std::string>;

fs::path temp_dir() { return tg::models::testing::per_test_dir("tg_text", false); }

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// Runs `fn`, expects a std::runtime_error whose message contains every one of `parts`.
template <class Fn>
void expect_error_containing(Fn fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no exception thrown";
  } catch (const std::runtime_error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

}  // namespace

TEST(Text, PreprocessMatchesD2l) {
  // d2l prints "go .\tva !\nhi .\tsalut !\nrun !\tcours !..." for the start of fra.txt.
  EXPECT_EQ(preprocess_nmt("Go.\tVa !"), "go .\tva !");
  EXPECT_EQ(preprocess_nmt("Run!\tCours\u202F!"), "run !\tcours !");
  EXPECT_EQ(preprocess_nmt("Wow!\t\u00C7a alors\u00A0!"), "wow !\tça alors !");
  // Values from d2l's Python preprocess_nmt: a space before each , . ! ? not after a space, the
  // previous *input* character decides ("!!" → " ! !"), never at index 0, double spaces kept.
  EXPECT_EQ(preprocess_nmt("Wait!!"), "wait ! !");
  EXPECT_EQ(preprocess_nmt(".A,b  c."), ".a ,b  c .");
  EXPECT_EQ(preprocess_nmt("TIẾNG VIỆT. ĐI!"), "tiếng việt . đi !");
  EXPECT_EQ(preprocess_nmt(""), "");
}

TEST(Text, UnicodeLowerCase) {
  EXPECT_EQ(to_lower_utf8("À BIENTÔT"), "à bientôt");
  EXPECT_EQ(to_lower_utf8("ÉTÉ"), "été");
  EXPECT_EQ(to_lower_utf8("Đi ĐÂU"), "đi đâu");
  EXPECT_EQ(to_lower_utf8("ẠẢẤẦẨẪẬ Ỹ"), "ạảấầẩẫậ ỹ");
  EXPECT_EQ(to_lower_utf8("ÇA ÖL ß"), "ça öl ß");
  // Simple (1:1) case mapping: capital sigma is always σ, unlike Python's context-dependent "ς".
  EXPECT_EQ(to_lower_utf8("ΣΟΦΙΑ"), "σοφια");
  EXPECT_EQ(to_lower_utf8("ПРИВЕТ"), "привет");
  EXPECT_EQ(to_lower_utf8("abc 123 ,.!?\t"), "abc 123 ,.!?\t");
  EXPECT_EQ(to_lower_utf8("日本 😀"), "日本 😀");
}

TEST(Text, Utf8Validation) {
  EXPECT_EQ(find_invalid_utf8("plain ça 😀"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("ab\xC3\x28"), 2u);         // bad continuation byte
  EXPECT_EQ(find_invalid_utf8("\xC0\xAF"), 0u);           // overlong '/'
  EXPECT_EQ(find_invalid_utf8("x\xED\xA0\x80"), 1u);      // UTF-16 surrogate
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);   // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("\xE2\x82"), 0u);           // truncated
  EXPECT_EQ(find_invalid_utf8("\x80"), 0u);               // lone continuation byte
  EXPECT_THROW(preprocess_nmt("Go\xFF."), std::invalid_argument);
  EXPECT_EQ(utf8_encode(utf8_decode("Việt 😀 \u202F")), "Việt 😀 \u202F");
  EXPECT_EQ(utf8_decode("é😀"), (std::u32string{U'\u00E9', U'\U0001F600'}));
}

TEST(Text, SplitAndTokenizeLikePython) {
  // Python: 'a  b'.split(' ') == ['a', '', 'b'], ''.split(' ') == [''].
  EXPECT_EQ(split_on_space("a  b"), (Tokens{"a", "", "b"}));
  EXPECT_EQ(split_on_space(""), (Tokens{""}));
  EXPECT_EQ(split_on_space(" a "), (Tokens{"", "a", ""}));
  EXPECT_EQ(tokenize_nmt("go ."), (Tokens{"go", "."}));
  EXPECT_EQ(tokenize_nmt("a  b"), (Tokens{"a", "", "b"}));  // d2l keeps the empty token
  EXPECT_EQ(tokenize_nmt(""), Tokens{});                     // documented deviation from d2l's {""}
}

TEST(Text, VocabOrderingTiesAndMinFreq) {
  // Checked with d2l's Vocab in Python: counts b2 a2 c2 <eos>3 d1 e1 ''1.
  const std::vector<Tokens> corpus{{"b", "a", "c", "<eos>"}, {"a", "b", "d", "<eos>"}, {"c", "e", "<eos>", ""}};
  const Vocab all = Vocab::build(corpus, 1);
  EXPECT_EQ(all.tokens(), (Tokens{"<unk>", "<pad>", "<bos>", "<eos>", "b", "a", "c", "d", "e", ""}));
  const Vocab v = Vocab::build(corpus);  // default min_freq = 2
  EXPECT_EQ(v.tokens(), (Tokens{"<unk>", "<pad>", "<bos>", "<eos>", "b", "a", "c"}));
  EXPECT_EQ(v.size(), 7);
  EXPECT_EQ(v["<eos>"], Vocab::kEos);
  EXPECT_EQ(v["a"], 5);
  EXPECT_EQ(v["d"], Vocab::kUnk);
  EXPECT_EQ(v["never seen"], Vocab::kUnk);
  EXPECT_EQ(v.ids({"c", "zz", "b"}), (std::vector<std::int64_t>{6, 0, 4}));
  EXPECT_EQ(v.to_tokens({4, 5, 3, 1}), (Tokens{"b", "a", "<eos>", "<pad>"}));
  EXPECT_THROW(v.token(7), std::out_of_range);
  EXPECT_THROW(v.to_tokens({-1}), std::out_of_range);
  EXPECT_EQ(Vocab().size(), 4);
  EXPECT_THROW(Vocab::build(corpus, -1), std::invalid_argument);
}

TEST(Text, VocabFromTokensValidates) {
  EXPECT_EQ(Vocab::from_tokens({"<unk>", "<pad>", "<bos>", "<eos>", "x"})["x"], 4);
  EXPECT_THROW(Vocab::from_tokens({"<pad>", "<unk>", "<bos>", "<eos>"}), std::invalid_argument);
  EXPECT_THROW(Vocab::from_tokens({"<unk>", "<pad>"}), std::invalid_argument);
  EXPECT_THROW(Vocab::from_tokens({"<unk>", "<pad>", "<bos>", "<eos>", "x", "x"}), std::invalid_argument);
}

TEST(Text, VocabSaveLoadRoundTrip) {
  const fs::path dir = temp_dir();
  // Includes the empty token (from a double space) and non-ASCII tokens.
  const Vocab v = Vocab::build({{"ça", "", "va", "ça"}, {"", "va", "à"}}, 1);
  ASSERT_TRUE(v.contains(""));
  const std::string path = (dir / "vocab.txt").string();
  v.save(path);
  const Vocab loaded = Vocab::load(path);
  EXPECT_EQ(loaded, v);
  EXPECT_EQ(loaded[""], v[""]);
  EXPECT_EQ(loaded["à"], v["à"]);
  // A token with a newline cannot be saved one per line; nothing is written.
  const std::string bad = (dir / "bad.txt").string();
  EXPECT_THROW(Vocab::from_tokens({"<unk>", "<pad>", "<bos>", "<eos>", "a\nb"}).save(bad), std::runtime_error);
  EXPECT_FALSE(fs::exists(bad));
  fs::remove_all(dir);
}

TEST(Text, VocabLoadErrorsNameTheFile) {
  const fs::path dir = temp_dir();
  const std::string empty = (dir / "empty.txt").string();
  write_file(empty, "");
  expect_error_containing([&] { Vocab::load(empty); }, {empty, "empty vocabulary file"});

  const std::string missing = (dir / "missing.txt").string();
  expect_error_containing([&] { Vocab::load(missing); }, {missing, "cannot open"});

  const std::string wrong = (dir / "wrong.txt").string();
  write_file(wrong, "<unk>\n<pad>\nhello\n<eos>\n");
  expect_error_containing([&] { Vocab::load(wrong); }, {wrong + ":3:", "<bos>"});

  const std::string shortf = (dir / "short.txt").string();
  write_file(shortf, "<unk>\n<pad>\n");
  expect_error_containing([&] { Vocab::load(shortf); }, {shortf, "fewer than the 4 reserved tokens"});

  const std::string dup = (dir / "dup.txt").string();
  write_file(dup, "<unk>\n<pad>\n<bos>\n<eos>\nx\ny\nx\n");
  expect_error_containing([&] { Vocab::load(dup); }, {dup + ":7:", "duplicate token 'x'"});

  const std::string bad = (dir / "bad.txt").string();
  write_file(bad, "<unk>\n<pad>\n<bos>\n<eos>\n\xFF\n");
  expect_error_containing([&] { Vocab::load(bad); }, {bad + ":5:", "invalid UTF-8"});
  fs::remove_all(dir);
}

// A vocabulary file is read only if it is a regular file within nn::io::limits::kVocabulary, line
// by line within kLineBytes, and a read error is an error, not the end of the file (before, a read
// error gave "empty vocabulary file" or a vocabulary cut short, and a FIFO blocked forever).
TEST(Text, VocabLoadRefusesFifosOversizedFilesLongLinesAndReadErrors) {
  const fs::path dir = temp_dir();
  using tg::testing::error_of;
  const std::string fifo = (dir / "fifo_vocab.txt").string();
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(tg::testing::error_within(10, "Vocab::load of a FIFO", [&] { Vocab::load(fifo); },
                                      [&] { tg::testing::unblock_fifo_reader(fifo); }),
            fifo + ": is a FIFO, not a regular file");
  // Sparse: 65 MiB of size, nothing on disk, nothing read.
  const std::string big = (dir / "big_vocab.txt").string();
  write_file(big, "<unk>\n");
  fs::resize_file(big, tg::nn::io::limits::kVocabulary + (1 << 20));
  EXPECT_EQ(error_of([&] { Vocab::load(big); }),
            big + ": is 68157440 bytes, above the limit of 64 MiB for this kind of file (refused before reading it)");
  const std::string long_line = (dir / "long_vocab.txt").string();
  write_file(long_line, "<unk>\n<pad>\n<bos>\n<eos>\n" + std::string(tg::nn::io::limits::kLineBytes + 1, 'x') + "\n");
  EXPECT_EQ(error_of([&] { Vocab::load(long_line); }), long_line + ":5: line longer than the limit of 1048576 bytes");
  // /proc/self/mem is a regular file whose first read fails (EIO).
  EXPECT_EQ(error_of([&] { Vocab::load("/proc/self/mem"); }), "/proc/self/mem:1: read error (Input/output error)");
  EXPECT_EQ(error_of([&] { Vocab::load(dir.string()); }), dir.string() + ": is a directory, not a regular file");
  fs::remove_all(dir);
}

// The limit holds real vocabularies: 200,000 tokens of up to 40 bytes load (8 MB).
TEST(Text, VocabOf200000TokensLoads) {
  const fs::path dir = temp_dir();
  std::vector<std::string> tokens = Vocab::reserved_tokens();
  for (int i = 0; i < 200000; ++i) tokens.push_back("token_" + std::to_string(i) + std::string(i % 30, 'x'));
  const Vocab v = Vocab::from_tokens(tokens);
  const std::string path = (dir / "big.txt").string();
  v.save(path);
  EXPECT_EQ(Vocab::load(path), v);
  fs::remove_all(dir);
}

// Vocab::save replaces the file atomically: a failed write leaves the previous vocabulary whole.
TEST(Text, FailedVocabSaveLeavesThePreviousFile) {
  const fs::path dir = temp_dir();
  const std::string path = (dir / "atomic_vocab.txt").string();
  const Vocab small = Vocab::build({{"a", "b"}}, 1);
  small.save(path);
  std::vector<std::string> tokens = Vocab::reserved_tokens();
  for (int i = 0; i < 2000; ++i) tokens.push_back("t" + std::to_string(i));
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit limit = saved;
  limit.rlim_cur = 4096;  // the big vocabulary needs about 12 KB: write(2) fails with EFBIG
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  const std::string error = tg::testing::error_of([&] { Vocab::from_tokens(tokens).save(path); });
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(error.rfind(path + ": write error", 0), 0u) << error;
  EXPECT_EQ(Vocab::load(path), small);
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find("atomic_vocab.txt.tmp-"), std::string::npos) << e.path();
  fs::remove_all(dir);
}

// Vocab::save writes only what Vocab::load reads back: a token above the line limit, or a file
// above kVocabulary, is refused before anything is written (before, it was saved and the load failed).
TEST(Text, VocabSaveRefusesWhatItsLoaderWouldRefuse) {
  const fs::path dir = temp_dir();
  const std::string path = (dir / "refused_vocab.txt").string();
  const std::string line(tg::nn::io::limits::kLineBytes + 1, 'x');
  EXPECT_EQ(tg::testing::error_of([&] { Vocab::from_tokens({"<unk>", "<pad>", "<bos>", "<eos>", line}).save(path); }),
            path + ": cannot save token 4: 1048577 bytes, above the line limit of 1048576 that Vocab::load reads");
  std::vector<std::string> tokens = Vocab::reserved_tokens();
  for (int i = 0; i < 65; ++i) tokens.push_back(std::to_string(i) + std::string(tg::nn::io::limits::kLineBytes - 3, 'y'));
  EXPECT_EQ(tg::testing::error_of([&] { Vocab::from_tokens(tokens).save(path); }),
            path + ": cannot save 69 tokens: the file would be above the limit of 64 MiB that Vocab::load reads");
  EXPECT_FALSE(fs::exists(path));
  tokens.resize(4 + 63);  // 63 MiB: saved and loaded
  Vocab::from_tokens(tokens).save(path);
  EXPECT_EQ(Vocab::load(path).size(), 67);
  fs::remove_all(dir);
}
