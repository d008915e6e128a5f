//! Decoding: every kind the double writes with its fields, CUPTI 12.9's buffers, kinds no header defines, a newer
//! release walked by the vendor, kernel names.

use std::ffi::CString;

use super::{CONCURRENT_KERNEL, DRIVER, KERNEL, RUNTIME, Seen, records, start};
use crate::common::{double, serial};
use gpu_tools::cupti::activity::{
    ActivityKind, ActivityKinds, ActivityObject, CopyKind, FlushMode, MemoryKind, OverheadKind,
    RecordError, RecordLayout, SyncType,
};
use gpu_tools::cupti::{ApiCbid, ApiDomain, DriverCbid, RuntimeCbid};

#[test]
fn every_kind_the_double_writes_decodes_with_its_fields() {
    let _serial = serial();
    let d = double();
    let (tracer, sink) = start(ActivityKinds::gpu_trace());
    assert_eq!(tracer.layout(), RecordLayout::Cupti13_0);
    assert_eq!(tracer.cupti_version(), 130_001);
    let launch = DriverCbid::LAUNCH_KERNEL.id();
    let t0 = 1_000;
    assert_eq!(
        d.kernel(
            CONCURRENT_KERNEL,
            t0,
            t0 + 500,
            (0, 1, 7),
            11,
            c"_Z6kernelPfi",
            (4, 2, 1),
            (128, 1, 1)
        ),
        1
    );
    assert_eq!(d.memcpy(1, true, 4096, t0 + 600, t0 + 700, 7, 12), 1);
    assert_eq!(d.memcpy(2, false, 8192, t0 + 800, t0 + 900, 8, 13), 1);
    assert_eq!(d.memset(0xab, 1 << 20, t0 + 950, t0 + 990, 7, 14), 1);
    assert_eq!(d.api(DRIVER, launch, 900, 950, 77, 11, 0), 1);
    assert_eq!(
        d.api(
            RUNTIME,
            RuntimeCbid::LAUNCH_KERNEL.id(),
            890,
            960,
            77,
            10,
            0
        ),
        1
    );
    assert_eq!(d.sync(3, 1000, 2000, 15, 7, u32::MAX), 1);
    assert_eq!(d.sync(4, 2000, 3000, 16, u32::MAX, u32::MAX), 1);
    assert_eq!(d.overhead(65536, 2, [4242, 77, 0], 5, 6, 0), 1);
    tracer.flush_all(FlushMode::Completed).expect("flush");
    let got = records(&sink);
    assert_eq!(
        got,
        vec![
            Seen::Kernel {
                name: "_Z6kernelPfi".into(),
                start: t0,
                end: t0 + 500,
                ids: (0, 1, 7),
                corr: 11,
                grid: (4, 2, 1),
                block: (128, 1, 1),
                device_launched: Some(true),
            },
            Seen::Memcpy {
                kind: CopyKind::HtoD,
                bytes: 4096,
                is_async: true,
                stream: 7,
                corr: 12,
                src: MemoryKind::Pinned,
                dst: MemoryKind::Device,
                device_launched: Some(false),
            },
            Seen::Memcpy {
                kind: CopyKind::DtoH,
                bytes: 8192,
                is_async: false,
                stream: 8,
                corr: 13,
                src: MemoryKind::Device,
                dst: MemoryKind::Pageable,
                device_launched: Some(false),
            },
            Seen::Memset {
                value: 0xab,
                bytes: 1 << 20,
                stream: 7,
                corr: 14,
            },
            Seen::Api {
                cbid: ApiCbid::Driver(DriverCbid::LAUNCH_KERNEL),
                thread: 77,
                corr: 11,
                ret: 0,
            },
            Seen::Api {
                cbid: ApiCbid::Runtime(RuntimeCbid::LAUNCH_KERNEL),
                thread: 77,
                corr: 10,
                ret: 0,
            },
            Seen::Sync {
                ty: SyncType::StreamSynchronize,
                stream: Some(7),
                event: None,
                corr: 15,
            },
            Seen::Sync {
                ty: SyncType::ContextSynchronize,
                stream: None,
                event: None,
                corr: 16,
            },
            Seen::Overhead {
                kind: OverheadKind::CuptiBufferFlush,
                object: ActivityObject::Thread { pid: 4242, tid: 77 },
            },
        ]
    );
    // The API record names its function from the header.
    if let Seen::Api { cbid, .. } = &got[4] {
        assert_eq!(cbid.function_name(), Some("cuLaunchKernel"));
        assert_eq!(cbid.domain(), ApiDomain::Driver);
    }
    let report = tracer.stop().expect("stop");
    assert_eq!(report.stats.records, 9);
    assert!(report.dropped.is_empty());
    assert_eq!(report.panic, None);
}

