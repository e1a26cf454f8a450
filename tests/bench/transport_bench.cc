// spotps-bench-transport: what the parameter server's wire path costs,
// measured against yardsticks taken in the same run.
//
//  - 2 shard processes on loopback; models of 16M and 128M parameters; 1 and
//    2 concurrent clients; full pulls of BF16 weights and pushes of BF16
//    gradients, in bytes per second.
//  - Raw TCP: the same bytes between two processes over one loopback socket.
//  - The shard's AdamW apply rate (ShardStore::Push with BF16 gradients, in
//    bytes touched per second) against a streaming kernel that touches the
//    same bytes (reads w, m, v and a BF16 gradient, writes w, m, v) with no
//    math, on the same number of threads: one, since ShardStore::Push
//    applies on its caller's thread. memcpy is printed too, for reference
//    only: it moves other bytes (its writes pay read-for-ownership traffic
//    that AdamW's in-place writes do not), so against it a ratio above 1
//    measured nothing.
//
//  - CPU: the core-seconds each byte costs, summed over every process
//    involved (the client and both shards; the two raw TCP processes), so
//    a run that is bound by the machine's cores says so.
//
//  - The BF16 codec (the client's and the shard's encode and decode, one
//    thread, a partition at a time), so that the last line can say how far
//    the necessary work alone lets the ratio go on this machine.
//
// Last line: transport_ratio=R1 apply_ratio=R2 cpu_vs_tcp=C busy_cores=B
// ceiling_ratio=K where
//   R1 = (pull + push bytes) / (pull + push seconds), 128M model, 1 client,
//        divided by raw TCP bytes/s; both sides keep their best repetition;
//   R2 = AdamW bytes touched/s divided by the same-bytes streaming
//        kernel's bytes touched/s (1 thread each; at most about 1);
//   C  = core-seconds per byte of that pull + push over raw TCP's;
//   B  = cores the pull + push kept busy (core-seconds / seconds), against
//        the machine's std::thread::hardware_concurrency();
//   K  = the R1 that the necessary passes alone would allow with every core
//        busy: per wire byte, raw TCP's kernel cost plus, per element (2 bytes
//        pulled, 2 pushed), the shard's encode of the pull, the client's
//        decode of it, the client's encode of the push and the shard's
//        checked AdamW apply of it, all as measured here; no RPC framework,
//        staging or scheduling cost. R1 cannot pass K on this machine.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/cluster.h"
#include "common/command_line.h"
#include "common/exit_status.h"
#include "common/log.h"
#include "common/tensor_codec.h"
#include "common/transport_args.h"
#include "common/usage_problems.h"
#include "ps/store/shard_store.h"
#include "tests/support/child_process.h"
#include "tests/support/count_list.h"

ABSL_FLAG(std::string, sizes_m, "16,128", "Model sizes to measure, millions of parameters.");
ABSL_FLAG(int, reps, 3, "Repetitions of each pull and push measurement.");
ABSL_FLAG(int64_t, apply_elements_m, 32, "Elements (millions) for the AdamW apply and BF16 codec measurements.");

