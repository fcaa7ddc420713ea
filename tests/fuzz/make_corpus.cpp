// Writes the seed corpora of tests/fuzz/corpus/ from the library's own writers (the CSV log and
// the sentence pairs are small hand-written files, kept in the repository as they are):
//   build/bin/fuzz_make_corpus tests/fuzz/corpus
// Overwrites the files it writes; everything else in the corpora is left alone.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "fuzz_util.h"
#include "models/text/subword.h"
#include "models/text/text.h"
#include "models/training/checkpoint.h"
#include "models/translators/seq2seq.h"
#include "nn/serialize.h"

namespace fs = std::filesystem;
using namespace tg;
using namespace tg::models;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void put(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  fuzz::write_bytes(dir / name, bytes);
}

Tensor iota(const Shape& shape, DType dtype) {
  Tensor t = Tensor::zeros(shape, dtype);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::i64) t.data<std::int64_t>()[i] = i - 2;
    else t.data<float>()[i] = 0.5f * static_cast<float>(i) - 1.0f;
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_corpus CORPUS_DIR\n");
    return 2;
  }
  const fs::path root(argv[1]);
  const fs::path tmp = fuzz::scratch_dir();

  // .npy: f32 matrix, i64 vector, 0-d scalar, empty.
  put(root / "npy", "f32_2x3.npy", nn::npy_encode(iota(Shape{2, 3}, DType::f32)));
  put(root / "npy", "i64_4.npy", nn::npy_encode(iota(Shape{4}, DType::i64)));
  put(root / "npy", "f32_scalar.npy", nn::npy_encode(iota(Shape{}, DType::f32)));
  put(root / "npy", "f32_0x3.npy", nn::npy_encode(iota(Shape{0, 3}, DType::f32)));

  // .npz (save_npz stores entries; a deflated seed written by NumPy sits beside these).
  nn::save_npz((tmp / "a.npz").string(), {{"w", iota(Shape{2, 3}, DType::f32)}, {"step", iota(Shape{1}, DType::i64)}});
  put(root / "npz", "two_entries.npz", read_all(tmp / "a.npz"));
  nn::save_npz((tmp / "b.npz").string(), {{"encoder.embedding.weight", iota(Shape{3}, DType::f32)}});
  put(root / "npz", "one_entry.npz", read_all(tmp / "b.npz"));

  // Vocabularies and checkpoints of two tiny models.
  const Vocab src = Vocab::build({{"go", "."}, {"i", "lost", "."}, {"he's", "calm", "."}}, 1);
  const Vocab tgt = Vocab::build({{"va", "!"}, {"j'ai", "perdu", "."}, {"il", "est", "calme", "."}}, 1);
  src.save((tmp / "v.txt").string());
  put(root / "vocab", "src_vocab.txt", read_all(tmp / "v.txt"));
  Vocab().save((tmp / "v.txt").string());
  put(root / "vocab", "reserved_only.txt", read_all(tmp / "v.txt"));

  for (const std::string kind : {"d2l", "rnnsearch", "rnnencdec"}) {
    ModelConfig c;
    c.model = kind;
    c.src_vocab = src.size();
    c.tgt_vocab = tgt.size();
    c.embed_size = 3;
    c.num_hiddens = 2;
    c.num_layers = kind == "d2l" ? 2 : 1;
    c.num_steps = 4;
    put(root / "config_json", kind + ".json", config_to_json(c));
    if (kind == "rnnencdec") continue;
    Generator gen(1);
    auto model = make_model(c, gen);
    TrainingState st;
    st.step = 3;
    st.epoch = 1;
    st.batch_size = 2;
    st.lr = 0.005;
    st.run.data = "fuzz seed";
    const fs::path dir = tmp / ("ck_" + kind);
    save_checkpoint(dir.string(), *model, src, tgt, nullptr, &st);
    // With the manifest (its digests hold only while the files are unchanged) and without it
    // (older checkpoints; the fuzzer can change every file).
    for (bool manifest : {true, false}) {
      std::string packed;
      for (std::size_t i = 0; i < std::size(fuzz::kCheckpointFiles); ++i) {
        const std::string name = fuzz::kCheckpointFiles[i];
        if (name == "manifest.json" && !manifest) break;
        if (i) packed += fuzz::kFileSeparator;
        packed += read_all(dir / name);
      }
      put(root / "checkpoint", kind + (manifest ? "_manifest" : "_no_manifest"), packed);
    }
  }
  put(root / "config_json", "empty_object.json", "{}\n");
  // tokenizer.model: small unigram and BPE models (SentencePiece builds only).
  if (SubwordModel::available()) {
    const std::vector<std::string> sentences{"Go.", "Hi.", "Run!", "I see.", "Il fait beau.", "Je vois.",
                                             "Where is the station?", "Où est la gare ?"};
    for (const SubwordType type : {SubwordType::kUnigram, SubwordType::kBpe})
      put(root / "tokenizer", std::string(to_string(type)) + ".model",
          SubwordModel::train(sentences, SubwordOptions().vocab_size(40).type(type)).bytes());
  }
  std::printf("fuzz_make_corpus: wrote seeds under %s\n", root.c_str());
  return 0;
}
