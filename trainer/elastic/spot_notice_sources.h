// What each cloud's instance-metadata service says about a coming spot
// interruption, and how to read its answers. Pure functions; the HTTP side
// is SpotNoticeWatcher's.
//
//   aws    IMDSv2, session token first. GET /latest/meta-data/spot/instance-action:
//          200 + {"action": "terminate", "time": "..."} (two minutes' notice),
//          404 none. GET /latest/meta-data/events/recommendations/rebalance:
//          200 + {"noticeTime": "..."}: the instance is at elevated risk,
//          usually well before the notice.
//   gce    GET /computeMetadata/v1/instance/preempted, header
//          Metadata-Flavor: Google: "TRUE" once preemption began (30 s
//          before the instance stops), "FALSE" otherwise.
//   azure  GET /metadata/scheduledevents?api-version=2020-07-01, header
//          Metadata: true: {"Events": [{"EventType": "Preempt",
//          "Resources": [VM names], "NotBefore": "..."}, ...]} (at least 30 s
//          ahead); the VM's own name from /metadata/instance/compute/name.
#ifndef SPOTPS_TRAINER_ELASTIC_SPOT_NOTICE_SOURCES_H_
#define SPOTPS_TRAINER_ELASTIC_SPOT_NOTICE_SOURCES_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spotps {

enum class SpotNoticeSource { kAws, kGce, kAzure };

// "aws", "gce" or "azure"; INVALID_ARGUMENT naming the choices otherwise.
absl::StatusOr<SpotNoticeSource> ParseSpotNoticeSource(absl::string_view name);
absl::string_view SpotNoticeSourceName(SpotNoticeSource source);

// An interruption notice (or an AWS rebalance recommendation), as the
// metadata service announced it.
struct SpotNotice {
  std::string action;    // "terminate", "stop", "hibernate", "preempted", "Preempt", "rebalance"
  std::string time;      // When it happens, as the service wrote it; "" if it did not say.
  std::string raw_body;  // The whole answer, for logs.
};

// An instance-action body. Tolerant: a field that is missing or malformed
// is left empty, never an error, since a 200 answer means the instance is
// going away whatever its body says.
SpotNotice ParseAwsInstanceAction(absl::string_view body);
// A rebalance-recommendation body ({"noticeTime": ...}), as tolerantly.
SpotNotice ParseAwsRebalance(absl::string_view body);
// "TRUE": a notice; "FALSE": none (surrounding whitespace aside). Anything
// else is not GCE's answer and never a notice: UNAVAILABLE.
absl::StatusOr<std::optional<SpotNotice>> ParseGcePreempted(absl::string_view body);
// A notice for the first "Preempt" event that names `vm_name` among its
// Resources (or names none); other events (Freeze, Reboot, Redeploy,
// Terminate) and other VMs' are not. A body that is not a Scheduled Events
// document (bad JSON, no Events array) is never a notice: UNAVAILABLE.
absl::StatusOr<std::optional<SpotNotice>> ParseAzureScheduledEvents(absl::string_view body,
                                                                    absl::string_view vm_name);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_ELASTIC_SPOT_NOTICE_SOURCES_H_