namespace spotps {
namespace {

double Seconds(absl::Time since) { return absl::ToDoubleSeconds(absl::Now() - since); }
double Gbps(double bytes, double seconds) { return bytes / seconds / 1e9; }

// A layout shaped like a transformer's: a few big matrices and small vectors.
ModelLayout LayoutOfSize(int64_t params) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> tensors;
  const int64_t width = 1024;
  int64_t left = params;
  for (int i = 0; left > 0; ++i) {
    const int64_t rows = std::min<int64_t>(4096, std::max<int64_t>(1, (left - width) / width));
    tensors.push_back({absl::StrCat("layer", i, ".w"), {rows, width}});
    left -= rows * width;
    if (left > width) {
      tensors.push_back({absl::StrCat("layer", i, ".b"), {width}});
      left -= width;
    }
    if (left > 0 && left < width) {
      tensors.push_back({absl::StrCat("layer", i, ".tail"), {left}});
      left = 0;
    }
  }
  return *ModelLayout::Create(std::move(tensors));
}

double TimevalSeconds(const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; }

// User + system CPU seconds of this process (all threads), or of the
// calling thread alone.
double OwnCpuSeconds(int who = RUSAGE_SELF) {
  rusage u{};
  getrusage(who, &u);
  return TimevalSeconds(u.ru_utime) + TimevalSeconds(u.ru_stime);
}

// User + system CPU seconds of another process, from /proc/<pid>/stat
// (fields 14 and 15, in clock ticks, after the parenthesised name).
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(in, line);
  const size_t name_end = line.rfind(')');
  if (name_end == std::string::npos) return 0;
  std::vector<std::string> fields = absl::StrSplit(line.substr(name_end + 2), ' ');
  double utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtod(fields[11], &utime) ||
      !absl::SimpleAtod(fields[12], &stime)) {
    return 0;
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

struct Transfer {
  double pull_bytes = 0, pull_s = 0, push_bytes = 0, push_s = 0;
  // The fastest repetition's pull + push: its bytes and seconds.
  double best_bytes = 0, best_s = std::numeric_limits<double>::infinity();
  double cpu_s = 0;  // Of every process involved, over the timed repetitions.
};

// One client's repeated full pulls and pushes; returns bytes and seconds.
// `cpu_now` reads the CPU seconds of every process involved.
absl::StatusOr<Transfer> PullPushLoop(Cluster& cluster, int reps,
                                      const std::function<double()>& cpu_now) {
  Transfer t;
  double cpu_start = 0;
  WeightSnapshot w;
  std::vector<float> grad;
  // One untimed round first, as a trainer's buffers are warm after step one.
  for (int r = -1; r < reps; ++r) {
    w.versions.clear();  // Force a full, unconditional pull.
    if (r == 0) cpu_start = cpu_now();
    const absl::Time p0 = absl::Now();
    if (absl::Status s = cluster.Pull(v1::DTYPE_BF16, &w); !s.ok()) return s;
    const double pull_s = Seconds(p0);
    if (grad.empty()) grad.assign(w.values.size(), 1e-4f);
    const absl::Time q0 = absl::Now();
    auto pushed = cluster.Push(grad, w.versions, v1::DTYPE_BF16);
    if (!pushed.ok()) return pushed.status();
    const double push_s = Seconds(q0);
    if (r < 0) continue;
    t.push_s += push_s;
    t.push_bytes += static_cast<double>(pushed->bytes_sent);
    t.pull_s += pull_s;
    t.pull_bytes += static_cast<double>(w.bytes_received);
    if (pull_s + push_s < t.best_s) {
      t.best_s = pull_s + push_s;
      t.best_bytes = static_cast<double>(w.bytes_received + pushed->bytes_sent);
    }
  }
  t.cpu_s = cpu_now() - cpu_start;
  return t;
}

struct Row {
  int64_t params_m;
  int clients;
  double pull_gbps, push_gbps, combined_gbps;
  // 1 client only (0 otherwise): the best repetition's pull + push rate,
  // and core-seconds per GB and cores kept busy over all repetitions.
  double best_gbps = 0, cpu_s_per_gb = 0, busy_cores = 0;
};

absl::StatusOr<std::vector<Row>> MeasureModel(int64_t params_m, int reps, const std::string& dir) {
  // Pushes applied on arrival: the transport and the apply, not the
  // default's averaging of concurrent clients' pushes.
  constexpr int kShards = 2;
  auto shards = testing::LocalShardCluster::Start(
      kShards, {"--optimizer=adamw", "--lr=1e-4", "--staleness_method=none"}, dir);
  if (!shards.ok()) return shards.status();
  const ModelLayout layout = LayoutOfSize(params_m * 1'000'000);
  std::vector<std::unique_ptr<Cluster>> clients;
  for (int c = 0; c < 2; ++c) {
    auto cluster = Cluster::Connect((*shards)->addresses());
    if (!cluster.ok()) return cluster.status();
    clients.push_back(*std::move(cluster));
  }
  {
    std::vector<float> init(layout.total_elements());
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 0.02f);
    for (float& x : init) x = dist(rng);
    auto ok = clients[0]->Init(layout, init);
    if (!ok.ok()) return ok.status();
  }
  if (absl::Status s = clients[1]->FetchLayout(); !s.ok()) return s;
  auto cpu_now = [&shards] {
    double cpu = OwnCpuSeconds();
    for (int i = 0; i < kShards; ++i) cpu += ProcessCpuSeconds((*shards)->shard(i).pid());
    return cpu;
  };
  std::vector<Row> rows;
  for (int n : {1, 2}) {
    std::vector<absl::StatusOr<Transfer>> results(n, Transfer{});
    std::vector<std::thread> threads;
    for (int c = 0; c < n; ++c) {
      threads.emplace_back([&, c] { results[c] = PullPushLoop(*clients[c], reps, cpu_now); });
    }
    for (auto& t : threads) t.join();
    // The clients run side by side, so aggregate rates divide all bytes by
    // the slowest client's timed seconds.
    Transfer sum;
    double pull_s = 0, push_s = 0, both_s = 0;
    for (auto& r : results) {
      if (!r.ok()) return r.status();
      sum.pull_bytes += r->pull_bytes;
      sum.push_bytes += r->push_bytes;
      pull_s = std::max(pull_s, r->pull_s);
      push_s = std::max(push_s, r->push_s);
      both_s = std::max(both_s, r->pull_s + r->push_s);
    }
    Row row{params_m, n, Gbps(sum.pull_bytes, pull_s), Gbps(sum.push_bytes, push_s),
            Gbps(sum.pull_bytes + sum.push_bytes, both_s)};
    if (n == 1) {  // With two clients their timed windows overlap: no per-client CPU.
      row.best_gbps = Gbps(results[0]->best_bytes, results[0]->best_s);
      row.cpu_s_per_gb = results[0]->cpu_s / ((sum.pull_bytes + sum.push_bytes) / 1e9);
      row.busy_cores = results[0]->cpu_s / both_s;
    }
    rows.push_back(row);
    std::printf(
        "  model=%lldM clients=%d pull=%.2f GB/s push=%.2f GB/s combined=%.2f GB/s",
        static_cast<long long>(params_m), n, row.pull_gbps, row.push_gbps, row.combined_gbps);
    if (n == 1) {
      std::printf(" best=%.2f GB/s cpu=%.3f core-s/GB busy=%.2f cores", row.best_gbps,
                  row.cpu_s_per_gb, row.busy_cores);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  return rows;
}

struct TcpRates {
  double best_gbps = 0;               // The fastest repetition.
  double cpu_s_per_gb = 0, busy_cores = 0;  // Both processes, all repetitions.
};

// Raw TCP between two processes: the child reads `bytes` and answers one byte.
absl::StatusOr<TcpRates> RawTcp(int64_t bytes, int reps) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return absl::InternalError("raw TCP: cannot listen");
  }
  const int64_t chunk = int64_t{4} << 20;
  const pid_t child = fork();
  if (child == 0) {
    const int fd = accept(listener, nullptr, nullptr);
    std::vector<char> buf(chunk);
    for (int r = 0; r < reps; ++r) {
      int64_t got = 0;
      while (got < bytes) {
        const ssize_t n = read(fd, buf.data(), std::min<int64_t>(chunk, bytes - got));
        if (n <= 0) _exit(1);
        got += n;
      }
      char ack = 1;
      if (write(fd, &ack, 1) != 1) _exit(1);
    }
    _exit(0);
  }
  close(listener);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::InternalError("raw TCP: cannot connect");
  }
  std::vector<char> buf(chunk, 'x');
  TcpRates rates;
  double seconds = 0;
  const double cpu_start = OwnCpuSeconds(RUSAGE_THREAD);
  for (int r = 0; r < reps; ++r) {
    const absl::Time start = absl::Now();
    for (int64_t sent = 0; sent < bytes;) {
      const ssize_t n = write(fd, buf.data(), std::min<int64_t>(chunk, bytes - sent));
      if (n <= 0) return absl::InternalError("raw TCP: write failed");
      sent += n;
    }
    char ack;
    if (read(fd, &ack, 1) != 1) return absl::InternalError("raw TCP: no ack");
    const double rep_s = Seconds(start);
    seconds += rep_s;
    rates.best_gbps = std::max(rates.best_gbps, Gbps(static_cast<double>(bytes), rep_s));
  }
  const double own_cpu = OwnCpuSeconds(RUSAGE_THREAD) - cpu_start;
  close(fd);
  int status;
  rusage child_usage{};
  wait4(child, &status, 0, &child_usage);
  const double cpu =
      own_cpu + TimevalSeconds(child_usage.ru_utime) + TimevalSeconds(child_usage.ru_stime);
  rates.cpu_s_per_gb = cpu / (static_cast<double>(bytes) * reps / 1e9);
  rates.busy_cores = cpu / seconds;
  return rates;
}

