// Label, IndexList and SharedDocumentMask (core/op_storage.hpp, core/document_mask.hpp): the compact fields of an
// Op behave as the std::string / std::vector / DocumentMask they replace, across the inline/heap boundary, copies
// and moves; a built schedule's ops allocate nothing for them.
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "catch_compat.hpp"
#include "test_util.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/document_mask.hpp"
#include "hcpsim/core/op_storage.hpp"
#include "hcpsim/core/schedule.hpp"
#include "hcpsim/core/schedule_builder.hpp"

using namespace hcpsim;

TEST_CASE("op storage: equal label texts share one copy; the empty text is the default label", "[core][op_storage]") {
  const Label a("fwd step 17 send/recv kv");
  const std::string text = std::string("fwd step ") + std::to_string(17) + " send/recv kv";
  const Label b(text);
  REQUIRE(&a.str() == &b.str());  // interned: one copy
  REQUIRE(a == b);
  REQUIRE(a == text);
  REQUIRE(a == "fwd step 17 send/recv kv");
  REQUIRE_FALSE(a == Label("fwd step 18 send/recv kv"));
  REQUIRE(sizeof(Label) == sizeof(void*));

  const Label none;
  REQUIRE(none.empty());
  REQUIRE(none.str().empty());
  REQUIRE(Label("") == none);
  REQUIRE(Label(std::string()).empty());

  REQUIRE("recompute " + a == "recompute fwd step 17 send/recv kv");
  REQUIRE(a + " (dropped)" == "fwd step 17 send/recv kv (dropped)");
  Label c = a;
  c += " (dKV never arrives)";
  REQUIRE(c.str() == "fwd step 17 send/recv kv (dKV never arrives)");
  REQUIRE(a.str() == "fwd step 17 send/recv kv");  // the copy's append leaves the original
  const std::string& as_string = a;
  REQUIRE(as_string.size() == 24);
}

TEST_CASE("op storage: labels interned from two threads at once agree", "[core][op_storage]") {
  std::vector<const std::string*> first(2000), second(2000);
  auto intern = [](std::vector<const std::string*>& out) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = &Label("bwd step " + std::to_string(i % 500) + " lower").str();
  };
  std::thread t1(intern, std::ref(first));
  std::thread t2(intern, std::ref(second));
  t1.join();
  t2.join();
  REQUIRE(first == second);
  REQUIRE(first[0] == first[500]);
  REQUIRE(*first[3] == "bwd step 3 lower");
}

TEST_CASE("op storage: IndexList keeps four indices in place and more on the heap, as a vector would",
          "[core][op_storage]") {
  REQUIRE(sizeof(IndexList) == 24);
  IndexList deps{3, 1, 4};
  REQUIRE(deps.size() == 3);
  REQUIRE(deps == std::vector<int32_t>{3, 1, 4});
  const int32_t* inline_data = deps.data();
  deps.push_back(1);
  REQUIRE(deps.data() == inline_data);  // the fourth stays in place
  deps.push_back(5);                    // the fifth moves the list to the heap
  REQUIRE(deps.data() != inline_data);
  for (int32_t i = 0; i < 20; ++i) deps.push_back(100 + i);
  REQUIRE(deps.size() == 25);
  REQUIRE(deps[0] == 3);
  REQUIRE(deps[4] == 5);
  REQUIRE(deps.back() == 119);
  std::vector<int32_t> want{3, 1, 4, 1, 5};
  for (int32_t i = 0; i < 20; ++i) want.push_back(100 + i);
  REQUIRE(deps == want);
  REQUIRE(std::vector<int32_t>(deps.begin(), deps.end()) == want);

  IndexList copy = deps;  // heap copy
  REQUIRE(copy == deps);
  REQUIRE(copy.data() != deps.data());
  IndexList moved = std::move(copy);  // heap move: the storage travels
  REQUIRE(moved == deps);
  REQUIRE(copy.empty());  // NOLINT(bugprone-use-after-move): a moved-from list is empty
  IndexList small{7, 8};
  IndexList small_moved = std::move(small);  // inline move copies the values
  REQUIRE(small_moved == std::vector<int32_t>{7, 8});
  moved = small_moved;  // heap list assigned a short one
  REQUIRE(moved == std::vector<int32_t>{7, 8});
  small_moved = deps;  // inline list assigned a long one
  REQUIRE(small_moved == want);
  small_moved.pop_back();
  REQUIRE(small_moved.size() == 24);
  small_moved.clear();
  REQUIRE(small_moved.empty());
  small_moved.push_back(9);
  REQUIRE(small_moved == std::vector<int32_t>{9});

  const IndexList from_vector = std::vector<int32_t>{2, 7, 1, 8, 2, 8};
  REQUIRE(from_vector.size() == 6);
  REQUIRE(from_vector == IndexList{2, 7, 1, 8, 2, 8});
  REQUIRE_FALSE(from_vector == IndexList{2, 7, 1, 8, 2});
  REQUIRE(IndexList{} == std::vector<int32_t>{});
}

