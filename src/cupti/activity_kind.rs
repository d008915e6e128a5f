//! Activity kinds: [`ActivityKind`] names one (`CUpti_ActivityKind`), [`ActivityKinds`] is a set of them.

use std::fmt;

use crate::sys::cupti as sys;

/// One CUPTI activity kind (`CUpti_ActivityKind`), the first field of every activity record.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActivityKind(pub u32);

macro_rules! kinds {
    ($( $(#[doc = $doc:literal])* $Name:ident = $code:ident, )*) => {
        impl ActivityKind {
            $(
                $(#[doc = $doc])*
                #[doc = concat!("`", stringify!($code), "`.")]
                pub const $Name: ActivityKind = ActivityKind(sys::$code);
            )*

            /// The header's name without the `CUPTI_ACTIVITY_KIND_` prefix, for kinds [`ActivityKinds`] names.
            #[inline]
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $( sys::$code => Some(stringify!($Name)), )*
                    _ => None,
                }
            }
        }

        bitflags::bitflags! {
            /// A set of activity kinds to record: bit `k` stands for the kind with value `k`.
            ///
            /// The named kinds are the ones [`Activity`](crate::cupti::activity::Activity) decodes; others can be built with
            /// [`ActivityKinds::from_kind`] and arrive as [`Activity::Unknown`](crate::cupti::activity::Activity::Unknown).
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
            pub struct ActivityKinds: u64 {
                $(
                    $(#[doc = $doc])*
                    #[doc = concat!("`", stringify!($code), "`.")]
                    const $Name = 1u64 << sys::$code;
                )*
            }
        }
    };
}

kinds! {
    /// Memory copies between host and device or within a device ([`Memcpy`](crate::cupti::activity::Memcpy)).
    MEMCPY = CUPTI_ACTIVITY_KIND_MEMCPY,
    /// Memory sets ([`Memset`](crate::cupti::activity::Memset)).
    MEMSET = CUPTI_ACTIVITY_KIND_MEMSET,
    /// Kernels, serialised by CUPTI so each can be timed alone (slow); prefer `CONCURRENT_KERNEL`.
    KERNEL = CUPTI_ACTIVITY_KIND_KERNEL,
    /// Driver API calls ([`ApiCall`](crate::cupti::activity::ApiCall)).
    DRIVER = CUPTI_ACTIVITY_KIND_DRIVER,
    /// Runtime API calls ([`ApiCall`](crate::cupti::activity::ApiCall)).
    RUNTIME = CUPTI_ACTIVITY_KIND_RUNTIME,
    /// Devices, one record each ([`DeviceRecord`](crate::cupti::activity::DeviceRecord)).
    DEVICE = CUPTI_ACTIVITY_KIND_DEVICE,
    /// Contexts, one record each ([`ContextRecord`](crate::cupti::activity::ContextRecord)).
    CONTEXT = CUPTI_ACTIVITY_KIND_CONTEXT,
    /// Kernels, run concurrently as the program launched them ([`Kernel`](crate::cupti::activity::Kernel)).
    CONCURRENT_KERNEL = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    /// Names given to threads, devices, contexts and streams, for example by NVTX ([`NameRecord`](crate::cupti::activity::NameRecord)).
    NAME = CUPTI_ACTIVITY_KIND_NAME,
    /// NVTX markers and ranges ([`Marker`](crate::cupti::activity::Marker)).
    MARKER = CUPTI_ACTIVITY_KIND_MARKER,
    /// Colour, category and payload of NVTX markers ([`MarkerData`](crate::cupti::activity::MarkerData)); needs `MARKER` too.
    MARKER_DATA = CUPTI_ACTIVITY_KIND_MARKER_DATA,
    /// CUDA graph launches as one record each, instead of one per node ([`GraphTrace`](crate::cupti::activity::GraphTrace)).
    GRAPH_TRACE = CUPTI_ACTIVITY_KIND_GRAPH_TRACE,
    /// Time CUPTI and the driver spent on their own work ([`Overhead`](crate::cupti::activity::Overhead)).
    OVERHEAD = CUPTI_ACTIVITY_KIND_OVERHEAD,
    /// Peer-to-peer memory copies between devices ([`PeerCopy`](crate::cupti::activity::PeerCopy)).
    MEMCPY2 = CUPTI_ACTIVITY_KIND_MEMCPY2,
    /// Streams, one record each ([`StreamRecord`](crate::cupti::activity::StreamRecord)).
    STREAM = CUPTI_ACTIVITY_KIND_STREAM,
    /// Waits: event, stream and context synchronisation ([`Synchronization`](crate::cupti::activity::Synchronization)).
    SYNCHRONIZATION = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    /// External correlation ids pushed by the program ([`ExternalCorrelation`](crate::cupti::activity::ExternalCorrelation)).
    EXTERNAL_CORRELATION = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    /// Launch calls the runtime makes internally ([`ApiCall`](crate::cupti::activity::ApiCall)).
    INTERNAL_LAUNCH_API = CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API,
    /// Allocations and frees of device memory ([`MemoryRecord`](crate::cupti::activity::MemoryRecord)).
    MEMORY2 = CUPTI_ACTIVITY_KIND_MEMORY2,
}

impl ActivityKinds {
    /// The set holding only `kind` (empty for a value of 64 or more, which no 13.0 kind has).
    #[inline]
    pub fn from_kind(kind: ActivityKind) -> Self {
        1u64.checked_shl(kind.0)
            .map(Self::from_bits_retain)
            .unwrap_or_else(Self::empty)
    }

    /// Whether `kind` is in the set.
    #[inline]
    pub fn has(self, kind: ActivityKind) -> bool {
        let one = Self::from_kind(kind);
        !one.is_empty() && self.contains(one)
    }

    /// The kinds in the set, in value order.
    #[inline]
    pub fn kinds(self) -> impl Iterator<Item = ActivityKind> {
        let bits = self.bits();
        (0..64u32)
            .filter(move |k| bits & (1u64 << k) != 0)
            .map(ActivityKind)
    }

    /// The kinds a trace of GPU work usually needs: kernels (concurrent), copies (also peer-to-peer), sets,
    /// synchronisation, driver and runtime calls, overhead.
    #[inline]
    pub fn gpu_trace() -> Self {
        Self::CONCURRENT_KERNEL
            | Self::MEMCPY
            | Self::MEMCPY2
            | Self::MEMSET
            | Self::SYNCHRONIZATION
            | Self::DRIVER
            | Self::RUNTIME
            | Self::OVERHEAD
    }
}

impl fmt::Debug for ActivityKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "ActivityKind({} {n})", self.0),
            None => write!(f, "ActivityKind({})", self.0),
        }
    }
}

