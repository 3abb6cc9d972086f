#pragma once
/// Compact storage for the fields every op of a Schedule carries: its label and its dependency list. A large
/// simulation holds millions of ops at once (P ring steps on each of O(P) programs), so neither field allocates
/// per op in the common case: a Label points at one process-wide copy of its text, and IndexList keeps up to four
/// indices in place (docs/simulator.md "Op storage").

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace hcpsim {

/// Short human text of an op ("fwd step 1 upper"), interned: equal texts share one process-wide copy, so a
/// Label is one pointer and copying it allocates nothing. The texts are never freed (ring steps repeat a few
/// hundred distinct texts over millions of ops). Thread-safe: interning takes a lock; reading does not.
/// Comparisons with Label compare identity, which for interned texts is equality of the text.
class Label {
 public:
  Label() = default;
  /// Interns `text`; the empty text is the default Label.
  Label(std::string_view text);  // NOLINT(google-explicit-constructor): ops are labelled with string literals
  Label(const std::string& text) : Label(std::string_view(text)) {}  // NOLINT(google-explicit-constructor)
  Label(const char* text) : Label(std::string_view(text)) {}          // NOLINT(google-explicit-constructor)

  /// The text ("" for the default Label); valid for the life of the process.
  [[nodiscard]] const std::string& str() const;
  operator const std::string&() const { return str(); }  // NOLINT(google-explicit-constructor)
  [[nodiscard]] bool empty() const { return text_ == nullptr; }

  /// Appends `suffix` (interns the longer text).
  Label& operator+=(std::string_view suffix);

  friend bool operator==(const Label& a, const Label& b) { return a.text_ == b.text_; }
  friend bool operator==(const Label& a, const std::string& b) { return a.str() == b; }
  friend bool operator==(const Label& a, const char* b) { return a.str() == b; }
  friend std::string operator+(const Label& a, const std::string& b) { return a.str() + b; }
  friend std::string operator+(const std::string& a, const Label& b) { return a + b.str(); }
  friend std::string operator+(const Label& a, const char* b) { return a.str() + b; }
  friend std::string operator+(const char* a, const Label& b) { return a + b.str(); }
  friend std::ostream& operator<<(std::ostream& os, const Label& l) { return os << l.str(); }

 private:
  const std::string* text_ = nullptr;  ///< the interned text; nullptr for ""
};

/// The label "<prefix><n><suffix>" (n in decimal), interned once per thread and (prefix, suffix, n): a ring builder
/// labels step n of every rank alike ("fwd step 3 send/recv kv"), so the text is built, hashed and looked up in the
/// process-wide table (under its lock) once per thread instead of once per op. The same Label as
/// Label(prefix + std::to_string(n) + suffix) for any n, cached for n >= 0. Thread-safe (per-thread caches).
Label numbered_label(std::string_view prefix, int64_t n, std::string_view suffix = {});

/// The label "<prefix><text>", interned once per thread and (prefix, text) ("alloc kv_ring3.k", "recompute fwd
/// step 2 lower"); the same Label as Label(prefix + text). Thread-safe (per-thread caches).
Label prefixed_label(std::string_view prefix, std::string_view text);

/// prefixed_label(prefix, text.str()), looked up by the identity of the interned `text` (a pointer hash instead
/// of hashing and comparing the text): for relabelling ops that already carry a Label ("recompute " + a forward
/// ring op's label, once per recomputed op of every rank).
Label prefixed_label_by_identity(std::string_view prefix, const Label& text);

/// A short list of int32 indices in the order given: up to kInline kept in place, more on the heap. Op::deps
/// (the ops of the same program an op waits for) and SendRecvOp::send / recv (the buffers a message carries) are
/// IndexLists. Behaves as a std::vector<int32_t> for what the schedule code does with it (iterate, size,
/// push_back, clear, compare); converts implicitly from std::vector<int32_t> and from a braced list. 24 bytes,
/// as a std::vector, without the per-op allocation.
class IndexList {
 public:
  using value_type = int32_t;
  using iterator = int32_t*;
  using const_iterator = const int32_t*;
  static constexpr int32_t kInline = 4;

  IndexList() noexcept : inline_{} {}
  IndexList(std::initializer_list<int32_t> list) : IndexList() { append(list.begin(), list.size()); }
  IndexList(const std::vector<int32_t>& list) : IndexList() {  // NOLINT(google-explicit-constructor)
    append(list.data(), list.size());
  }
  IndexList(const IndexList& other) : IndexList() { append(other.data(), other.size()); }
  IndexList(IndexList&& other) noexcept : IndexList() { steal(other); }
  IndexList& operator=(const IndexList& other);
  IndexList& operator=(IndexList&& other) noexcept;
  ~IndexList() { release(); }

  [[nodiscard]] size_t size() const { return static_cast<size_t>(size_); }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  [[nodiscard]] const int32_t* data() const { return on_heap() ? heap_ : inline_; }
  [[nodiscard]] int32_t* data() { return on_heap() ? heap_ : inline_; }
  [[nodiscard]] const_iterator begin() const { return data(); }
  [[nodiscard]] const_iterator end() const { return data() + size_; }
  [[nodiscard]] iterator begin() { return data(); }
  [[nodiscard]] iterator end() { return data() + size_; }
  [[nodiscard]] int32_t operator[](size_t i) const { return data()[i]; }
  [[nodiscard]] int32_t back() const { return data()[size_ - 1]; }

  void push_back(int32_t index) { append(&index, 1); }
  void pop_back() { --size_; }  ///< precondition: not empty
  void clear() { size_ = 0; }

  friend bool operator==(const IndexList& a, const IndexList& b);
  friend bool operator==(const IndexList& a, const std::vector<int32_t>& b);

 private:
  [[nodiscard]] bool on_heap() const { return capacity_ > kInline; }
  void append(const int32_t* first, size_t count);
  void release();
  void steal(IndexList& other) noexcept;

  int32_t size_ = 0;
  int32_t capacity_ = kInline;
  union {
    int32_t inline_[kInline];
    int32_t* heap_;
  };
};

}  // namespace hcpsim