TEST_CASE("op storage: a block's document mask is shared by copies and absent without THD", "[core][op_storage]") {
  DocumentMask mask;
  mask.q = {TokenRun{4, 0, 0}, TokenRun{4, 1, 0}};
  mask.kv = mask.q;
  AttnFwdBlockOp a;
  REQUIRE(a.doc.empty());
  REQUIRE(a.doc.get().empty());
  a.doc = mask;
  REQUIRE_FALSE(a.doc.empty());
  const AttnFwdBlockOp b = a;
  REQUIRE(&b.doc.get() == &a.doc.get());  // shared, not copied
  REQUIRE(b.doc.get() == mask);
  REQUIRE(b.doc == a.doc);
  REQUIRE(SharedDocumentMask(DocumentMask{}).empty());  // an empty mask is held as none
}

TEST_CASE("op storage: an op of a built ring schedule carries its label, deps and message buffers compactly",
          "[core][op_storage]") {
  REQUIRE(sizeof(Op) <= 160);
  const Schedule s =
      build_schedule(CpCommType::a2a_p2p, CpLayout(2, 4, 64), test::attention_shape(1, 64, 4, 2, 8, 8, true));
  size_t sends = 0;
  for (const RankProgram& r : s.ranks)
    for (const Op& op : r.ops) {
      REQUIRE_FALSE(op.label.empty());
      for (OpIndex d : op.deps) REQUIRE((d >= 0 && d < static_cast<OpIndex>(r.ops.size())));
      if (const auto* sr = std::get_if<SendRecvOp>(&op.payload); sr != nullptr && sr->send_peer >= 0) {
        ++sends;
        REQUIRE(sr->send.size() >= 1);
        REQUIRE(sr->send.size() <= static_cast<size_t>(IndexList::kInline));  // K and V (and their grads): in place
      }
    }
  REQUIRE(sends > 0);
  // Every rank's step-1 forward exchange shares one label text.
  std::vector<const std::string*> texts;
  for (const RankProgram& r : s.ranks)
    for (const Op& op : r.ops)
      if (op.label == "fwd step 1 send/recv kv") texts.push_back(&op.label.str());
  REQUIRE(texts.size() == s.ranks.size());
  for (const std::string* t : texts) REQUIRE(t == texts.front());
}

TEST_CASE("core: numbered and prefixed labels are the labels of their text, on every thread", "[core][op_storage]") {
  CHECK(numbered_label("fwd step ", 3, " send/recv kv") == Label("fwd step 3 send/recv kv"));
  CHECK(numbered_label("fwd step ", 3, " send/recv kv").str() == "fwd step 3 send/recv kv");
  CHECK(numbered_label("fwd step ", 3, " lower") == Label("fwd step 3 lower"));  // another suffix, another site
  CHECK(numbered_label("bwd step ", 3, " lower") == Label("bwd step 3 lower"));
  CHECK(numbered_label("fwd out correction ", 12) == Label("fwd out correction 12"));
  CHECK(numbered_label("step ", -1, "x") == Label("step -1x"));  // not cached, still right
  CHECK(numbered_label("fwd step ", 3, " send/recv kv") == Label("fwd step 3 send/recv kv"));  // from the cache
  CHECK(prefixed_label("alloc ", "kv_ring3.k") == Label("alloc kv_ring3.k"));
  CHECK(prefixed_label("free ", "kv_ring3.k") == Label("free kv_ring3.k"));
  CHECK(prefixed_label("alloc ", "kv_ring3.k").str() == "alloc kv_ring3.k");
  CHECK(prefixed_label("", "x") == Label("x"));
  // Another thread has its own caches and gets the same interned labels.
  Label other_thread;
  std::thread t([&] { other_thread = numbered_label("fwd step ", 3, " send/recv kv"); });
  t.join();
  CHECK(other_thread == Label("fwd step 3 send/recv kv"));
}

TEST_CASE("core: prefixed labels of many texts are the labels of their own text", "[core][op_storage]") {
  // 20000 texts (a large ring's buffer names), each looked up twice under three prefixes, interleaved: every
  // lookup, first or repeated, must give the label of its own text, and texts that differ only in length must
  // not be confused.
  std::vector<std::string> texts;
  for (int i = 0; i < 20000; ++i) texts.push_back("kv_ring" + std::to_string(i) + (i % 3 == 0 ? ".k" : ".v"));
  texts.push_back("kv_ring1");
  texts.push_back("kv_ring1.kk");
  std::vector<Label> interned;
  for (const std::string& t : texts) interned.emplace_back(t);
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < texts.size(); ++i) {
      REQUIRE(prefixed_label("alloc ", texts[i]) == Label("alloc " + texts[i]));
      REQUIRE(prefixed_label("free ", texts[i]).str() == "free " + texts[i]);
      REQUIRE(prefixed_label_by_identity("recompute ", interned[i]) == Label("recompute " + texts[i]));
    }
  }
}