impl fmt::Display for ActivityKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "activity kind {}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_follow_kind_values() {
        assert_eq!(ActivityKinds::MEMCPY.bits(), 1 << 1);
        assert_eq!(ActivityKinds::CONCURRENT_KERNEL.bits(), 1 << 10);
        assert_eq!(
            ActivityKinds::from_kind(ActivityKind::SYNCHRONIZATION),
            ActivityKinds::SYNCHRONIZATION
        );
        assert!(ActivityKinds::from_kind(ActivityKind(64)).is_empty());
        assert!(!ActivityKinds::all().has(ActivityKind(64)));
        let set = ActivityKinds::MEMSET | ActivityKinds::RUNTIME;
        assert_eq!(
            set.kinds().collect::<Vec<_>>(),
            [ActivityKind::MEMSET, ActivityKind::RUNTIME]
        );
        assert!(set.has(ActivityKind::RUNTIME));
        assert!(!set.has(ActivityKind::DRIVER));
        assert_eq!(
            ActivityKind::CONCURRENT_KERNEL.to_string(),
            "CONCURRENT_KERNEL"
        );
        assert_eq!(ActivityKind(30).to_string(), "activity kind 30");
        // Every named kind has its own bit.
        assert_eq!(
            ActivityKinds::all().kinds().count(),
            ActivityKinds::all().iter().count()
        );
    }
}
