// The communication layer at 1-4 ranks: byte collectives with payloads of
// different sizes per rank, and the exception-robust steps.

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "comm/comm.hpp"
#include "h5dcp/error.hpp"
#include "test_support.hpp"

namespace h5dcp::detail {
namespace {

// Rank r's payload: r+1 copies of the letter 'a'+r (rank 0 sends one byte).
Bytes payload(int rank) { return Bytes(static_cast<std::size_t>(rank) * 3 + 1, static_cast<char>('a' + rank)); }

TEST(Comm, DuplicatesTheCommunicatorAndKnowsItsPlace) {
  Comm comm(MPI_COMM_WORLD);
  EXPECT_EQ(comm.rank(), test::world_rank());
  EXPECT_EQ(comm.size(), test::world_size());
  EXPECT_TRUE(comm.distributed());
  int same = MPI_UNEQUAL;
  MPI_Comm_compare(comm.raw(), MPI_COMM_WORLD, &same);
  EXPECT_EQ(same, MPI_CONGRUENT);  // a duplicate, not WORLD itself
  Comm moved(std::move(comm));
  EXPECT_FALSE(comm.distributed());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_EQ(moved.size(), test::world_size());
}

TEST(Comm, RefusesACoordinatorOutsideTheCommunicator) {
  EXPECT_THROW(Comm(MPI_COMM_WORLD, test::world_size()), UsageError);
  EXPECT_THROW(Comm(MPI_COMM_WORLD, -1), UsageError);
}

TEST(Comm, ByteCollectivesCarryUnevenPayloads) {
  const int last = test::world_size() - 1;
  Comm comm(MPI_COMM_WORLD, last);  // a coordinator other than 0 where possible
  Bytes data = comm.is_coordinator() ? Bytes("from the coordinator") : Bytes();
  comm.broadcast(data);
  EXPECT_EQ(data, "from the coordinator");

  const auto gathered = comm.gather(payload(comm.rank()));
  if (comm.is_coordinator()) {
    ASSERT_EQ(gathered.size(), static_cast<std::size_t>(comm.size()));
    for (int r = 0; r < comm.size(); ++r) EXPECT_EQ(gathered[r], payload(r));
  } else {
    EXPECT_TRUE(gathered.empty());
  }

  const auto all = comm.all_gather(payload(comm.rank()));
  ASSERT_EQ(all.size(), static_cast<std::size_t>(comm.size()));
  for (int r = 0; r < comm.size(); ++r) EXPECT_EQ(all[r], payload(r));

  std::vector<Bytes> parts;
  if (comm.is_coordinator())
    for (int r = 0; r < comm.size(); ++r) parts.push_back(payload(r) + "!");
  EXPECT_EQ(comm.scatter(parts), payload(comm.rank()) + "!");
}

TEST(Comm, StepsReturnResultsWhenNothingFails) {
  Comm comm(MPI_COMM_WORLD);
  const auto sum = comm.all_reduce(
      "sum", [&] { return std::to_string(comm.rank() + 1); },
      [](std::vector<Bytes> all) {
        int total = 0;
        for (const auto& a : all) total += std::stoi(a);
        return std::to_string(total);
      });
  const int n = comm.size();
  EXPECT_EQ(sum, std::to_string(n * (n + 1) / 2));

  const auto mine = comm.reduce_scatter(
      "reverse", [&] { return std::to_string(comm.rank()); },
      [](std::vector<Bytes> all) {
        std::reverse(all.begin(), all.end());
        return all;
      });
  EXPECT_EQ(mine, std::to_string(n - 1 - comm.rank()));

  const auto everyone = comm.all_gather("ranks", [&] { return payload(comm.rank()); });
  for (int r = 0; r < n; ++r) EXPECT_EQ(everyone[r], payload(r));

  EXPECT_EQ(comm.broadcast("hello", [] { return Bytes("hi"); }), "hi");
}

// The CheckpointError every rank must see.
using test::expect_checkpoint_error;

TEST(Comm, AFailingMapBecomesTheSameErrorOnEveryRank) {
  Comm comm(MPI_COMM_WORLD);
  const int bad = comm.size() - 1;
  auto map = [&] {
    if (comm.rank() == bad) throw std::runtime_error("disk on fire");
    return Bytes("ok");
  };
  auto identity = [](std::vector<Bytes> all) { return all; };
  auto first = [](std::vector<Bytes> all) { return all.front(); };

  for (const auto& e : {expect_checkpoint_error([&] { comm.all_reduce("plan", map, first); }),
                        expect_checkpoint_error([&] { comm.reduce_scatter("scatter", map, identity); }),
                        expect_checkpoint_error([&] { comm.all_gather("gather", map); })}) {
    ASSERT_EQ(e.failures().size(), 1u);
    EXPECT_EQ(e.failures().begin()->first, bad);
    EXPECT_EQ(e.failures().begin()->second, "disk on fire");
    EXPECT_NE(std::string(e.what()).find("[rank " + std::to_string(bad) + "] disk on fire"), std::string::npos)
        << e.what();
  }
  const auto e = expect_checkpoint_error([&] { comm.all_gather("named step", map); });
  EXPECT_EQ(e.step(), "named step");
}

TEST(Comm, EveryFailingRankIsNamed) {
  Comm comm(MPI_COMM_WORLD);
  const auto e = expect_checkpoint_error([&] {
    comm.all_gather("all fail", [&]() -> Bytes { throw std::runtime_error("rank " + std::to_string(comm.rank())); });
  });
  ASSERT_EQ(e.failures().size(), static_cast<std::size_t>(comm.size()));
  for (int r = 0; r < comm.size(); ++r) EXPECT_EQ(e.failures().at(r), "rank " + std::to_string(r));
}

// Each rank throws a different kind of error: every rank learns each one's
// kind, in every kind of step, and what() names it after the rank.
TEST(Comm, EveryRankLearnsTheKindOfEachFailingRanksError) {
  Comm comm(MPI_COMM_WORLD);
  const ErrorKind kinds[] = {ErrorKind::Usage, ErrorKind::Format, ErrorKind::Io, ErrorKind::Other};
  auto map = [&]() -> Bytes {
    const auto text = "rank " + std::to_string(comm.rank());
    switch (comm.rank() % 4) {
      case 0: throw UsageError(text);
      case 1: throw FormatError(text);
      case 2: throw IoError(text);
      default: throw std::runtime_error(text);
    }
  };
  auto first = [](std::vector<Bytes> all) { return all.front(); };
  auto identity = [](std::vector<Bytes> all) { return all; };
  for (const auto& e : {expect_checkpoint_error([&] { comm.all_gather("kinds", map); }),
                        expect_checkpoint_error([&] { comm.all_reduce("kinds", map, first); }),
                        expect_checkpoint_error([&] { comm.reduce_scatter("kinds", map, identity); })}) {
    ASSERT_EQ(e.rank_failures().size(), static_cast<std::size_t>(comm.size()));
    for (int r = 0; r < comm.size(); ++r) {
      const auto kind = kinds[r % 4];
      EXPECT_EQ(e.kind_of(r), kind) << "rank " << r;
      EXPECT_EQ(e.rank_failures().at(r).message, "rank " + std::to_string(r));
      const std::string line = "[rank " + std::to_string(r) + "] " +
                               (kind == ErrorKind::Other ? "" : std::string(error_kind_name(kind)) + " error: ") +
                               "rank " + std::to_string(r);
      EXPECT_NE(std::string(e.what()).find(line), std::string::npos) << e.what();
    }
  }
  // A failure inside a failing step's own step is collective.
  const auto nested = expect_checkpoint_error([&] {
    comm.all_gather("outer", [&]() -> Bytes { throw CheckpointError("inner", std::map<int, std::string>{{0, "x"}}); });
  });
  EXPECT_EQ(nested.kind_of(0), ErrorKind::Collective);
  EXPECT_EQ(nested.kind_of(comm.size()), ErrorKind::Other);  // not a failing rank
}

TEST(Comm, AFailingReduceOrCoordinatorMapIsNamedAsTheCoordinator) {
  Comm comm(MPI_COMM_WORLD);
  auto e = expect_checkpoint_error([&] {
    comm.all_reduce(
        "reduce", [] { return Bytes("x"); },
        [](std::vector<Bytes>) -> Bytes { throw std::logic_error("cannot reduce"); });
  });
  EXPECT_EQ(e.failures().at(comm.coordinator()), "cannot reduce");
  e = expect_checkpoint_error([&] {
    comm.reduce_scatter(
        "reduce_scatter", [] { return Bytes("x"); },
        [](std::vector<Bytes>) { return std::vector<Bytes>{}; });  // no payload per rank
  });
  EXPECT_NE(e.failures().at(comm.coordinator()).find("returned 0 payloads"), std::string::npos);
  e = expect_checkpoint_error([&] { comm.broadcast("bcast", []() -> Bytes { throw 42; }); });
  EXPECT_NE(e.failures().at(comm.coordinator()).find("unknown exception"), std::string::npos);
}

TEST(Comm, ExchangesDeliverEachPayloadToItsRankAndReuseTheBuffers) {
  Comm comm(MPI_COMM_WORLD);
  comm.set_timeout(30);  // the deadline's waits, as a session sets them
  const int n = comm.size();
  // Rank r sends to rank d the text "r>d", (r + d) % 3 times over: some empty.
  const auto text = [](int from, int to) {
    Bytes out;
    for (int i = 0; i < (from + to) % 3; ++i) out += std::to_string(from) + ">" + std::to_string(to) + ";";
    return out;
  };
  std::vector<Bytes> mine;
  for (int d = 0; d < n; ++d) mine.push_back(text(comm.rank(), d));
  const auto got = comm.exchange("exchange", [&] { return mine; });
  ASSERT_EQ(got.size(), static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) EXPECT_EQ(got[r], text(r, comm.rank())) << "from rank " << r;
  // From views, into buffers kept: the same sizes twice reuse their memory.
  std::vector<Bytes> into;
  const auto views = [&] { return std::vector<std::string_view>(mine.begin(), mine.end()); };
  comm.exchange_into("exchange into", views, into);
  std::vector<const char*> where;
  for (const auto& b : into) where.push_back(b.data());
  for (auto& m : mine) std::reverse(m.begin(), m.end());
  comm.exchange_into("exchange into", views, into);
  for (int r = 0; r < n; ++r) {
    auto expected = text(r, comm.rank());
    std::reverse(expected.begin(), expected.end());
    EXPECT_EQ(into[r], expected) << "from rank " << r;
    if (!expected.empty()) EXPECT_EQ(into[r].data(), where[r]) << "the buffer for rank " << r << " was reallocated";
  }
  // A map that throws on one rank: the same error everywhere, nothing moved.
  const auto e = expect_checkpoint_error([&] {
    comm.exchange_into(
        "failing exchange",
        [&]() -> std::vector<std::string_view> {
          if (comm.rank() == n - 1) throw std::runtime_error("no payload");
          return views();
        },
        into);
  });
  EXPECT_EQ(e.step(), "failing exchange");
  EXPECT_TRUE(e.failures().count(n - 1)) << e.what();
}

TEST(Comm, StepsStillWorkAfterAFailure) {
  Comm comm(MPI_COMM_WORLD);
  expect_checkpoint_error([&] { comm.all_gather("fail", []() -> Bytes { throw std::runtime_error("x"); }); });
  EXPECT_EQ(comm.all_gather("after", [] { return Bytes("y"); }).size(), static_cast<std::size_t>(comm.size()));
}

}  // namespace
}  // namespace h5dcp::detail
