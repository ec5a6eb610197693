// coll-info --check: a bootstrap self-check for a job started by coll-run or another launcher.
#pragma once

namespace collinfo {

/// Initializes from the launcher environment, checks the rank table, the bootstrap all-gather and
/// split, finalizes. Rank 0 prints the table and the verdict. Returns the process exit status.
int runSelfCheck();

}  // namespace collinfo
