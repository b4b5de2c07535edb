// base/core/block_cache.hpp: blocks freed on a thread come back to that
// thread's next allocation, up to kKeptBlocks; other threads and larger
// requests go to the heap.
#include <catch2/catch.hpp>

#include <memory>
#include <thread>
#include <vector>

#include "base/core/block_cache.hpp"

namespace {

struct Record {
  int values[40];
};

}  // namespace

TEST_CASE("block cache: a freed block is this thread's next one, up to the bound", "[unit]") {
  if (chorus::kKeptBlocks == 0) {
    SUCCEED("nothing is kept in this build (AddressSanitizer)");
    return;
  }
  chorus::CachingAllocator<Record> alloc;
  Record* a = alloc.allocate(1);
  alloc.deallocate(a, 1);
  CHECK(alloc.allocate(1) == a);  // kept, and taken again

  // Another thread keeps its own: it does not get this thread's block.
  alloc.deallocate(a, 1);
  Record* other = nullptr;
  std::thread([&] {
    chorus::CachingAllocator<Record> theirs;
    other = theirs.allocate(1);
    theirs.deallocate(other, 1);  // freed with the thread's cache at exit
  }).join();
  CHECK(other != a);
  CHECK(alloc.allocate(1) == a);

  // Past the bound, blocks go back to the heap: the newest kept ones come
  // back last in, first out, and the cache then runs dry.
  std::vector<Record*> blocks{a};
  while (blocks.size() < chorus::kKeptBlocks + 10) blocks.push_back(alloc.allocate(1));
  for (Record* b : blocks) alloc.deallocate(b, 1);
  CHECK(alloc.allocate(1) == blocks[chorus::kKeptBlocks - 1]);
  std::vector<Record*> again{blocks[chorus::kKeptBlocks - 1]};
  for (std::size_t i = 1; i < chorus::kKeptBlocks; ++i) again.push_back(alloc.allocate(1));
  CHECK(again.back() == blocks.front());
  for (Record* b : again) alloc.deallocate(b, 1);

  // Arrays are not kept.
  Record* array = alloc.allocate(3);
  alloc.deallocate(array, 3);
  CHECK(alloc.allocate(1) != array);
}

TEST_CASE("block cache: allocate_shared through it", "[unit]") {
  auto first = std::allocate_shared<Record>(chorus::CachingAllocator<Record>());
  first->values[0] = 7;
  const void* where = first.get();
  first.reset();
  auto second = std::allocate_shared<Record>(chorus::CachingAllocator<Record>());
  if (chorus::kKeptBlocks > 0) CHECK(second.get() == where);
  CHECK(second->values[0] == 0);  // value-initialised again
}
