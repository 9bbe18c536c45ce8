#include "launcher/jobwide/node_items.hpp"

#include <fmt/format.h>

namespace dlaunch::launcher {

namespace {

std::string NodeName(int node_rank, const std::string& host) { return fmt::format("node {} ({})", node_rank, host); }

}  // namespace

std::string RankSpan(int first, int n) {
  if (n == 1) return fmt::format("rank {}", first);
  return fmt::format("ranks {}-{}", first, int64_t{first} + n - 1);  // a peer's numbers: no int overflow
}

Status NodeItemCheck::Take(int64_t rank) {
  if (rank < first_rank_ || rank >= int64_t{first_rank_} + nproc_)
    return Status::InvalidArgument(fmt::format("rank {} is not one of its {}", rank, RankSpan(first_rank_, nproc_)));
  if (!seen_.insert(rank).second) return Status::InvalidArgument(fmt::format("rank {} comes twice", rank));
  return Status::Ok();
}

void NodeItemCheck::Refuse(std::size_t index, const std::string& why) {
  if (refused_++ == 0) first_ = fmt::format("item {}: {}", index, why);
}

std::string NodeItemCheck::RefusedLine(const ItemWords& words) const {
  if (refused_ == 0) return "";
  return fmt::format("{}: {} item{} of its {} {} not a {} ({})", NodeName(node_rank_, host_), refused_,
                     refused_ == 1 ? "" : "s", words.answer, refused_ == 1 ? "is" : "are", words.item, first_);
}

std::string UnansweredLine(const rendezvous::NodeStacks& node, const ItemWords& words) {
  std::string span = RankSpan(node.first_rank, node.nproc);
  if (words.unanswered.empty())
    return fmt::format("{}, {}: {}", NodeName(node.node_rank, node.host), span, node.problem);
  return fmt::format("{}, {}: {} ({})", NodeName(node.node_rank, node.host), span, words.unanswered, node.problem);
}

}  // namespace dlaunch::launcher
