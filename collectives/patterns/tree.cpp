#include "collectives/patterns/tree.hpp"

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
