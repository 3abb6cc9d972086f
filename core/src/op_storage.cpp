#include "hcpsim/core/op_storage.hpp"

#include <algorithm>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace hcpsim {

namespace {

/// The interned texts. Node-based, so a text's address never changes; never iterated (nothing reaches an
/// output through its order) and never destroyed (a Label may be read during static destruction).
struct LabelTable {
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::mutex mutex;
  std::unordered_set<std::string, Hash, std::equal_to<>> texts;
};

LabelTable& label_table() {
  static auto* table = new LabelTable;  // intentionally not destroyed
  return *table;
}

const std::string& empty_text() {
  static const std::string empty;
  return empty;
}

}  // namespace

Label::Label(std::string_view text) {
  if (text.empty()) return;
  LabelTable& t = label_table();
  const std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.texts.find(text);
  if (it == t.texts.end()) it = t.texts.emplace(text).first;
  text_ = &*it;
}

namespace {

/// One call site's numbered labels: by_n[n] is "<prefix><n><suffix>" once made.
struct NumberedSite {
  std::string prefix;
  std::string suffix;
  std::vector<Label> by_n;
};

/// One prefix's labels by text.
struct PrefixedSite {
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::string prefix;
  std::unordered_map<std::string, Label, Hash, std::equal_to<>> by_text;  // never iterated
};

}  // namespace

Label numbered_label(std::string_view prefix, int64_t n, std::string_view suffix) {
  if (n < 0) return Label(std::string(prefix) + std::to_string(n) + std::string(suffix));
  // A handful of call sites per builder: a linear search, starting with the last one hit.
  thread_local std::vector<NumberedSite> sites;
  thread_local size_t last = 0;
  if (last >= sites.size() || sites[last].prefix != prefix || sites[last].suffix != suffix) {
    last = 0;
    while (last < sites.size() && (sites[last].prefix != prefix || sites[last].suffix != suffix)) ++last;
    if (last == sites.size()) sites.push_back(NumberedSite{std::string(prefix), std::string(suffix), {}});
  }
  NumberedSite& site = sites[last];
  const auto i = static_cast<size_t>(n);
  if (i >= site.by_n.size()) site.by_n.resize(i + 1);
  if (site.by_n[i].empty()) site.by_n[i] = Label(site.prefix + std::to_string(n) + site.suffix);
  return site.by_n[i];
}

namespace {

/// The site of `prefix` among `sites` (a handful per builder: a linear search), added when new.
template <typename Site>
Site& site_of(std::vector<Site>& sites, std::string_view prefix) {
  for (Site& s : sites)
    if (s.prefix == prefix) return s;
  return sites.emplace_back(Site{std::string(prefix), {}});
}

/// One prefix's labels by the identity of the interned text they prefix.
struct LabelSite {
  std::string prefix;
  std::unordered_map<const std::string*, Label> by_text;  // never iterated
};

}  // namespace

Label prefixed_label(std::string_view prefix, std::string_view text) {
  thread_local std::vector<PrefixedSite> sites;
  PrefixedSite& site = site_of(sites, prefix);
  auto it = site.by_text.find(text);
  if (it == site.by_text.end()) it = site.by_text.emplace(std::string(text), Label(site.prefix + std::string(text))).first;
  return it->second;
}

Label prefixed_label_by_identity(std::string_view prefix, const Label& text) {
  thread_local std::vector<LabelSite> sites;
  LabelSite& site = site_of(sites, prefix);
  const std::string* key = &text.str();
  auto it = site.by_text.find(key);
  if (it == site.by_text.end()) it = site.by_text.emplace(key, prefixed_label(prefix, std::string_view(*key))).first;
  return it->second;
}

const std::string& Label::str() const { return text_ == nullptr ? empty_text() : *text_; }

Label& Label::operator+=(std::string_view suffix) {
  if (!suffix.empty()) *this = Label(str() + std::string(suffix));
  return *this;
}

IndexList& IndexList::operator=(const IndexList& other) {
  if (this != &other) {
    size_ = 0;
    append(other.data(), other.size());
  }
  return *this;
}

IndexList& IndexList::operator=(IndexList&& other) noexcept {
  if (this != &other) {
    release();
    steal(other);
  }
  return *this;
}

void IndexList::append(const int32_t* first, size_t count) {
  const size_t needed = size() + count;
  if (needed > static_cast<size_t>(capacity_)) {
    const size_t capacity = std::max<size_t>(needed, 2 * static_cast<size_t>(capacity_));
    auto* grown = new int32_t[capacity];
    std::copy(data(), data() + size_, grown);
    release();
    heap_ = grown;
    capacity_ = static_cast<int32_t>(capacity);
  }
  std::copy(first, first + count, data() + size_);
  size_ = static_cast<int32_t>(needed);
}

void IndexList::release() {
  if (on_heap()) delete[] heap_;
  capacity_ = kInline;
}

void IndexList::steal(IndexList& other) noexcept {
  size_ = other.size_;
  capacity_ = other.capacity_;
  if (other.on_heap()) {
    heap_ = other.heap_;
  } else {
    std::copy(other.inline_, other.inline_ + other.size_, inline_);
  }
  other.size_ = 0;
  other.capacity_ = kInline;
}

bool operator==(const IndexList& a, const IndexList& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

bool operator==(const IndexList& a, const std::vector<int32_t>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

}  // namespace hcpsim
