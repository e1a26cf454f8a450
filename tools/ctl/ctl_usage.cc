#include "tools/ctl/ctl_usage.h"

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spotps {

std::string Usage(absl::Span<const absl::string_view> flag_names) {
  std::string text =
      "usage: spotps-ctl --ps=host:port,... <command> [flags]\n"
      "\n"
      "commands:\n"
      "  status      every shard in one table, the push rate, and the epochs and\n"
      "              live workers of the coordinator shard 0 hosts (if any)\n"
      "  checkpoint  asks shard 0's coordinator for a checkpoint round now\n"
      "  wait-done   waits until every epoch's work units are committed\n"
      "  export      writes the weights to --out as safetensors (Hugging Face GPT-2\n"
      "              names, --dtype fp32 or bf16, step and versions in its metadata)\n"
      "  import      initialises shards that hold no model yet from --in (a\n"
      "              safetensors file with GPT-2 names, e.g. a pretrained GPT-2)\n"
      "\n"
      "flags:\n";
  for (absl::string_view name : flag_names) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    absl::StrAppendFormat(&text, "  %-24s %s\n",
                          absl::StrCat("--", name, "=", flag->DefaultValue()), flag->Help());
  }
  absl::StrAppend(&text,
                  "\nexit status: 0 success, 1 the cluster failed or refused, 2 bad usage\n");
  return text;
}

}  // namespace spotps
