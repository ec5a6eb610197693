// coll-flight's analysis: the flight-recorder files of a job's ranks (core/flight_recorder.h),
// grouped by communicator, and where the ranks' operations diverged.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace collflight {

/// The report for one communicator's files (each a parsed coll-flight-1 document, one per rank).
std::string analyze(std::vector<nlohmann::json> files);

}  // namespace collflight