#[test]
fn cupti_12_9_buffers_use_kernel9_and_no_device_launch_flag() {
    let _serial = serial();
    let d = double();
    d.set_version(28);
    let (tracer, sink) = start(ActivityKinds::CONCURRENT_KERNEL | ActivityKinds::MEMCPY);
    assert_eq!(tracer.layout(), RecordLayout::Cupti12_9);
    for i in 0..3 {
        d.kernel(
            CONCURRENT_KERNEL,
            10 * i,
            10 * i + 5,
            (0, 1, 2),
            100 + i as u32,
            c"k9",
            (1, 1, 1),
            (32, 1, 1),
        );
    }
    d.memcpy(8, true, 64, 50, 60, 2, 200);
    let report = tracer.stop().unwrap();
    let got = records(&sink);
    assert_eq!(got.len(), 4, "{got:?}");
    // Three 208-byte kernels and a 96-byte memcpy: the walk stepped by the 12.9 sizes.
    assert_eq!(report.stats.bytes, 3 * 208 + 96);
    for (i, r) in got[..3].iter().enumerate() {
        match r {
            Seen::Kernel {
                corr,
                device_launched,
                name,
                ..
            } => {
                assert_eq!(*corr, 100 + i as u32);
                assert_eq!(*device_launched, None, "12.9 kernels have no such field");
                assert_eq!(name, "k9");
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(
        got[3],
        Seen::Memcpy {
            kind: CopyKind::DtoD,
            device_launched: None,
            ..
        }
    ));
}

#[test]
fn unknown_kinds_keep_their_bytes() {
    let _serial = serial();
    let d = double();
    let (tracer, sink) = start(ActivityKinds::MEMSET);
    d.memset(1, 1, 1, 2, 0, 1);
    // A kind no header defines: the walk cannot size it, so it hands over the rest of the buffer and stops.
    let mut rec = [0u64; 4];
    rec[0] = 200;
    rec[1] = 0xfeed;
    assert_eq!(d.raw(&rec), 1);
    tracer.flush_all(FlushMode::Forced).unwrap();
    assert_eq!(
        records(&sink),
        vec![
            Seen::Memset {
                value: 1,
                bytes: 1,
                stream: 0,
                corr: 1
            },
            Seen::Unknown { kind: 200, len: 32 }
        ]
    );
    tracer.stop().unwrap();
}

#[test]
fn a_newer_release_is_walked_by_the_vendor_and_unexpected_sizes_are_errors() {
    let _serial = serial();
    let d = double();
    // 13.1 is not known exactly: the tracer steps with cuptiActivityGetNextRecord and checks each size.
    d.set_version(130_100);
    // A kind above 63 bypasses the double's enable mask, as a kind newer than the header would.
    d.set_private_kind(70, 48);
    let (tracer, sink) = start(ActivityKinds::MEMSET);
    d.memset(1, 1, 1, 2, 0, 1);
    let mut private = [0u64; 6];
    private[0] = 70;
    assert_eq!(d.raw(&private), 1);
    d.memset(2, 2, 1, 2, 0, 2);
    tracer.flush_all(FlushMode::Forced).unwrap();
    let got = records(&sink);
    assert_eq!(
        got,
        vec![
            Seen::Memset {
                value: 1,
                bytes: 1,
                stream: 0,
                corr: 1
            },
            // The vendor knows kind 70's size, so the record is handed over exactly and the walk goes on.
            Seen::Unknown { kind: 70, len: 48 },
            Seen::Memset {
                value: 2,
                bytes: 2,
                stream: 0,
                corr: 2
            },
        ]
    );
    // Now the release writes 96-byte memsets: each is an error for that record, and the walk goes on.
    d.set_private_kind(2, 96);
    let mut grown = [0u64; 12];
    grown[0] = 2;
    assert_eq!(d.raw(&grown), 1);
    assert_eq!(d.raw(&grown), 1);
    tracer.flush_all(FlushMode::Forced).unwrap();
    let got = records(&sink);
    let expected = Seen::Error(RecordError::UnexpectedSize {
        offset: 0,
        kind: ActivityKind::MEMSET,
        size: 96,
        expected: 88,
    });
    assert_eq!(got[3], expected);
    assert_eq!(
        got[4],
        Seen::Error(RecordError::UnexpectedSize {
            offset: 96,
            kind: ActivityKind::MEMSET,
            size: 96,
            expected: 88,
        })
    );
    assert_eq!(got.len(), 5);
    d.set_private_kind(0, 0);
    tracer.stop().unwrap();
}

#[test]
fn kernel_names_are_nul_terminated_strings_of_the_vendor() {
    let _serial = serial();
    let d = double();
    let (tracer, sink) = start(ActivityKinds::KERNEL);
    let long: &'static CString = Box::leak(Box::new(CString::new("x".repeat(5000)).unwrap()));
    d.kernel(
        KERNEL,
        1,
        2,
        (0, 0, 0),
        1,
        long.as_c_str(),
        (1, 1, 1),
        (1, 1, 1),
    );
    tracer.stop().unwrap();
    match &records(&sink)[0] {
        Seen::Kernel { name, .. } => assert_eq!(name.len(), 5000),
        other => panic!("{other:?}"),
    }
}
