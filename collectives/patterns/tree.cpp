#include "collectives/patterns/tree.hpp"

#include <algorithm>

#include "base/core/error.hpp"

namespace chorus::patterns {

TreeNode binomial_node(int rank, int size, int root) {
  TreeNode node;
  const int v = mod(rank - root, size);
  const int lowest = v == 0 ? size : (v & -v);  // the root has every bit "below" it
  for (int step = 1; step < lowest && v + step < size; step <<= 1)
    node.children.push_back(mod(v + step + root, size));
  if (v != 0) node.parent = mod(v - lowest + root, size);
  return node;
}

TreeNode btree_node(int rank, int size) {
  CHORUS_CHECK(size > 0 && rank >= 0 && rank < size, "rank {} of {}", rank, size);
  TreeNode node;
  int bit = 1;
  while (bit < size && !(bit & rank)) bit <<= 1;
  if (rank == 0) {
    if (size > 1) node.children.push_back(bit >> 1);
    return node;
  }
  node.parent = (rank ^ bit) | (bit << 1);
  if (node.parent >= size) node.parent = rank ^ bit;
  const int low = bit >> 1;
  if (low > 0) node.children.push_back(rank - low);
  for (int step = low; step > 0; step >>= 1) {
    if (rank + step < size) {
      node.children.push_back(rank + step);
      break;
    }
  }
  return node;
}

TreeNode dtree_node(int rank, int size, int tree) {
  CHORUS_CHECK(tree == 0 || tree == 1, "tree {}", tree);
  if (tree == 0) return btree_node(rank, size);
  // Tree 1: rank plays `as` in tree 0; `back` maps tree 0's ranks to tree 1's.
  const bool mirror = size % 2 == 0;
  const int as = mirror ? size - 1 - rank : mod(rank - 1, size);
  auto back = [&](int v) { return mirror ? size - 1 - v : mod(v + 1, size); };
  TreeNode node = btree_node(as, size);
  if (node.parent >= 0) node.parent = back(node.parent);
  for (int& c : node.children) c = back(c);
  std::sort(node.children.begin(), node.children.end());
  return node;
}

int dtree_root(int size, int tree) {
  if (tree == 0 || size == 1) return 0;
  return size % 2 == 0 ? size - 1 : 1;
}

std::vector<Range> ranges_of(const std::size_t* counts, int parts) {
  std::vector<Range> out(static_cast<std::size_t>(parts));
  std::size_t offset = 0;
  for (int r = 0; r < parts; ++r) {
    out[static_cast<std::size_t>(r)] = {offset, counts[r]};
    offset += counts[r];
  }
  return out;
}

}  // namespace chorus::patterns
