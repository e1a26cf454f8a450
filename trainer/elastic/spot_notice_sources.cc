#include "trainer/elastic/spot_notice_sources.h"

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace spotps {
namespace {

using Json = nlohmann::json;

// The string at `key` of a JSON object, or "" where the body is not JSON,
// not an object, or has no string there.
std::string StringField(const Json& json, const char* key) {
  if (!json.is_object()) return "";
  auto it = json.find(key);
  return it != json.end() && it->is_string() ? it->get<std::string>() : "";
}

Json ParseOrNull(absl::string_view body) {
  return Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
}

// A body quoted for an error message, cut short.
std::string Quoted(absl::string_view body) {
  constexpr size_t kShown = 80;
  return absl::StrCat("'", body.substr(0, kShown), body.size() > kShown ? "...'" : "'");
}

}  // namespace

absl::StatusOr<SpotNoticeSource> ParseSpotNoticeSource(absl::string_view name) {
  if (name == "aws") return SpotNoticeSource::kAws;
  if (name == "gce") return SpotNoticeSource::kGce;
  if (name == "azure") return SpotNoticeSource::kAzure;
  return absl::InvalidArgumentError(
      absl::StrCat("spot notice source '", name, "': want aws, gce or azure"));
}

absl::string_view SpotNoticeSourceName(SpotNoticeSource source) {
  switch (source) {
    case SpotNoticeSource::kAws:
      return "aws";
    case SpotNoticeSource::kGce:
      return "gce";
    case SpotNoticeSource::kAzure:
      return "azure";
  }
  return "?";
}

SpotNotice ParseAwsInstanceAction(absl::string_view body) {
  const Json json = ParseOrNull(body);
  return SpotNotice{StringField(json, "action"), StringField(json, "time"), std::string(body)};
}

SpotNotice ParseAwsRebalance(absl::string_view body) {
  return SpotNotice{"rebalance", StringField(ParseOrNull(body), "noticeTime"), std::string(body)};
}

absl::StatusOr<std::optional<SpotNotice>> ParseGcePreempted(absl::string_view body) {
  const absl::string_view value = absl::StripAsciiWhitespace(body);
  if (value == "TRUE") return SpotNotice{"preempted", "", std::string(body)};
  if (value == "FALSE") return std::nullopt;
  return absl::UnavailableError(
      absl::StrCat("GCE metadata answered instance/preempted with ", Quoted(body),
                   ", neither TRUE nor FALSE"));
}

absl::StatusOr<std::optional<SpotNotice>> ParseAzureScheduledEvents(absl::string_view body,
                                                                    absl::string_view vm_name) {
  const Json json = ParseOrNull(body);
  if (!json.is_object() || !json.contains("Events") || !json["Events"].is_array()) {
    return absl::UnavailableError(absl::StrCat(
        "Azure scheduled events answered ", Quoted(body), ", not a document with an Events array"));
  }
  for (const Json& event : json["Events"]) {
    if (StringField(event, "EventType") != "Preempt") continue;
    bool ours = true;  // An event that names no resources concerns every VM that sees it.
    if (event.contains("Resources") && event["Resources"].is_array() &&
        !event["Resources"].empty()) {
      ours = false;
      for (const Json& r : event["Resources"]) {
        ours = ours || (r.is_string() && r.get<std::string>() == vm_name);
      }
    }
    if (ours) return SpotNotice{"Preempt", StringField(event, "NotBefore"), std::string(body)};
  }
  return std::nullopt;
}

}  // namespace spotps
