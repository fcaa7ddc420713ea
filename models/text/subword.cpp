// SentencePiece subword models; see subword.h.
#include "models/text/subword.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#ifdef TG_HAVE_SENTENCEPIECE
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#endif

namespace tg::models {

const char* to_string(SubwordType type) { return type == SubwordType::kBpe ? "bpe" : "unigram"; }

SubwordType parse_subword_type(const std::string& name, const std::string& what) {
  if (name == "unigram") return SubwordType::kUnigram;
  if (name == "bpe") return SubwordType::kBpe;
  throw std::invalid_argument(what + ": expected unigram or bpe, got '" + name + "'");
}

#ifdef TG_HAVE_SENTENCEPIECE

struct SubwordModel::Impl {
  std::string bytes;
  sentencepiece::SentencePieceProcessor processor;
};

namespace {

// Feeds the training sentences from memory (no temporary file).
class VectorIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<std::string>& s) : s_(s) {}
  bool done() const override { return i_ >= s_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return s_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& s_;
  std::size_t i_ = 0;
};

}  // namespace

bool SubwordModel::available() { return true; }

SubwordModel SubwordModel::train(const std::vector<std::string>& sentences, const SubwordOptions& options) {
  if (options.vocab_size() < 8)
    throw std::invalid_argument("subword: vocab_size must be >= 8, got " + std::to_string(options.vocab_size()));
  if (sentences.empty()) throw std::invalid_argument("subword: no training sentences");
  std::ostringstream args;
  // input_sentence_size=0: every sentence (no random sample); hard_vocab_limit=false: a small
  // corpus gets fewer pieces rather than an error; num_threads=1: same model on every machine.
  args << "--model_type=" << to_string(options.type()) << " --vocab_size=" << options.vocab_size()
       << " --input_sentence_size=0 --hard_vocab_limit=false --num_threads=1 --minloglevel=2"
       << " --max_sentence_length=65536";
  VectorIterator it(sentences);
  std::string bytes;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args.str(), &it, &bytes);
  if (!status.ok()) throw std::runtime_error(std::string("subword: SentencePiece training failed: ") + status.ToString());
  return from_bytes(std::move(bytes), "subword training");
}

SubwordModel SubwordModel::from_bytes(std::string bytes, const std::string& source) {
  auto impl = std::make_shared<Impl>();
  impl->bytes = std::move(bytes);
  const auto status = impl->processor.LoadFromSerializedProto(impl->bytes);
  if (!status.ok())
    throw std::runtime_error(source + ": not a valid SentencePiece model (" + status.ToString() + ")");
  SubwordModel m;
  m.impl_ = std::move(impl);
  return m;
}

std::vector<std::string> SubwordModel::encode(const std::string& sentence) const {
  // Through ids, so a character the model does not cover comes out as its unknown piece ("<unk>",
  // which is also the vocabularies' reserved <unk>) rather than as the character itself.
  std::vector<int> ids;
  const auto status = impl_->processor.Encode(sentence, &ids);
  if (!status.ok()) throw std::runtime_error("subword: cannot encode '" + sentence + "': " + status.ToString());
  std::vector<std::string> pieces;
  pieces.reserve(ids.size());
  for (int id : ids) pieces.push_back(impl_->processor.IdToPiece(id));
  return pieces;
}

std::string SubwordModel::decode(const std::vector<std::string>& pieces) const {
  std::string text;
  const auto status = impl_->processor.Decode(pieces, &text);
  if (!status.ok()) throw std::runtime_error("subword: cannot decode: " + status.ToString());
  return text;
}

bool SubwordModel::has_piece(const std::string& piece) const {
  const int id = impl_->processor.PieceToId(piece);
  return !impl_->processor.IsUnknown(id) || piece == impl_->processor.IdToPiece(id);
}

std::int64_t SubwordModel::size() const { return impl_->processor.GetPieceSize(); }

#else  // no SentencePiece in this build

struct SubwordModel::Impl {
  std::string bytes;
};

namespace {
[[noreturn]] void unavailable(const std::string& what) {
  throw std::runtime_error(what + ": this build of tapegrad has no SentencePiece (install libsentencepiece-dev and "
                                  "rebuild)");
}
}  // namespace

bool SubwordModel::available() { return false; }
SubwordModel SubwordModel::train(const std::vector<std::string>&, const SubwordOptions&) { unavailable("subword"); }
SubwordModel SubwordModel::from_bytes(std::string, const std::string& source) { unavailable(source); }
std::vector<std::string> SubwordModel::encode(const std::string&) const { unavailable("subword"); }
std::string SubwordModel::decode(const std::vector<std::string>&) const { unavailable("subword"); }
bool SubwordModel::has_piece(const std::string&) const { unavailable("subword"); }
std::int64_t SubwordModel::size() const { unavailable("subword"); }

#endif

SubwordModel SubwordModel::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::ostringstream buf;
  buf << in.rdbuf();
  return from_bytes(buf.str(), path);
}

TokenizedPairs encode_pairs(const std::vector<SentencePair>& pairs, const SubwordModel& model) {
  TokenizedPairs out;
  out.src.reserve(pairs.size());
  out.tgt.reserve(pairs.size());
  for (const auto& p : pairs) {
    out.src.push_back(model.encode(p.src));
    out.tgt.push_back(model.encode(p.tgt));
  }
  return out;
}

const std::string& SubwordModel::bytes() const { return impl_->bytes; }

void SubwordModel::save(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(path + ": cannot open for writing");
  out << impl_->bytes;
  out.close();
  if (!out) throw std::runtime_error(path + ": write failed");
}

}  // namespace tg::models
