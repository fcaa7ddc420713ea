// Deterministic, leak-free train/dev/test split of sentence pairs; see split.h.
#include "models/text/split.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "nn/file_io.h"

namespace tg::models {

std::uint64_t sentence_hash(const std::string& text, std::uint64_t seed) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  h ^= seed * 0x9e3779b97f4a7c15ULL;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

namespace {

struct UnionFind {
  std::vector<std::size_t> parent;
  explicit UnionFind(std::size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  std::size_t find(std::size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  }
  void unite(std::size_t a, std::size_t b) {
    a = find(a), b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
};

}  // namespace

CorpusSplit split_corpus(const std::vector<SentencePair>& pairs, const CorpusSplitOptions& options) {
  const auto n = static_cast<std::int64_t>(pairs.size());
  if (options.test() < 0 || options.dev() < 0)
    throw std::invalid_argument("split_corpus: test and dev sizes must be >= 0");
  if (options.test() + options.dev() > n)
    throw std::invalid_argument("split_corpus: test " + std::to_string(options.test()) + " + dev " +
                                std::to_string(options.dev()) + " pairs exceed the corpus (" + std::to_string(n) +
                                " pairs)");
  // Link pairs sharing a source or a target sentence.
  UnionFind groups(pairs.size());
  std::unordered_map<std::string, std::size_t> first_src, first_tgt;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    if (auto [it, fresh] = first_src.emplace(pairs[i].src, i); !fresh) groups.unite(it->second, i);
    if (auto [it, fresh] = first_tgt.emplace(pairs[i].tgt, i); !fresh) groups.unite(it->second, i);
  }
  // Each group's key: the smallest (hash, sentence) over its source sentences.
  struct Group {
    std::uint64_t hash = ~0ULL;
    const std::string* src = nullptr;
    std::int64_t size = 0;
  };
  std::unordered_map<std::size_t, Group> by_root;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    Group& g = by_root[groups.find(i)];
    const std::uint64_t h = sentence_hash(pairs[i].src, options.seed());
    if (!g.src || h < g.hash || (h == g.hash && pairs[i].src < *g.src)) {
      g.hash = h;
      g.src = &pairs[i].src;
    }
    ++g.size;
  }
  std::vector<std::pair<std::size_t, Group>> order(by_root.begin(), by_root.end());
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.second.hash != b.second.hash) return a.second.hash < b.second.hash;
    return *a.second.src < *b.second.src;  // distinct groups never share a source sentence
  });
  enum Part : char { kTrain, kDev, kTest };
  std::unordered_map<std::size_t, Part> part_of;
  std::int64_t test_left = options.test(), dev_left = options.dev();
  for (const auto& [root, g] : order) {
    Part p = kTrain;
    if (g.size <= test_left) {
      p = kTest;
      test_left -= g.size;
    } else if (g.size <= dev_left) {
      p = kDev;
      dev_left -= g.size;
    }
    part_of[root] = p;
  }
  CorpusSplit out;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const Part p = part_of.at(groups.find(i));
    (p == kTest ? out.test : p == kDev ? out.dev : out.train).push_back(pairs[i]);
  }
  return out;
}

std::vector<SentencePair> reverse_pairs(std::vector<SentencePair> pairs) {
  for (auto& p : pairs) std::swap(p.src, p.tgt);
  return pairs;
}

std::vector<std::string> write_corpus_split(const CorpusSplit& split, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(dir + ": cannot create directory: " + ec.message());
  std::vector<std::string> written;
  auto write = [&](const std::string& name, auto&& line_of, const std::vector<SentencePair>& part) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    std::string text;
    for (const auto& p : part) text.append(line_of(p)).append(1, '\n');
    nn::io::write_file_atomic(path, text);  // whole or not at all; an existing file stays until then
    written.push_back(path);
  };
  const std::pair<const char*, const std::vector<SentencePair>*> parts[] = {
      {"train", &split.train}, {"dev", &split.dev}, {"test", &split.test}};
  for (const auto& [name, part] : parts) {
    const std::string base = name;
    write(base + ".tsv", [](const SentencePair& p) { return p.src + '\t' + p.tgt; }, *part);
    write(base + ".src.txt", [](const SentencePair& p) { return p.src; }, *part);
    write(base + ".ref.txt", [](const SentencePair& p) { return p.tgt; }, *part);
  }
  return written;
}

}  // namespace tg::models