struct ApplyRates {
  double adamw_gbps, stream_gbps, memcpy_gbps;
};

// The apply yardstick: AdamW's memory traffic (w, m, v read and written in
// place, a BF16 gradient read) without its arithmetic, compiled for the same
// ISAs as the optimizer's kernels.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void StreamAdamWBytes(
    float* __restrict w, float* __restrict m, float* __restrict v, const uint16_t* __restrict g,
    int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(g[i]) << 16;
    float gi;
    std::memcpy(&gi, &bits, sizeof(gi));
    w[i] += gi;
    m[i] += gi;
    v[i] += gi;
  }
}

// AdamW through the shard's own push path, against memcpy of the same span.
absl::StatusOr<ApplyRates> MeasureApply(int64_t n, int reps) {
  ShardOptions options;
  options.optimizer.kind = OptimizerKind::kAdamW;
  options.schedule.base_lr = 1e-4;
  auto store = ShardStore::Create(options);
  if (!store.ok()) return store.status();
  // One tensor per 4 MiB partition keeps the layout small.
  const ModelLayout layout = *ModelLayout::Create({{"w", {n}}});
  const PartitionMap map = *PartitionMap::Create(layout, 1);
  std::vector<float> values(n, 0.5f);
  std::vector<std::string> init_bytes, grad_bytes;
  std::vector<PayloadRange> init, grad;
  init_bytes.reserve(map.partitions().size());
  grad_bytes.reserve(map.partitions().size());
  std::vector<float> g(PartitionMap::kMaxPartitionElements, 1e-3f);
  for (const Partition& p : map.partitions()) {
    init_bytes.emplace_back();
    AppendEncoded(values.data() + p.flat_begin, p.num_elements, v1::DTYPE_FP32, &init_bytes.back());
    init.push_back({p.id, 0, init_bytes.back(), 0});
    grad_bytes.emplace_back();
    AppendEncoded(g.data(), p.num_elements, v1::DTYPE_BF16, &grad_bytes.back());
    grad.push_back({p.id, 0, grad_bytes.back(), 0});
  }
  if (auto ok = (*store)->Init(layout, init); !ok.ok()) return ok.status();
  values.clear();
  values.shrink_to_fit();
  double adamw = 0;
  for (int r = 0; r < reps; ++r) {
    for (auto& range : grad) range.version = r;
    const absl::Time start = absl::Now();
    auto pushed = (*store)->Push(absl::StrCat("bench-", r), v1::DTYPE_BF16, grad);
    if (!pushed.ok()) return pushed.status();
    // Bytes touched per element: weight, m and v read and written (24), BF16 gradient (2).
    adamw = std::max(adamw, Gbps(26.0 * n, Seconds(start)));
  }
  double stream = 0;
  {
    std::vector<float> w(n, 0.5f), m(n, 0.0f), v(n, 0.0f);
    std::vector<uint16_t> g(n, 0x3a83);   // About 1e-3 in BF16.
    for (int r = 0; r < reps + 1; ++r) {  // The first pass faults the pages in.
      const absl::Time start = absl::Now();
      StreamAdamWBytes(w.data(), m.data(), v.data(), g.data(), n);
      if (r > 0) stream = std::max(stream, Gbps(26.0 * n, Seconds(start)));
    }
    if (!(w[n / 2] > 0.5f)) return absl::InternalError("the streaming kernel did not run");
  }
  std::vector<float> src(n, 1.0f), dst(n, 0.0f);
  double copy = 0;
  for (int r = 0; r < reps; ++r) {
    const absl::Time start = absl::Now();
    std::memcpy(dst.data(), src.data(), n * sizeof(float));
    copy = std::max(copy, Gbps(2.0 * n * sizeof(float), Seconds(start)));  // Read + write.
  }
  if (dst[n / 2] != 1.0f) return absl::InternalError("memcpy did not copy");
  return ApplyRates{adamw, stream, copy};
}

