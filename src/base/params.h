// Every COLL_* parameter, declared in one place so that coll-info lists them all and a typo in a
// variable name can be reported. Definitions and documentation are in params.cc.
#pragma once

#include "base/param.h"

namespace coll::params {

// Logging.
extern const param::String kDebug;
extern const param::String kDebugSubsys;
extern const param::String kDebugFile;

// Network interface selection and bootstrap.
extern const param::String kSocketIfname;
extern const param::String kSocketFamily;
extern const param::Int kBootstrapTimeoutMs;
extern const param::Int kHandshakeTimeoutMs;
extern const param::Int kBootstrapInboxBytes;
extern const param::Int kBootstrapInboxPeerBytes;
extern const param::String kBootstrapSecret;
extern const param::String kHostId;
extern const param::Bool kCudaDisable;

// Topology.
extern const param::String kTopoFile;
extern const param::String kTopoDumpFile;

// Data path.
extern const param::Bool kShmDisable;
extern const param::Bool kNcclTwins;
extern const param::Bool kP2PDisable;
extern const param::Int kBuffSize;
extern const param::Int kP2PBuffSize;
extern const param::Int kP2PUnexpectedBytes;
extern const param::Int kNSlots;
extern const param::Int kShmDirectMin;
extern const param::Int kDeviceLLMax;
extern const param::Int kDeviceNChannels;
extern const param::Int kDeviceChannelMinBytes;
extern const param::Int kDeviceThreads;
extern const param::Int kDeviceEmulationThreads;
extern const param::String kP2PLevel;
extern const param::Int kNSocks;
extern const param::String kNet;
extern const param::String kNetPlugin;
extern const param::Int kTimeoutMs;
extern const param::Int kCommBlocking;
extern const param::String kExecutor;
extern const param::Int kSpinUs;
extern const param::Int kProxySpinUs;
extern const param::String kNetProxy;
extern const param::String kAlgo;
extern const param::String kProto;
extern const param::String kRingOrder;
extern const param::String kTunerModel;
extern const param::String kCheckCalls;
extern const param::Int kFlightRecorderEntries;
extern const param::String kFlightRecorderDir;

// Launcher contract (set by coll-run, read by collCommInitFromEnv).
extern const param::Int kRank;
extern const param::Int kWorldSize;
extern const param::Int kLocalRank;
extern const param::Int kLocalSize;
extern const param::String kMasterAddr;
extern const param::Int kMasterPort;

// Testing only.
extern const param::String kFaultInject;
extern const param::Int kDeviceEmulation;
extern const param::Int kDeviceEmulationSms;

}  // namespace coll::params