struct CodecRates {
  double encode_eps = 0, decode_eps = 0;  // BF16 elements per second, 1 thread.
};

// EncodeFp32 and DecodeToFp32 to and from BF16 a partition at a time, as the
// wire path calls them, on a thread of their own with the single-threaded
// conversion the shard's handlers and the client's lanes use.
absl::StatusOr<CodecRates> MeasureCodec(int64_t n, int reps) {
  CodecRates rates;
  absl::Status status;
  std::thread worker([&] {
    UseSingleThreadedConversion();
    const int64_t part = PartitionMap::kMaxPartitionElements;
    std::vector<float> values(n, 0.25f), decoded(n, 0.0f);
    std::vector<char> wire(n * 2);
    for (int r = 0; r < reps + 1 && status.ok(); ++r) {  // The first pass faults the pages in.
      const absl::Time encode_start = absl::Now();
      for (int64_t i = 0; i < n; i += part) {
        EncodeFp32(values.data() + i, std::min(part, n - i), v1::DTYPE_BF16, wire.data() + 2 * i);
      }
      const double encode_s = Seconds(encode_start);
      const absl::Time decode_start = absl::Now();
      for (int64_t i = 0; i < n && status.ok(); i += part) {
        const int64_t k = std::min(part, n - i);
        status = DecodeToFp32(v1::DTYPE_BF16, absl::string_view(wire.data() + 2 * i, 2 * k), k,
                              decoded.data() + i);
      }
      const double decode_s = Seconds(decode_start);
      if (r == 0) continue;
      rates.encode_eps = std::max(rates.encode_eps, n / encode_s);
      rates.decode_eps = std::max(rates.decode_eps, n / decode_s);
    }
    if (status.ok() && decoded[n / 2] != 0.25f) {
      status = absl::InternalError("BF16 round trip did not give back its values");
    }
  });
  worker.join();
  if (!status.ok()) return status;
  return rates;
}

// Core-seconds per wire GB of the passes a pull + push cannot do without
// (see the header's K), and the ratio they allow with every core busy.
double CeilingRatio(const TcpRates& tcp, const ApplyRates& apply, const CodecRates& codec) {
  constexpr double kElementsPerWireGb = 1e9 / 4;  // 2 bytes pulled + 2 pushed.
  const double per_element_s =
      2 / codec.encode_eps + 1 / codec.decode_eps + 26 / (apply.adamw_gbps * 1e9);
  const double core_s_per_gb = tcp.cpu_s_per_gb + kElementsPerWireGb * per_element_s;
  const double ceiling_gbps = std::thread::hardware_concurrency() / core_s_per_gb;
  return ceiling_gbps / tcp.best_gbps;
}

// Every problem with the flags, before anything starts.
UsageProblems FlagProblems() {
  UsageProblems problems;
  problems.Check(testing::ParseCountList(absl::GetFlag(FLAGS_sizes_m)).status(), "--sizes_m");
  problems.Require(absl::GetFlag(FLAGS_reps) >= 1, "--reps must be at least 1");
  problems.Require(absl::GetFlag(FLAGS_apply_elements_m) >= 1,
                   "--apply_elements_m must be at least 1");
  return problems;
}

int Run() {
  testing::TempDir dir;
  const int reps = absl::GetFlag(FLAGS_reps);
  std::vector<Row> rows;
  std::printf("spotps-bench-transport: 2 shards on loopback, BF16 pull and push\n");
  // FlagProblems checked them.
  const std::vector<int64_t> sizes = *testing::ParseCountList(absl::GetFlag(FLAGS_sizes_m));
  for (int64_t m : sizes) {
    auto measured = MeasureModel(m, reps, dir.path());
    if (!measured.ok()) {
      std::fprintf(stderr, "model %lldM: %s\n", static_cast<long long>(m),
                   measured.status().ToString().c_str());
      return 1;
    }
    rows.insert(rows.end(), measured->begin(), measured->end());
  }
  // The yardstick moves the bytes of the largest model's 1-client pull + push.
  const Row& largest = *std::max_element(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return std::make_pair(a.params_m, -a.clients) < std::make_pair(b.params_m, -b.clients);
  });
  const int64_t yard_bytes = largest.params_m * 1'000'000 * 2 * 2;  // BF16 pull + push.
  auto tcp = RawTcp(yard_bytes, reps);
  if (!tcp.ok()) {
    std::fprintf(stderr, "%s\n", tcp.status().ToString().c_str());
    return 1;
  }
  std::printf("  raw TCP loopback (1 stream, %lld MB): best=%.2f GB/s cpu=%.3f core-s/GB busy=%.2f "
              "cores (of %u)\n",
              static_cast<long long>(yard_bytes / 1'000'000), tcp->best_gbps, tcp->cpu_s_per_gb,
              tcp->busy_cores, std::thread::hardware_concurrency());
  auto apply = MeasureApply(absl::GetFlag(FLAGS_apply_elements_m) * 1'000'000, reps);
  if (!apply.ok()) {
    std::fprintf(stderr, "%s\n", apply.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "  AdamW apply (BF16 grads, 1 thread): %.2f GB/s touched; same bytes, no math (1 thread): "
      "%.2f GB/s; memcpy (1 thread, reference): %.2f GB/s touched\n",
      apply->adamw_gbps, apply->stream_gbps, apply->memcpy_gbps);
  auto codec = MeasureCodec(absl::GetFlag(FLAGS_apply_elements_m) * 1'000'000, reps);
  if (!codec.ok()) {
    std::fprintf(stderr, "%s\n", codec.status().ToString().c_str());
    return 1;
  }
  std::printf("  BF16 codec (1 thread): encode %.2f G elements/s, decode %.2f G elements/s\n",
              codec->encode_eps / 1e9, codec->decode_eps / 1e9);
  std::printf(
      "\n| model | clients | pull GB/s | push GB/s | pull+push GB/s | best rep GB/s | core-s/GB |"
      " busy cores |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    if (r.clients == 1) {
      std::printf("| %lldM | 1 | %.2f | %.2f | %.2f | %.2f | %.3f | %.2f |\n",
                  static_cast<long long>(r.params_m), r.pull_gbps, r.push_gbps, r.combined_gbps,
                  r.best_gbps, r.cpu_s_per_gb, r.busy_cores);
    } else {
      std::printf("| %lldM | %d | %.2f | %.2f | %.2f | - | - | - |\n",
                  static_cast<long long>(r.params_m), r.clients, r.pull_gbps, r.push_gbps,
                  r.combined_gbps);
    }
  }
  std::printf("| raw TCP | - | - | - | - | %.2f | %.3f | %.2f |\n\n", tcp->best_gbps,
              tcp->cpu_s_per_gb, tcp->busy_cores);
  std::printf(
      "transport_ratio=%.3f apply_ratio=%.3f cpu_vs_tcp=%.2f busy_cores=%.2f ceiling_ratio=%.3f\n",
      largest.best_gbps / tcp->best_gbps, apply->adamw_gbps / apply->stream_gbps,
      largest.cpu_s_per_gb / tcp->cpu_s_per_gb, largest.busy_cores,
      CeilingRatio(*tcp, *apply, *codec));
  return 0;
}

}  // namespace
}  // namespace spotps

int main(int argc, char** argv) {
  spotps::SetLogProgramName("spotps-bench-transport");
  spotps::ParseFlagsOrExit(argc, argv);
  if (spotps::UsageProblems problems = spotps::FlagProblems(); !problems.empty()) {
    return spotps::UsageError(problems.ToStatus());
  }
  if (spotps::CheckFlagsOnly()) return 0;
  spotps::TuneAllocatorForBulkTransfers();
  return spotps::Run();
}
